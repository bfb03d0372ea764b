//! Blobs on disk (`store = "fs"`): `<dir>/<community id>/<first two hex>/<sha256>`, one
//! file per blob and community. An upload is written to `<dir>/tmp/<random>.part`, synced,
//! and renamed into place only once its hash, size, type and quotas passed, so a blob's
//! path never names a partial file; the rename happens in the transaction that records
//! the blob ([`crate::rows::record`]). Every name is built from a checked hash and a
//! number, never from request text.

use std::io;
use std::path::{Path, PathBuf};
use tokio::io::AsyncWriteExt;

pub(crate) struct FsStore {
    dir: PathBuf,
}

impl FsStore {
    /// The store under `dir`, creating it (and its `tmp/`) if needed.
    pub(crate) fn open(dir: PathBuf) -> io::Result<FsStore> {
        std::fs::create_dir_all(dir.join("tmp"))?;
        Ok(FsStore { dir })
    }

    /// Where blob `sha256` of community `cid` lives (`sha256` already checked as hex).
    pub(crate) fn path(&self, cid: i64, sha256: &str) -> PathBuf {
        let fan = sha256.get(..2).unwrap_or("00");
        self.dir.join(cid.to_string()).join(fan).join(sha256)
    }

    /// A new temporary file for an upload; removed on drop unless moved into place.
    pub(crate) async fn temp(&self) -> io::Result<TempBlob> {
        let name = format!("{}.part", uuid::Uuid::new_v4().simple());
        let path = self.dir.join("tmp").join(name);
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .await?;
        Ok(TempBlob { path, file })
    }

    /// Move `temp` into place as blob `sha256` of `cid` (blocking: it runs in the
    /// transaction that records the blob). Run again after the move, it finds the blob
    /// already there and succeeds.
    pub(crate) fn keep(&self, temp: &Path, cid: i64, sha256: &str) -> io::Result<()> {
        let dest = self.path(cid, sha256);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent)?;
        }
        match std::fs::rename(temp, &dest) {
            Err(e) if e.kind() == io::ErrorKind::NotFound && dest.exists() => Ok(()),
            other => other,
        }
    }

    /// The blob's file, opened for reading, and its length; `None` when it is not there.
    pub(crate) async fn read(
        &self,
        cid: i64,
        sha256: &str,
    ) -> io::Result<Option<(tokio::fs::File, u64)>> {
        match tokio::fs::File::open(self.path(cid, sha256)).await {
            Ok(file) => {
                let len = file.metadata().await?.len();
                Ok(Some((file, len)))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Delete upload temporaries not modified for `age`; how many went.
    pub(crate) fn remove_temps_older_than(&self, age: std::time::Duration) -> u64 {
        let Ok(entries) = std::fs::read_dir(self.dir.join("tmp")) else {
            return 0;
        };
        let stale = |e: &std::fs::DirEntry| {
            e.metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|elapsed| elapsed > age)
        };
        entries
            .flatten()
            .filter(|e| stale(e) && std::fs::remove_file(e.path()).is_ok())
            .count() as u64
    }

    /// Delete the blob's file (already gone is fine).
    pub(crate) fn remove(&self, cid: i64, sha256: &str) -> io::Result<()> {
        match std::fs::remove_file(self.path(cid, sha256)) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            other => other,
        }
    }
}

/// An upload being written. Dropped without [`FsStore::keep`] having moved it (a refusal,
/// a broken connection, a failure), its file is deleted.
pub(crate) struct TempBlob {
    path: PathBuf,
    file: tokio::fs::File,
}

impl TempBlob {
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) async fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.file.write_all(bytes).await
    }

    /// Everything written reaches the disk before the blob is recorded.
    pub(crate) async fn finish(&mut self) -> io::Result<()> {
        self.file.flush().await?;
        self.file.sync_all().await
    }
}

impl Drop for TempBlob {
    fn drop(&mut self) {
        // Gone already when it was kept; any other failure leaves a `.part` file the
        // store never serves (only names of 64 hex characters are).
        let _ = std::fs::remove_file(&self.path);
    }
}
