//! `GET` and `HEAD /<sha256>[.ext]` (BUD-01): the stored type, `Accept-Ranges: bytes`, a
//! single `Range` answered 206 (or 416 past the end), the body streamed from the file or
//! the bucket. The length is the recorded size.
//! Access is asked at every request; an unknown, unreadable or other-community blob is
//! the same 404, and so is a blob only removed messages named, for everyone but its
//! uploaders and the moderators of those messages' channels.

use crate::auth::{self, Verb};
use crate::error::MediaError;
use crate::path::blob_of;
use crate::plugin::Media;
use crate::{access, rows};
use buzz_core::plugin::{PluginRequest, PluginResponse, ResponseStream};
use futures_util::StreamExt;
use tokio::io::{AsyncReadExt, AsyncSeekExt};

/// Read size of a download's chunks.
const CHUNK_BYTES: usize = 64 * 1024;

pub(crate) async fn fetch(
    media: &Media,
    request: &PluginRequest,
) -> Result<PluginResponse, MediaError> {
    let sha256 = blob_of(request.path.trim_start_matches('/'))?;
    let caller = auth::caller(&media.services, request, Verb::Get).await?;
    if !caller.covers(&sha256, false) {
        return Err(MediaError::Unauthorized(
            "the authorization's x tags do not name this blob".into(),
        ));
    }
    let cid = request.ctx.community_id();
    let sha = sha256.clone();
    let found = media
        .services
        .store
        .read(move |mut conn| rows::blob_with_bindings(&mut conn, cid, &sha))
        .await?;
    let Some((blob, bindings)) = found else {
        return Err(MediaError::NotFound);
    };
    if !access::may_read(&media.services, &request.ctx, &caller.pubkey, &bindings).await {
        return Err(MediaError::NotFound);
    }
    let (sha, pubkey) = (sha256.clone(), caller.pubkey.clone());
    let community_owner = request.ctx.community.owners.contains(&caller.pubkey);
    let allowed = media
        .services
        .store
        .read(move |mut conn| rows::removal_allows(&mut conn, cid, &sha, &pubkey, community_owner))
        .await?;
    if !allowed {
        return Err(MediaError::NotFound);
    }
    let len = u64::try_from(blob.size).unwrap_or(0);
    let range = match request.header("range") {
        Some(header) => parse_range(header, len)?,
        None => None,
    };
    let (status, start, count) = match range {
        Some((start, end)) => (206, start, end - start + 1),
        None => (200, 0, len),
    };
    let head = request.method.eq_ignore_ascii_case("HEAD");
    let stream = match (&media.s3, head) {
        (_, true) => ResponseStream::empty(count),
        (Some(s3), false) => ResponseStream::new(count, s3.get(cid, &sha256, range).await?),
        (None, false) => {
            ResponseStream::new(count, from_disk(media, cid, &sha256, start, count).await?)
        }
    };
    if !head {
        media.count("downloads", 1);
    }
    let mut response = PluginResponse::streamed(status, blob.mime, stream)
        .with_header("accept-ranges", "bytes")
        .with_header("etag", format!("\"{sha256}\""))
        // Readers differ: no shared cache may keep what one of them was allowed to see.
        .with_header("cache-control", "private, max-age=3600");
    if range.is_some() {
        response = response.with_header(
            "content-range",
            format!("bytes {start}-{}/{len}", start + count - 1),
        );
    }
    Ok(response)
}

/// `count` bytes of the blob's file from `start`, read as they are sent.
async fn from_disk(
    media: &Media,
    cid: i64,
    sha256: &str,
    start: u64,
    count: u64,
) -> Result<
    futures_util::stream::BoxStream<'static, Result<bytes::Bytes, std::io::Error>>,
    MediaError,
> {
    // A row whose file is gone (a delete racing this read) is a blob that is gone.
    let Some((mut file, _)) = media
        .fs
        .read(cid, sha256)
        .await
        .map_err(|e| MediaError::io("opening a blob", e))?
    else {
        return Err(MediaError::NotFound);
    };
    file.seek(std::io::SeekFrom::Start(start))
        .await
        .map_err(|e| MediaError::io("seeking in a blob", e))?;
    let chunks = tokio_util::io::ReaderStream::with_capacity(file.take(count), CHUNK_BYTES);
    Ok(chunks.boxed())
}

/// A `Range` header over a blob of `len` bytes: `Some((first, last))` inclusive for one
/// satisfiable range, `None` to answer the whole blob (a form this relay does not serve:
/// several ranges, another unit), 416 for a range outside the blob.
pub(crate) fn parse_range(header: &str, len: u64) -> Result<Option<(u64, u64)>, MediaError> {
    let Some(spec) = header.trim().strip_prefix("bytes=") else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let unsatisfiable = || MediaError::RangeNotSatisfiable(len);
    let malformed = || MediaError::BadRequest(format!("malformed Range: {header}"));
    let (first, last) = spec.split_once('-').ok_or_else(malformed)?;
    let number = |s: &str| s.trim().parse::<u64>().map_err(|_| malformed());
    let (first, last) = match (first.trim().is_empty(), last.trim().is_empty()) {
        // `bytes=-n`: the last n bytes.
        (true, false) => {
            let n = number(last)?;
            if n == 0 || len == 0 {
                return Err(unsatisfiable());
            }
            (len.saturating_sub(n), len - 1)
        }
        (false, true) => (number(first)?, len.saturating_sub(1)),
        (false, false) => {
            let (a, b) = (number(first)?, number(last)?);
            if b < a {
                return Err(malformed());
            }
            (a, b.min(len.saturating_sub(1)))
        }
        (true, true) => return Err(malformed()),
    };
    if len == 0 || first >= len {
        return Err(unsatisfiable());
    }
    Ok(Some((first, last)))
}

#[cfg(test)]
mod tests {
    use super::parse_range;

    #[test]
    fn single_ranges_are_served_and_the_rest_is_the_whole_blob_or_refused() {
        assert_eq!(parse_range("bytes=0-9", 100).ok().flatten(), Some((0, 9)));
        assert_eq!(parse_range("bytes=90-", 100).ok().flatten(), Some((90, 99)));
        assert_eq!(parse_range("bytes=-10", 100).ok().flatten(), Some((90, 99)));
        assert_eq!(parse_range("bytes=-500", 100).ok().flatten(), Some((0, 99)));
        assert_eq!(
            parse_range("bytes=50-500", 100).ok().flatten(),
            Some((50, 99))
        );
        assert!(matches!(parse_range("bytes=0-1,5-6", 100), Ok(None)));
        assert!(matches!(parse_range("items=0-1", 100), Ok(None)));
        for unsatisfiable in ["bytes=100-", "bytes=100-200", "bytes=-0"] {
            assert_eq!(
                parse_range(unsatisfiable, 100).err().map(|e| e.status()),
                Some(416),
                "{unsatisfiable}"
            );
        }
        for malformed in ["bytes=9-1", "bytes=a-b", "bytes=-", "bytes=5"] {
            assert_eq!(
                parse_range(malformed, 100).err().map(|e| e.status()),
                Some(400),
                "{malformed}"
            );
        }
    }
}
