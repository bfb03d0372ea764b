//! Blobs in an S3-compatible bucket (`store = "s3"`), the store several relay processes
//! share: key `<community id>/<sha256>`. Requests are signed with AWS SigV4 by the
//! `rust-s3` crate (presigned URLs and deletes, nothing hand-signed); the bytes stream
//! through them with reqwest, so no blob is ever held whole — an upload goes from its
//! verified temporary file, a download (or its `Range`) from the bucket's answer.
//!
//! Object writes happen outside the database transaction (the network is not the
//! writer's to wait on): an accepted upload is put under its final key just before it is
//! recorded, and an object whose row is gone is deleted just after.

use crate::error::MediaError;
use crate::Config;
use bytes::Bytes;
use futures_util::stream::BoxStream;
use futures_util::{StreamExt, TryStreamExt};
use s3::creds::Credentials;
use s3::{Bucket, Region};
use std::path::Path;

/// How long a presigned URL stays valid: the request starts at once, so this only has
/// to cover clock differences.
const PRESIGN_SECS: u32 = 300;

pub(crate) struct S3Store {
    bucket: Box<Bucket>,
    http: reqwest::Client,
}

/// A failure of the bucket, with its cause, as a retryable 503 (the cause is logged).
fn unavailable(what: &str, cause: impl std::fmt::Display) -> MediaError {
    tracing::warn!(error = %cause, "media s3 store: {what}");
    MediaError::Unavailable(format!("the media store is unavailable ({what})"))
}

impl S3Store {
    pub(crate) fn new(config: &Config) -> anyhow::Result<S3Store> {
        let region = Region::Custom {
            region: if config.region.is_empty() {
                "us-east-1".to_owned()
            } else {
                config.region.clone()
            },
            endpoint: config.endpoint.trim_end_matches('/').to_owned(),
        };
        let credentials = Credentials::new(
            Some(&config.access_key_id),
            Some(&config.secret_access_key),
            None,
            None,
            None,
        )?;
        let mut bucket = Bucket::new(&config.bucket, region, credentials)?;
        if config.path_style {
            bucket = bucket.with_path_style();
        }
        Ok(S3Store {
            bucket,
            http: reqwest::Client::new(),
        })
    }

    fn key(cid: i64, sha256: &str) -> String {
        format!("{cid}/{sha256}")
    }

    /// Put the verified file at `from` (`len` bytes) as blob `sha256` of `cid`.
    pub(crate) async fn put(
        &self,
        from: &Path,
        len: u64,
        cid: i64,
        sha256: &str,
    ) -> Result<(), MediaError> {
        let url = self
            .bucket
            .presign_put(Self::key(cid, sha256), PRESIGN_SECS, None, None)
            .await
            .map_err(|e| unavailable("signing an upload", e))?;
        let file = tokio::fs::File::open(from)
            .await
            .map_err(|e| MediaError::io("reopening an upload", e))?;
        let body = reqwest::Body::wrap_stream(tokio_util::io::ReaderStream::new(file));
        let answer = self
            .http
            .put(url)
            .header(reqwest::header::CONTENT_LENGTH, len)
            .body(body)
            .send()
            .await
            .map_err(|e| unavailable("uploading", e))?;
        if !answer.status().is_success() {
            return Err(unavailable("uploading", answer.status()));
        }
        Ok(())
    }

    /// The blob's bytes, or `range` of them (first and last, inclusive), as they arrive.
    pub(crate) async fn get(
        &self,
        cid: i64,
        sha256: &str,
        range: Option<(u64, u64)>,
    ) -> Result<BoxStream<'static, Result<Bytes, std::io::Error>>, MediaError> {
        let url = self
            .bucket
            .presign_get(Self::key(cid, sha256), PRESIGN_SECS, None)
            .await
            .map_err(|e| unavailable("signing a download", e))?;
        let mut request = self.http.get(url);
        if let Some((first, last)) = range {
            request = request.header(reqwest::header::RANGE, format!("bytes={first}-{last}"));
        }
        let answer = request
            .send()
            .await
            .map_err(|e| unavailable("downloading", e))?;
        match answer.status().as_u16() {
            200 | 206 => Ok(answer.bytes_stream().map_err(std::io::Error::other).boxed()),
            // A row whose object is gone (a delete racing this read) is a blob that is gone.
            404 => Err(MediaError::NotFound),
            status => Err(unavailable("downloading", status)),
        }
    }

    /// Delete the blob's object (already gone is fine).
    pub(crate) async fn remove(&self, cid: i64, sha256: &str) -> Result<(), MediaError> {
        match self.bucket.delete_object(Self::key(cid, sha256)).await {
            Ok(_) => Ok(()),
            Err(s3::error::S3Error::HttpFailWithBody(404, _)) => Ok(()),
            Err(e) => Err(unavailable("deleting", e)),
        }
    }
}
