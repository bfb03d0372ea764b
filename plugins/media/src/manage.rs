//! BUD-12: `DELETE /<sha256>` takes away the caller's ownership (the blob and its file go
//! with the last owner), and `GET /list/<pubkey>` pages a member's blobs newest first.

use crate::auth::{self, Verb};
use crate::error::MediaError;
use crate::path::{blob_of, is_sha256, pubkey_of};
use crate::plugin::Media;
use crate::upload::descriptor;
use crate::{access, rows, MAX_LIST_LIMIT};
use buzz_core::plugin::{PluginRequest, PluginResponse};

pub(crate) async fn delete(
    media: &Media,
    request: &PluginRequest,
) -> Result<PluginResponse, MediaError> {
    let sha256 = blob_of(request.path.trim_start_matches('/'))?;
    let caller = auth::caller(&media.services, request, Verb::Delete).await?;
    if !caller.covers(&sha256, true) {
        return Err(MediaError::Unauthorized(
            "the authorization's x tags do not name this blob".into(),
        ));
    }
    // A banned member keeps nothing here either: they are refused like any request.
    media
        .services
        .access
        .check_standing(&with_caller(request, &caller.pubkey))
        .await?;
    let (cid, sha, pubkey) = (
        request.ctx.community_id(),
        sha256.clone(),
        caller.pubkey.clone(),
    );
    let (fs, on_disk) = (media.fs.clone(), media.s3.is_none());
    let removed = media
        .services
        .store
        .write_own_rows(move |conn| {
            let removed = rows::remove_owner(conn, cid, &sha, &pubkey)?;
            if removed == Some(true) && on_disk {
                // In the transaction that removed the last row: an upload of the same
                // bytes (also in the writer) cannot slip its row in between.
                fs.remove(cid, &sha).map_err(|e| {
                    buzz_core::error::Reason::Internal(
                        anyhow::Error::new(e).context("deleting a blob's file"),
                    )
                })?;
            }
            Ok(removed)
        })
        .await?;
    if let (Some(true), Some(s3)) = (removed, &media.s3) {
        // After the commit: the writer does not wait on the network.
        s3.remove(request.ctx.community_id(), &sha256).await?;
    }
    match removed {
        None => Err(MediaError::NotFound),
        Some(_) => {
            media.count("deletes", 1);
            Ok(PluginResponse::bytes(204, "text/plain", Vec::new()))
        }
    }
}

pub(crate) async fn list(
    media: &Media,
    request: &PluginRequest,
) -> Result<PluginResponse, MediaError> {
    let owner = pubkey_of(request.path.trim_start_matches("/list/"))?;
    let caller = auth::caller(&media.services, request, Verb::List).await?;
    let (cursor, limit) = paging(&request.query)?;
    let (cid, who) = (request.ctx.community_id(), owner.clone());
    let found = media
        .services
        .store
        .read(move |mut conn| {
            let page = rows::list(&mut conn, cid, &who, cursor.as_deref(), limit)?;
            page.into_iter()
                .map(|blob| {
                    let bindings = rows::blob_with_bindings(&mut conn, cid, &blob.sha256)?
                        .map(|(_, b)| b)
                        .unwrap_or_default();
                    Ok((blob, bindings))
                })
                .collect::<Result<Vec<_>, buzz_core::error::Reason>>()
        })
        .await?;
    // Someone else's list shows only what the caller may read; one's own, everything
    // one still owns (a caller who may no longer read the community reads nothing).
    media
        .services
        .access
        .check_standing(&with_caller(request, &caller.pubkey))
        .await?;
    let mut shown = Vec::with_capacity(found.len());
    for (blob, bindings) in found {
        if caller.pubkey == owner
            || access::may_read(&media.services, &request.ctx, &caller.pubkey, &bindings).await
        {
            shown.push(descriptor(media, request, &blob));
        }
    }
    Ok(PluginResponse::json(200, &serde_json::Value::Array(shown)))
}

/// `cursor` (a blob hash) and `limit` (1 to [`MAX_LIST_LIMIT`]) from the query string.
fn paging(query: &str) -> Result<(Option<String>, usize), MediaError> {
    let (mut cursor, mut limit) = (None, MAX_LIST_LIMIT);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "cursor" if is_sha256(value) => cursor = Some(value.to_owned()),
            "cursor" => {
                return Err(MediaError::BadRequest(
                    "cursor must be a blob's sha256".into(),
                ))
            }
            "limit" => {
                limit = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| (1..=MAX_LIST_LIMIT).contains(n))
                    .ok_or_else(|| {
                        MediaError::BadRequest(format!("limit must be 1 to {MAX_LIST_LIMIT}"))
                    })?;
            }
            // `since`/`until` are deprecated by BUD-12 and other keys are not ours.
            _ => {}
        }
    }
    Ok((cursor, limit))
}

fn with_caller(request: &PluginRequest, pubkey: &str) -> buzz_core::ctx::ConnCtx {
    buzz_core::ctx::ConnCtx {
        pubkey: Some(pubkey.to_owned()),
        ..request.ctx.clone()
    }
}
