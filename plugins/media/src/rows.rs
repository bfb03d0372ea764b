//! The plugin's tables (`media_blobs`, `media_owners`; migrations in `migrations/`), one
//! SQL text for both backends through core's prepared statements. Quotas are checked in
//! the transaction that records an upload, so what is kept never passes them (one
//! process's writes are serialized by core's writer).

use crate::error::MediaError;
use buzz_core::error::Reason;
use buzz_core::store::prepared::{execute, first, load, Val};
use buzz_core::store::Conn;
use diesel::sql_types::{BigInt, Text};
use diesel::QueryableByName;

/// A blob's metadata row.
#[derive(Debug, Clone, QueryableByName)]
pub(crate) struct BlobRow {
    #[diesel(sql_type = Text)]
    pub sha256: String,
    #[diesel(sql_type = BigInt)]
    pub size: i64,
    #[diesel(sql_type = Text)]
    pub mime: String,
    /// When this blob was uploaded: the first upload, or in a `/list` the listed owner's.
    #[diesel(sql_type = BigInt)]
    pub uploaded_at: i64,
}

#[derive(QueryableByName)]
struct Binding {
    #[diesel(sql_type = Text)]
    channel: String,
}

#[derive(QueryableByName)]
struct Total {
    #[diesel(sql_type = BigInt)]
    v: i64,
}

#[derive(QueryableByName)]
struct Naming {
    #[diesel(sql_type = BigInt)]
    live: i64,
    #[diesel(sql_type = Text)]
    channel: String,
}

