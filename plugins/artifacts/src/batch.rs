//! Artifact state for many identities at once: what a caller holding thousands of
//! captured (artifact, revision, channel) triples needs to recheck them in a few
//! statements rather than one per artifact (the NIP-AR stable manifest transport).
//! Chunked so every statement stays within both backends' parameter limits.

use crate::envelope::Op;
use crate::heads::{artifact_heads, artifact_revisions, Head, Revision};
use buzz_core::error::Reason;
use buzz_core::store::Conn;
use buzz_core::with_conn;
use diesel::prelude::*;

/// Values per `IN (…)` list.
const CHUNK: usize = 500;

/// The heads of these identities (unused ones are absent).
pub fn heads_of(
    conn: &mut Conn<'_>,
    community_id: i64,
    ds: &[String],
) -> Result<Vec<Head>, Reason> {
    let mut out = Vec::with_capacity(ds.len());
    for chunk in ds.chunks(CHUNK) {
        out.extend(with_conn!(conn, |c| artifact_heads::table
            .filter(artifact_heads::community_id.eq(community_id))
            .filter(artifact_heads::d.eq_any(chunk))
            .select(Head::as_select())
            .load(c))?);
    }
    Ok(out)
}

/// These accepted revisions (ids that are not revisions here are absent).
pub fn revisions_by_id(
    conn: &mut Conn<'_>,
    community_id: i64,
    ids: &[String],
) -> Result<Vec<Revision>, Reason> {
    let mut out = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(CHUNK) {
        out.extend(with_conn!(conn, |c| artifact_revisions::table
            .filter(artifact_revisions::community_id.eq(community_id))
            .filter(artifact_revisions::revision_id.eq_any(chunk))
            .select(Revision::as_select())
            .load(c))?);
    }
    Ok(out)
}

/// Every accepted revision of these identities that changed whether or where the
/// artifact is listed — a move, a delete, a restore — in no particular order. Updates
/// keep the home and the listing, so they are left out: a caller asking "did anything
/// structural happen after revision N" reads only these.
pub fn relocations_of(
    conn: &mut Conn<'_>,
    community_id: i64,
    ds: &[String],
) -> Result<Vec<Revision>, Reason> {
    let ops = [Op::Move.as_str(), Op::Delete.as_str(), Op::Restore.as_str()];
    let mut out = Vec::new();
    for chunk in ds.chunks(CHUNK) {
        out.extend(with_conn!(conn, |c| artifact_revisions::table
            .filter(artifact_revisions::community_id.eq(community_id))
            .filter(artifact_revisions::d.eq_any(chunk))
            .filter(artifact_revisions::op.eq_any(ops))
            .select(Revision::as_select())
            .load(c))?);
    }
    Ok(out)
}

/// How many listed artifacts (not deleted, not retired) are homed in `channels`, of one
/// of `types` when given — counted up to `cap` (a caller bounding its work passes one
/// more than its bound).
pub fn count_listed(
    conn: &mut Conn<'_>,
    community_id: i64,
    channels: &[String],
    types: Option<&[String]>,
    cap: usize,
) -> Result<usize, Reason> {
    let mut total = 0usize;
    for chunk in channels.chunks(CHUNK) {
        if total >= cap {
            break;
        }
        let left = i64::try_from(cap - total).unwrap_or(i64::MAX);
        let found: Vec<String> = with_conn!(conn, |c| {
            let mut query = artifact_heads::table
                .filter(artifact_heads::community_id.eq(community_id))
                .filter(artifact_heads::channel_id.eq_any(chunk))
                .filter(artifact_heads::op.ne(Op::Delete.as_str()))
                .filter(artifact_heads::retired.eq(false))
                .select(artifact_heads::d)
                .limit(left)
                .into_boxed();
            if let Some(types) = types {
                query = query.filter(artifact_heads::artifact_type.eq_any(types));
            }
            query.load(c)
        })?;
        total += found.len();
    }
    Ok(total)
}
