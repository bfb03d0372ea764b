//! `PUT /upload` (BUD-02): the body streams to a temporary file while its SHA-256 is
//! computed, its size is held to `max_blob_bytes` and the quotas, and its first bytes are
//! kept to sniff its type. Only a body that passed everything (the announced
//! `X-SHA-256`, the authorization's `x` tags or NIP-98 `payload`, the type) is moved into
//! place, in the transaction that records it; any refusal deletes the temporary file and
//! records nothing. Memory per upload: the few chunks core queues, the hasher and the
//! sniffing window, whatever the blob's size.

use crate::access;
use crate::auth::{self, Verb};
use crate::error::MediaError;
use crate::path::{extension_for, is_sha256, media_type, type_allowed};
use crate::plugin::Media;
use crate::preflight::admit;
use crate::rows::{self, NewBlob, Quotas, Recorded};
use buzz_core::plugin::{PluginRequest, PluginResponse};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// Bytes kept from the start of a body to sniff its type (every signature `infer`
/// knows sits well inside it).
const SNIFF_BYTES: usize = 8 * 1024;

pub(crate) async fn upload(
    media: &Arc<Media>,
    mut request: PluginRequest,
) -> Result<PluginResponse, MediaError> {
    let caller = auth::caller(&media.services, &request, Verb::Upload).await?;
    let announced = match request.header("x-sha-256") {
        Some(h) if is_sha256(h) => Some(h.to_owned()),
        Some(_) => {
            return Err(MediaError::BadRequest(
                "X-SHA-256 must be 64 lowercase hex characters".into(),
            ))
        }
        None => None,
    };
    if let Some(sha) = &announced {
        if !caller.covers(sha, true) {
            return Err(not_covered());
        }
    }
    let declared_type = request.header("content-type").and_then(media_type);
    let mut body = request
        .stream
        .take()
        .ok_or_else(|| MediaError::Internal(anyhow::anyhow!("PUT /upload mounted unstreamed")))?;
    let room = admit(
        media,
        &request.ctx,
        &caller,
        body.declared_len(),
        declared_type.as_deref(),
    )
    .await?;
    let _slot = media.uploads.clone().try_acquire_owned().map_err(|_| {
        MediaError::Unavailable("too many uploads in progress; retry shortly".into())
    })?;

    let mut temp = media
        .fs
        .temp()
        .await
        .map_err(|e| MediaError::io("creating an upload's temporary file", e))?;
    let mut hasher = Sha256::new();
    let mut size = 0u64;
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    let mut sniffed = None;
    let pace = Pace::new(media.services.settings.limits.body_timeout_secs);
    while let Some(chunk) = body.chunk().await {
        let chunk = chunk?;
        size += chunk.len() as u64;
        room.check(size)?;
        pace.check(size)?;
        hasher.update(&chunk);
        if head.len() < SNIFF_BYTES {
            let take = (SNIFF_BYTES - head.len()).min(chunk.len());
            head.extend_from_slice(&chunk[..take]);
            if head.len() == SNIFF_BYTES {
                // Refuse a wrong type now rather than after the whole body.
                sniffed = Some(blob_type(media, &head, declared_type.as_deref())?);
            }
        }
        temp.write(&chunk)
            .await
            .map_err(|e| MediaError::io("writing an upload", e))?;
    }
    let mime = match sniffed {
        Some(mime) => mime,
        None => blob_type(media, &head, declared_type.as_deref())?,
    };
    let sha256 = hex::encode(hasher.finalize());
    if announced.as_deref().is_some_and(|a| a != sha256) {
        return Err(MediaError::HashMismatch(format!(
            "the body's SHA-256 is {sha256}, not X-SHA-256"
        )));
    }
    if !caller.covers(&sha256, true) {
        return Err(not_covered());
    }
    // A long upload: whoever was removed or banned while it arrived keeps nothing.
    let channel = caller.channel.as_deref();
    access::may_upload(&media.services, &request.ctx, &caller.pubkey, channel).await?;
    temp.finish()
        .await
        .map_err(|e| MediaError::io("syncing an upload", e))?;

    let new = NewBlob {
        community_id: request.ctx.community_id(),
        sha256,
        size: i64::try_from(size)
            .map_err(|_| MediaError::TooLarge("blob size out of range".into()))?,
        mime,
        channel: caller.channel.clone().unwrap_or_default(),
        uploader: caller.pubkey.clone(),
        uploaded_at: media.services.clock.now_secs(),
    };
    let quotas = Quotas {
        per_pubkey: media.config.quota_bytes_per_pubkey,
        per_community: media.config.quota_bytes_per_community,
    };
    // With a bucket, a new blob's object is put before its row is recorded (the writer
    // does not wait on the network); a refusal then takes it back out.
    let put = match &media.s3 {
        Some(s3) if !exists(media, &new).await? => {
            s3.put(temp.path(), size, new.community_id, &new.sha256)
                .await?;
            true
        }
        _ => false,
    };
    let on_disk = media.s3.is_none();
    let (fs, from, job) = (media.fs.clone(), temp.path().to_owned(), new.clone());
    let recorded = media
        .services
        .store
        .write_own_rows(move |conn| {
            rows::record(conn, &job, quotas, || match on_disk {
                true => fs.keep(&from, job.community_id, &job.sha256),
                false => Ok(()),
            })
        })
        .await;
    drop(temp);
    let recorded: Recorded = match recorded {
        Ok(Ok(recorded)) => recorded,
        refused => {
            if put && !exists(media, &new).await? {
                if let Some(s3) = &media.s3 {
                    s3.remove(new.community_id, &new.sha256).await?;
                }
            }
            refused??
        }
    };
    media.count("uploads", 1);
    if recorded.created {
        media.count("bytes_stored", size);
    }
    let status = if recorded.created { 201 } else { 200 };
    Ok(PluginResponse::json(
        status,
        &descriptor(media, &request, &recorded.blob),
    ))
}

