//! What an upload must pass before its body is read, shared by `HEAD /upload` (BUD-06:
//! the whole answer) and `PUT /upload` (the first checks): the size against
//! `max_blob_bytes`, the declared type against `allowed_types`, the access service (may
//! the caller upload, and into the `h` channel?), and the quotas as they stand.

use crate::auth::{self, Caller, Verb};
use crate::error::MediaError;
use crate::path::{is_sha256, media_type, type_allowed};
use crate::plugin::Media;
use crate::{access, rows};
use buzz_core::ctx::ConnCtx;
use buzz_core::plugin::{PluginRequest, PluginResponse};

/// How many bytes an admitted upload may bring, and what refusing more would say.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Room {
    pub max_blob: u64,
    /// Quota left for the uploader (`u64::MAX`: no quota).
    pub pubkey_left: u64,
    /// Quota left for the community (`u64::MAX`: no quota).
    pub community_left: u64,
}

impl Room {
    /// The refusal for a body that reached `size` bytes, if it is one.
    pub(crate) fn check(&self, size: u64) -> Result<(), MediaError> {
        if size > self.max_blob {
            return Err(MediaError::TooLarge(format!(
                "blobs are at most {} bytes (max_blob_bytes)",
                self.max_blob
            )));
        }
        if size > self.pubkey_left {
            return Err(MediaError::Quota(format!(
                "your media quota has {} bytes left",
                self.pubkey_left
            )));
        }
        if size > self.community_left {
            return Err(MediaError::Quota(format!(
                "the community's media quota has {} bytes left",
                self.community_left
            )));
        }
        Ok(())
    }
}

/// The checks before any body byte: `size` and `declared_type` as the client announced
/// them (either may be unknown; the body is counted and sniffed as it arrives anyway).
pub(crate) async fn admit(
    media: &Media,
    ctx: &ConnCtx,
    caller: &Caller,
    size: Option<u64>,
    declared_type: Option<&str>,
) -> Result<Room, MediaError> {
    let config = &media.config;
    if let Some(mime) = declared_type.and_then(media_type) {
        if !type_allowed(&config.allowed_types, &mime) {
            return Err(MediaError::UnsupportedType(format!(
                "{mime} is not accepted here; allowed: {}",
                config.allowed_types.join(", ")
            )));
        }
    }
    let unlimited = Room {
        max_blob: config.max_blob_bytes,
        pubkey_left: u64::MAX,
        community_left: u64::MAX,
    };
    if let Some(size) = size {
        unlimited.check(size)?;
    }
    access::may_upload(
        &media.services,
        ctx,
        &caller.pubkey,
        caller.channel.as_deref(),
    )
    .await?;
    let (cid, pubkey) = (ctx.community_id(), caller.pubkey.clone());
    let (pubkey_used, community_used) = media
        .services
        .store
        .read(move |mut conn| {
            Ok((
                rows::pubkey_usage(&mut conn, cid, &pubkey)?,
                rows::community_usage(&mut conn, cid)?,
            ))
        })
        .await?;
    let left = |quota: u64, used: u64| match quota {
        0 => u64::MAX,
        q => q.saturating_sub(used),
    };
    let room = Room {
        pubkey_left: left(config.quota_bytes_per_pubkey, pubkey_used),
        community_left: left(config.quota_bytes_per_community, community_used),
        ..unlimited
    };
    if let Some(size) = size {
        room.check(size)?;
    }
    Ok(room)
}

/// `HEAD /upload`: would `PUT /upload` of the announced blob be accepted now?
pub(crate) async fn preflight(
    media: &Media,
    request: &PluginRequest,
) -> Result<PluginResponse, MediaError> {
    let caller = auth::caller(&media.services, request, Verb::Upload).await?;
    let sha256 = request
        .header("x-sha-256")
        .ok_or_else(|| MediaError::BadRequest("X-SHA-256 is required".into()))?;
    if !is_sha256(sha256) {
        return Err(MediaError::BadRequest(
            "X-SHA-256 must be 64 lowercase hex characters".into(),
        ));
    }
    if !caller.covers(sha256, true) {
        return Err(MediaError::Unauthorized(
            "the authorization's x tags do not name this blob".into(),
        ));
    }
    let size = request
        .header("x-content-length")
        .ok_or(MediaError::LengthRequired)?
        .trim()
        .parse::<u64>()
        .map_err(|_| MediaError::BadRequest("X-Content-Length must be a byte count".into()))?;
    admit(
        media,
        &request.ctx,
        &caller,
        Some(size),
        request.header("x-content-type"),
    )
    .await?;
    Ok(PluginResponse::bytes(200, "text/plain", Vec::new()))
}
