//! The SQL of `{"artifact":"history","#d":[…]}`: the readable, unredacted revisions of
//! the listed artifacts, grouped by `d` in the order given, each in acceptance order,
//! read as keys and stored sizes only (the bodies are `answer.rs`'s to load, a page at a
//! time, once the answer is known to fit). A page continues after a revision id; NIP-AR
//! defines no history pagination, so `limit` and `after` are this relay's, and a query
//! without them is answered whole or refused, never cut.

use crate::heads::{self, artifact_revisions};
use crate::plan::Stored;
use crate::query::{channel_json, HistoryQuery};
use buzz_core::error::Reason;
use buzz_core::store::Conn;
use buzz_core::with_conn;
use diesel::dsl::sql;
use diesel::prelude::*;
use diesel::sql_types::{BigInt, Bool, Text};

/// The stored body of the revision on the row, unremoved (correlated: one index probe).
const BODY: &str = "FROM events e WHERE e.community_id = artifact_revisions.community_id \
                    AND e.id = artifact_revisions.revision_id AND e.deleted_at IS NULL";

/// What an `after` that is not a readable revision of the listed artifacts gets: the same
/// for one that does not exist, one of another artifact and one the reader cannot read.
pub(crate) const UNKNOWN_AFTER: &str =
    "after is not a revision of these artifacts that you can read";

/// At most `rows` of the revisions `q` asks for (readable: homed in `channels`), each
/// with its stored sizes.
pub(crate) fn history_page(
    conn: &mut Conn<'_>,
    community_id: i64,
    channels: &[String],
    q: &HistoryQuery,
    rows: usize,
) -> Result<Vec<Stored>, Reason> {
    // The position to continue from: (index of its d in q.ds, its version).
    let start = match &q.after {
        None => (0, 0),
        Some(id) => {
            let found = heads::revision(conn, community_id, id)?
                .filter(|r| channels.contains(&r.channel_id))
                .and_then(|r| q.ds.iter().position(|d| *d == r.d).map(|i| (i, r.version)));
            // A redacted revision stays a valid position: a moderator's removal between
            // two pages does not break the listing (the reader named it).
            found.ok_or_else(|| Reason::invalid(UNKNOWN_AFTER))?
        }
    };
    let mut out: Vec<Stored> = Vec::new();
    if channels.is_empty() {
        return Ok(out);
    }
    let json = channel_json(conn.backend(), channels)?;
    for (i, d) in q.ds.iter().enumerate().skip(start.0) {
        let left = rows.saturating_sub(out.len());
        if left == 0 {
            break;
        }
        let after_version = if i == start.0 { start.1 } else { 0 };
        let limit = i64::try_from(left).unwrap_or(i64::MAX);
        let found: Vec<(String, i64, i64)> = with_conn!(conn, |c| {
            let mut query = artifact_revisions::table
                .filter(artifact_revisions::community_id.eq(community_id))
                .filter(artifact_revisions::d.eq(d))
                .filter(artifact_revisions::version.gt(after_version))
                .filter(artifact_revisions::redacted.eq(false))
                .filter(sql::<Bool>(&format!("EXISTS (SELECT 1 {BODY})")))
                .select((
                    artifact_revisions::revision_id,
                    sql::<BigInt>(&format!(
                        "(SELECT CAST(octet_length(e.content) AS BIGINT) {BODY})"
                    )),
                    sql::<BigInt>(&format!(
                        "(SELECT CAST(octet_length(e.tags) AS BIGINT) {BODY})"
                    )),
                ))
                .into_boxed();
            query = match &json {
                Some(json) => query.filter(
                    sql::<Bool>("artifact_revisions.channel_id IN (SELECT value FROM json_each(")
                        .bind::<Text, _>(json.clone())
                        .sql("))"),
                ),
                None => query.filter(artifact_revisions::channel_id.eq_any(channels.to_vec())),
            };
            query
                .order(artifact_revisions::version.asc())
                .limit(limit)
                .load(c)
        })?;
        out.extend(found.into_iter().map(|(id, content, tags)| Stored {
            cursor: id.clone(),
            id,
            content_bytes: usize::try_from(content).unwrap_or(0),
            tags_bytes: usize::try_from(tags).unwrap_or(0),
        }));
    }
    Ok(out)
}