/// Whether a blob whose every naming event was removed (a 9005, an author's deletion) is
/// still for `pubkey`: `true` unless such removals hid it and `pubkey` is neither one of
/// its owners, a community owner (`community_owner`), nor an owner or admin of a channel
/// those messages were in. A blob no event names, or a live one does, is not hidden.
pub(crate) fn removal_allows(
    conn: &mut Conn<'_>,
    cid: i64,
    sha: &str,
    pubkey: &str,
    community_owner: bool,
) -> Result<bool, Reason> {
    let naming: Vec<Naming> = load(
        conn,
        "SELECT CAST(CASE WHEN e.deleted_at IS NULL THEN 1 ELSE 0 END AS BIGINT) AS live, \
         COALESCE(e.channel_id, '') AS channel FROM media_refs r \
         JOIN events e ON e.seq = r.event_seq \
         WHERE r.community_id = ? AND r.sha256 = ? LIMIT 64",
        &[Val::I(cid), Val::T(sha)],
    )?;
    if naming.is_empty() || naming.iter().any(|n| n.live == 1) || community_owner {
        return Ok(true);
    }
    let owner: Option<Total> = first(
        conn,
        "SELECT CAST(1 AS BIGINT) AS v FROM media_owners \
         WHERE community_id = ? AND sha256 = ? AND pubkey = ?",
        &[Val::I(cid), Val::T(sha), Val::T(pubkey)],
    )?;
    if owner.is_some() {
        return Ok(true);
    }
    for n in naming.iter().filter(|n| !n.channel.is_empty()) {
        let role = buzz_core::store::channel_state::member_role(conn, cid, &n.channel, pubkey)?;
        if matches!(role.as_deref(), Some("owner" | "admin")) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// One community's use of the store, for the console.
#[derive(Debug, QueryableByName)]
pub(crate) struct Usage {
    #[diesel(sql_type = Text)]
    pub host: String,
    #[diesel(sql_type = BigInt)]
    pub blobs: i64,
    #[diesel(sql_type = BigInt)]
    pub bytes: i64,
}

/// What an accepted upload records.
#[derive(Debug, Clone)]
pub(crate) struct NewBlob {
    pub community_id: i64,
    pub sha256: String,
    pub size: i64,
    pub mime: String,
    /// '' when unbound.
    pub channel: String,
    pub uploader: String,
    pub uploaded_at: i64,
}

/// Quotas (0: none) an upload is recorded under.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Quotas {
    pub per_pubkey: u64,
    pub per_community: u64,
}

/// How an upload was recorded.
pub(crate) struct Recorded {
    pub blob: BlobRow,
    /// The community had no such blob before (BUD-02: 201 rather than 200).
    pub created: bool,
}

const BLOB: &str = "SELECT sha256, size, mime, uploaded_at FROM media_blobs \
                    WHERE community_id = ? AND sha256 = ?";

pub(crate) fn blob(conn: &mut Conn<'_>, cid: i64, sha: &str) -> Result<Option<BlobRow>, Reason> {
    first(conn, BLOB, &[Val::I(cid), Val::T(sha)])
}

/// Every owner's binding of one blob: a channel, or `None` (unbound).
pub(crate) type Bindings = Vec<Option<String>>;

/// The blob and every owner's binding, or `None` when there is no such blob.
pub(crate) fn blob_with_bindings(
    conn: &mut Conn<'_>,
    cid: i64,
    sha: &str,
) -> Result<Option<(BlobRow, Bindings)>, Reason> {
    let Some(row) = blob(conn, cid, sha)? else {
        return Ok(None);
    };
    let bindings: Vec<Binding> = load(
        conn,
        "SELECT DISTINCT channel FROM media_owners WHERE community_id = ? AND sha256 = ?",
        &[Val::I(cid), Val::T(sha)],
    )?;
    let bindings = bindings
        .into_iter()
        .map(|b| (!b.channel.is_empty()).then_some(b.channel))
        .collect();
    Ok(Some((row, bindings)))
}

/// Bytes of the blobs `pubkey` owns in the community.
pub(crate) fn pubkey_usage(conn: &mut Conn<'_>, cid: i64, pubkey: &str) -> Result<u64, Reason> {
    let total: Option<Total> = first(
        conn,
        "SELECT CAST(COALESCE(SUM(b.size), 0) AS BIGINT) AS v FROM media_owners o \
         JOIN media_blobs b ON b.community_id = o.community_id AND b.sha256 = o.sha256 \
         WHERE o.community_id = ? AND o.pubkey = ?",
        &[Val::I(cid), Val::T(pubkey)],
    )?;
    Ok(total.map_or(0, |t| t.v.max(0) as u64))
}

/// Bytes of the community's blobs.
pub(crate) fn community_usage(conn: &mut Conn<'_>, cid: i64) -> Result<u64, Reason> {
    let total: Option<Total> = first(
        conn,
        "SELECT CAST(COALESCE(SUM(size), 0) AS BIGINT) AS v FROM media_blobs \
         WHERE community_id = ?",
        &[Val::I(cid)],
    )?;
    Ok(total.map_or(0, |t| t.v.max(0) as u64))
}

/// Record `new` for its uploader: a new blob row, or one more owner of an existing one,
/// within the quotas (a refusal is the inner `Err`, with nothing written). Then `keep`
/// runs (it moves the file into place) inside the same transaction; its failure is the
/// outer `Err`, which rolls the rows back.
pub(crate) fn record(
    conn: &mut Conn<'_>,
    new: &NewBlob,
    quotas: Quotas,
    keep: impl Fn() -> std::io::Result<()>,
) -> Result<Result<Recorded, MediaError>, Reason> {
    let (cid, sha, pk) = (new.community_id, new.sha256.as_str(), new.uploader.as_str());
    if let Conn::Pg(_) = conn {
        // Relay processes on one PostgreSQL record uploads in transactions of their own:
        // without a lock, two could each read the usage before the other's row and both
        // pass a quota. The lock is the community's, held until this transaction ends,
        // so the usage read below includes every upload recorded before it.
        execute(
            conn,
            "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))",
            &[Val::T(&format!("buzz media quota {cid}"))],
        )?;
    }
    let existing = blob(conn, cid, sha)?;
    let owner: Option<Total> = first(
        conn,
        "SELECT CAST(1 AS BIGINT) AS v FROM media_owners WHERE community_id = ? AND sha256 = ? AND pubkey = ?",
        &[Val::I(cid), Val::T(sha), Val::T(pk)],
    )?;
    let size = new.size.max(0) as u64;
    if owner.is_none() {
        let used = pubkey_usage(conn, cid, pk)?;
        if quotas.per_pubkey > 0 && used + size > quotas.per_pubkey {
            return Ok(Err(quota_refusal("your", used, quotas.per_pubkey)));
        }
    }
    if existing.is_none() {
        let used = community_usage(conn, cid)?;
        if quotas.per_community > 0 && used + size > quotas.per_community {
            return Ok(Err(quota_refusal(
                "the community's",
                used,
                quotas.per_community,
            )));
        }
        execute(
            conn,
            "INSERT INTO media_blobs (community_id, sha256, size, mime, channel, uploader, \
             uploaded_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            &[
                Val::I(cid),
                Val::T(sha),
                Val::I(new.size),
                Val::T(&new.mime),
                Val::T(&new.channel),
                Val::T(pk),
                Val::I(new.uploaded_at),
            ],
        )?;
    }
    if owner.is_none() {
        execute(
            conn,
            "INSERT INTO media_owners (community_id, sha256, pubkey, channel, uploaded_at) \
             VALUES (?, ?, ?, ?, ?)",
            &[
                Val::I(cid),
                Val::T(sha),
                Val::T(pk),
                Val::T(&new.channel),
                Val::I(new.uploaded_at),
            ],
        )?;
    }
    keep().map_err(|e| {
        Reason::Internal(anyhow::Error::new(e).context("moving an uploaded blob into place"))
    })?;
    let blob = match existing.clone() {
        Some(row) => row,
        None => BlobRow {
            sha256: new.sha256.clone(),
            size: new.size,
            mime: new.mime.clone(),
            uploaded_at: new.uploaded_at,
        },
    };
    Ok(Ok(Recorded {
        blob,
        created: existing.is_none(),
    }))
}