/// The slowest an upload may arrive once its first `body_timeout_secs` are over: a body
/// that trickles a byte now and then would otherwise hold an upload slot for ever (core
/// cuts only a body that sends nothing for `body_timeout_secs`).
const MIN_BYTES_PER_SEC: u64 = 16 * 1024;

struct Pace {
    started: std::time::Instant,
    grace_secs: u64,
}

impl Pace {
    fn new(grace_secs: u64) -> Pace {
        Pace {
            started: std::time::Instant::now(),
            grace_secs,
        }
    }

    /// 408 when `received` bytes is less than the pace asks for by now.
    fn check(&self, received: u64) -> Result<(), MediaError> {
        let elapsed = self.started.elapsed().as_secs_f64() - self.grace_secs as f64;
        if elapsed > 0.0 && (received as f64) < elapsed * MIN_BYTES_PER_SEC as f64 {
            return Err(MediaError::TooSlow(format!(
                "upload arrives slower than {MIN_BYTES_PER_SEC} bytes/s"
            )));
        }
        Ok(())
    }
}

/// Whether the community holds this blob already.
async fn exists(media: &Media, new: &NewBlob) -> Result<bool, MediaError> {
    let (cid, sha) = (new.community_id, new.sha256.clone());
    Ok(media
        .services
        .store
        .read(move |mut conn| rows::blob(&mut conn, cid, &sha))
        .await?
        .is_some())
}

/// The type a blob is served with: sniffed from its bytes, else the declared one, else
/// `application/octet-stream`; refused when `allowed_types` does not list it.
fn blob_type(media: &Media, head: &[u8], declared: Option<&str>) -> Result<String, MediaError> {
    let mime = infer::get(head)
        .map(|t| t.mime_type().to_owned())
        .or_else(|| declared.map(str::to_owned))
        .unwrap_or_else(|| "application/octet-stream".to_owned());
    if type_allowed(&media.config.allowed_types, &mime) {
        Ok(mime)
    } else {
        Err(MediaError::UnsupportedType(format!(
            "{mime} is not accepted here; allowed: {}",
            media.config.allowed_types.join(", ")
        )))
    }
}

fn not_covered() -> MediaError {
    MediaError::Unauthorized("the authorization does not name this blob (x or payload)".into())
}

/// A BUD-02 blob descriptor, its URL on the host the request came to.
pub(crate) fn descriptor(
    media: &Media,
    request: &PluginRequest,
    blob: &rows::BlobRow,
) -> serde_json::Value {
    json!({
        "url": format!(
            "{}://{}/{}.{}",
            media.services.settings.server.public_scheme,
            request.ctx.host_header,
            blob.sha256,
            extension_for(&blob.mime)
        ),
        "sha256": blob.sha256,
        "size": blob.size,
        "type": blob.mime,
        "uploaded": blob.uploaded_at,
    })
}
