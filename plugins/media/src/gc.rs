//! Garbage collection: a blob no live stored event names (`media_refs` joined with
//! `events`, deleted ones left out) and that nobody uploaded within `orphan_grace_secs`
//! is deleted: its owners, its row, its file. Each blob is re-checked and deleted in one
//! transaction of its own (in the relay: core's writer, where uploads record theirs, so
//! an upload of the same bytes cannot slip in between; a bucket's object is deleted
//! just after). The background sweep runs every
//! `gc_interval_secs` in each relay process; `buzz-relay media gc` runs it once. Upload
//! temporaries abandoned for an hour (a process that died mid-upload) go too.

use crate::error::MediaError;
use crate::fs_store::FsStore;
use crate::s3_store::S3Store;
use buzz_core::error::Reason;
use buzz_core::store::prepared::{execute, load, Val};
use buzz_core::store::{Conn, Store};
use diesel::sql_types::{BigInt, Text};
use diesel::QueryableByName;
use std::time::Duration;

/// Blobs looked at per round.
const BATCH: i64 = 100;
/// Age past which an upload's temporary file is abandoned.
const TEMP_MAX_AGE_SECS: u64 = 3_600;

/// What one sweep deleted.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Swept {
    pub(crate) blobs: u64,
    pub(crate) bytes: u64,
    pub(crate) temp_files: u64,
}

#[derive(QueryableByName)]
struct Orphan {
    #[diesel(sql_type = BigInt)]
    community_id: i64,
    #[diesel(sql_type = Text)]
    sha256: String,
    #[diesel(sql_type = BigInt)]
    size: i64,
}

/// A blob with no upload since the cutoff and no live event naming it.
const ORPHAN: &str = "b.uploaded_at <= ? \
    AND NOT EXISTS (SELECT 1 FROM media_owners o WHERE o.community_id = b.community_id \
        AND o.sha256 = b.sha256 AND o.uploaded_at > ?) \
    AND NOT EXISTS (SELECT 1 FROM media_refs r JOIN events e ON e.seq = r.event_seq \
        WHERE r.community_id = b.community_id AND r.sha256 = b.sha256 \
        AND e.deleted_at IS NULL)";

fn orphans(conn: &mut Conn<'_>, cutoff: i64) -> Result<Vec<Orphan>, Reason> {
    load(
        conn,
        &format!(
            "SELECT b.community_id, b.sha256, b.size FROM media_blobs b WHERE {ORPHAN} \
             ORDER BY b.community_id, b.sha256 LIMIT ?"
        ),
        &[Val::I(cutoff), Val::I(cutoff), Val::I(BATCH)],
    )
}

/// Delete one blob if it is still an orphan: `true` when it was.
fn collect(
    conn: &mut Conn<'_>,
    fs: &FsStore,
    cid: i64,
    sha: &str,
    cutoff: i64,
) -> Result<bool, Reason> {
    let still: Vec<Orphan> = load(
        conn,
        &format!(
            "SELECT b.community_id, b.sha256, b.size FROM media_blobs b \
             WHERE b.community_id = ? AND b.sha256 = ? AND {ORPHAN}"
        ),
        &[Val::I(cid), Val::T(sha), Val::I(cutoff), Val::I(cutoff)],
    )?;
    if still.is_empty() {
        return Ok(false);
    }
    for table in ["media_refs", "media_owners", "media_blobs"] {
        execute(
            conn,
            &format!("DELETE FROM {table} WHERE community_id = ? AND sha256 = ?"),
            &[Val::I(cid), Val::T(sha)],
        )?;
    }
    fs.remove(cid, sha).map_err(|e| {
        Reason::Internal(anyhow::Error::new(e).context("deleting an orphaned blob's file"))
    })?;
    Ok(true)
}

/// One sweep on a single connection (`buzz-relay media gc`), every blob in its own
/// transaction. Also returns the blobs deleted, whose objects a bucket still holds.
pub(crate) fn sweep_conn(
    conn: &mut Conn<'_>,
    fs: &FsStore,
    now: i64,
    grace_secs: u64,
) -> Result<(Swept, Vec<(i64, String)>), Reason> {
    let cutoff = cutoff(now, grace_secs);
    let mut swept = Swept {
        temp_files: sweep_temp(fs),
        ..Swept::default()
    };
    let mut removed = Vec::new();
    loop {
        let batch = orphans(conn, cutoff)?;
        let last_round = (batch.len() as i64) < BATCH;
        let mut progress = false;
        for o in batch {
            if conn.savepoint(|c| collect(c, fs, o.community_id, &o.sha256, cutoff))? {
                swept.blobs += 1;
                swept.bytes += o.size.max(0) as u64;
                removed.push((o.community_id, o.sha256));
                progress = true;
            }
        }
        if last_round || !progress {
            return Ok((swept, removed));
        }
    }
}

/// One sweep through a running relay's store: candidates read, each deleted by the writer.
pub(crate) async fn sweep(
    store: &Store,
    fs: &std::sync::Arc<FsStore>,
    s3: Option<&S3Store>,
    now: i64,
    grace_secs: u64,
) -> Result<Swept, MediaError> {
    let cutoff = cutoff(now, grace_secs);
    let mut swept = Swept {
        temp_files: sweep_temp(fs),
        ..Swept::default()
    };
    loop {
        let batch = store
            .read(move |mut conn| orphans(&mut conn, cutoff))
            .await?;
        let last_round = (batch.len() as i64) < BATCH;
        let mut progress = false;
        for o in batch {
            let (fs, sha) = (fs.clone(), o.sha256.clone());
            let cid = o.community_id;
            if store
                .write_own_rows(move |conn| collect(conn, &fs, cid, &sha, cutoff))
                .await?
            {
                if let Some(s3) = s3 {
                    s3.remove(o.community_id, &o.sha256).await?;
                }
                swept.blobs += 1;
                swept.bytes += o.size.max(0) as u64;
                progress = true;
            }
        }
        if last_round || !progress {
            return Ok(swept);
        }
    }
}

fn cutoff(now: i64, grace_secs: u64) -> i64 {
    now.saturating_sub(i64::try_from(grace_secs).unwrap_or(i64::MAX))
}

/// Upload temporaries not written to for an hour (far past any upload's
/// `body_timeout_secs`: the process writing it died); failures to list or delete are the
/// next sweep's to retry.
fn sweep_temp(fs: &FsStore) -> u64 {
    fs.remove_temps_older_than(Duration::from_secs(TEMP_MAX_AGE_SECS))
}