fn quota_refusal(whose: &str, used: u64, quota: u64) -> MediaError {
    MediaError::Quota(format!(
        "{whose} media quota is {quota} bytes and {used} are used"
    ))
}

/// Take `pubkey`'s ownership of a blob away. `None`: they owned no such blob; `Some(true)`:
/// it was the last owner, and the blob's row is gone too.
pub(crate) fn remove_owner(
    conn: &mut Conn<'_>,
    cid: i64,
    sha: &str,
    pubkey: &str,
) -> Result<Option<bool>, Reason> {
    let removed = execute(
        conn,
        "DELETE FROM media_owners WHERE community_id = ? AND sha256 = ? AND pubkey = ?",
        &[Val::I(cid), Val::T(sha), Val::T(pubkey)],
    )?;
    if removed == 0 {
        return Ok(None);
    }
    let left: Option<Total> = first(
        conn,
        "SELECT CAST(1 AS BIGINT) AS v FROM media_owners WHERE community_id = ? AND sha256 = ?",
        &[Val::I(cid), Val::T(sha)],
    )?;
    if left.is_some() {
        return Ok(Some(false));
    }
    execute(
        conn,
        "DELETE FROM media_blobs WHERE community_id = ? AND sha256 = ?",
        &[Val::I(cid), Val::T(sha)],
    )?;
    Ok(Some(true))
}

/// A page of `pubkey`'s blobs, newest upload first (BUD-12), after the blob `cursor`
/// names (it must be one of theirs; otherwise the page starts at the newest).
pub(crate) fn list(
    conn: &mut Conn<'_>,
    cid: i64,
    pubkey: &str,
    cursor: Option<&str>,
    limit: usize,
) -> Result<Vec<BlobRow>, Reason> {
    let limit = limit as i64;
    const COLUMNS: &str = "SELECT b.sha256, b.size, b.mime, o.uploaded_at FROM media_owners o \
        JOIN media_blobs b ON b.community_id = o.community_id AND b.sha256 = o.sha256 \
        WHERE o.community_id = ? AND o.pubkey = ?";
    let after: Option<Total> = match cursor {
        Some(sha) => first(
            conn,
            "SELECT uploaded_at AS v FROM media_owners \
             WHERE community_id = ? AND pubkey = ? AND sha256 = ?",
            &[Val::I(cid), Val::T(pubkey), Val::T(sha)],
        )?,
        None => None,
    };
    match (after, cursor) {
        (Some(at), Some(sha)) => load(
            conn,
            &format!(
                "{COLUMNS} AND (o.uploaded_at < ? OR (o.uploaded_at = ? AND o.sha256 < ?)) \
                 ORDER BY o.uploaded_at DESC, o.sha256 DESC LIMIT ?"
            ),
            &[
                Val::I(cid),
                Val::T(pubkey),
                Val::I(at.v),
                Val::I(at.v),
                Val::T(sha),
                Val::I(limit),
            ],
        ),
        _ => load(
            conn,
            &format!("{COLUMNS} ORDER BY o.uploaded_at DESC, o.sha256 DESC LIMIT ?"),
            &[Val::I(cid), Val::T(pubkey), Val::I(limit)],
        ),
    }
}

/// Blobs and bytes per community, by host (the console's usage table).
pub(crate) fn usage_by_community(conn: &mut Conn<'_>) -> Result<Vec<Usage>, Reason> {
    load(
        conn,
        "SELECT c.host AS host, CAST(COUNT(*) AS BIGINT) AS blobs, \
         CAST(COALESCE(SUM(b.size), 0) AS BIGINT) AS bytes \
         FROM media_blobs b JOIN communities c ON c.id = b.community_id \
         GROUP BY c.host ORDER BY c.host LIMIT 100",
        &[],
    )
}
