//! The plugin's tables and every write to them, inside the revision's own storage
//! transaction (so a rolled-back event leaves no trace here either).
//!
//! The compare-and-swap: a create inserts the head with `ON CONFLICT DO NOTHING`; every
//! later revision advances it with `UPDATE … WHERE revision_id = <prev>`. Both are one
//! statement on the head row: PostgreSQL holds the row lock until commit and re-checks
//! the condition for a waiting writer (which then updates nothing), SQLite has one
//! writer. Never a read-then-write, so two edits naming the same prev cannot both win,
//! across writer connections and relay processes alike.

use crate::envelope::{Envelope, Op};
use buzz_core::error::Reason;
use buzz_core::store::Conn;
use buzz_core::with_conn;
use buzz_nostr::event::Event;
use diesel::prelude::*;

diesel::table! {
    artifact_heads (community_id, d) {
        community_id -> BigInt,
        d -> Text,
        artifact_type -> Text,
        revision_id -> Text,
        channel_id -> Text,
        root_id -> Nullable<Text>,
        op -> Text,
        retired -> Bool,
        version -> BigInt,
    }
}

diesel::table! {
    artifact_revisions (community_id, revision_id) {
        community_id -> BigInt,
        revision_id -> Text,
        d -> Text,
        version -> BigInt,
        channel_id -> Text,
        op -> Text,
        redacted -> Bool,
    }
}

diesel::table! {
    artifact_current_tags (community_id, name, value, d) {
        community_id -> BigInt,
        name -> Text,
        value -> Text,
        d -> Text,
    }
}

diesel::allow_tables_to_appear_in_same_query!(
    artifact_heads,
    artifact_revisions,
    artifact_current_tags
);

/// An identity's current state: its head row.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = artifact_heads)]
pub struct Head {
    pub community_id: i64,
    /// The artifact UUID.
    pub d: String,
    pub artifact_type: String,
    /// The current accepted revision: what the next revision must name in `prev`.
    pub revision_id: String,
    /// The current home channel.
    pub channel_id: String,
    pub root_id: Option<String>,
    /// The current revision's op (`delete`: the artifact is deleted).
    pub op: String,
    /// The current revision was redacted: the artifact left current-state queries.
    pub retired: bool,
    /// Accepted revisions so far (the current one's number, from 1).
    pub version: i64,
}

impl Head {
    /// Is the artifact in current-state answers?
    pub fn is_listed(&self) -> bool {
        self.op != Op::Delete.as_str() && !self.retired
    }
}

/// One accepted revision.
#[derive(Debug, Clone, PartialEq, Eq, Queryable, Selectable)]
#[diesel(table_name = artifact_revisions)]
pub struct Revision {
    pub community_id: i64,
    pub revision_id: String,
    pub d: String,
    /// Its number in its artifact's acceptance order, from 1.
    pub version: i64,
    /// The channel it was published in (its readers are that channel's).
    pub channel_id: String,
    pub op: String,
    /// Removed by a moderator (kind 9005): withheld from every surface, still a valid prev.
    pub redacted: bool,
}

/// The head of (`community_id`, `d`), if the identity was ever used.
pub fn head(conn: &mut Conn<'_>, community_id: i64, d: &str) -> Result<Option<Head>, Reason> {
    Ok(with_conn!(conn, |c| artifact_heads::table
        .filter(artifact_heads::community_id.eq(community_id))
        .filter(artifact_heads::d.eq(d))
        .select(Head::as_select())
        .first(c)
        .optional())?)
}

/// The accepted revision `revision_id`, if it is one.
pub fn revision(
    conn: &mut Conn<'_>,
    community_id: i64,
    revision_id: &str,
) -> Result<Option<Revision>, Reason> {
    Ok(with_conn!(conn, |c| artifact_revisions::table
        .filter(artifact_revisions::community_id.eq(community_id))
        .filter(artifact_revisions::revision_id.eq(revision_id))
        .select(Revision::as_select())
        .first(c)
        .optional())?)
}

/// Which of `ids` are accepted revisions here.
pub(crate) fn revisions_among(
    conn: &mut Conn<'_>,
    community_id: i64,
    ids: &[String],
) -> Result<Vec<String>, Reason> {
    Ok(with_conn!(conn, |c| artifact_revisions::table
        .filter(artifact_revisions::community_id.eq(community_id))
        .filter(artifact_revisions::revision_id.eq_any(ids))
        .select(artifact_revisions::revision_id)
        .load(c))?)
}

/// Every accepted revision of `d`, in acceptance order (redacted ones included: callers
/// decide what to withhold).
pub fn revisions_of(
    conn: &mut Conn<'_>,
    community_id: i64,
    d: &str,
) -> Result<Vec<Revision>, Reason> {
    Ok(with_conn!(conn, |c| artifact_revisions::table
        .filter(artifact_revisions::community_id.eq(community_id))
        .filter(artifact_revisions::d.eq(d))
        .order(artifact_revisions::version.asc())
        .select(Revision::as_select())
        .load(c))?)
}

/// Why a compare-and-swap lost. The texts disclose nothing about the artifact: they are
/// what a sender who cannot read it gets, so every sender gets them.
pub(crate) const IDENTITY_TAKEN: &str = "this artifact identity is taken";
pub(crate) const NOT_CURRENT: &str =
    "prev is not the current revision of this artifact; fetch it and reconcile";

/// Accept `event` (a checked revision) as the new head of its artifact, atomically:
/// `Err(Conflict)` when the identity is taken (create) or `prev` is no longer current.
/// Returns the accepted revision's number (its `version`).
pub(crate) fn advance(
    conn: &mut Conn<'_>,
    community_id: i64,
    event: &Event,
    env: &Envelope,
) -> Result<i64, Reason> {
    let version = match env.op {
        Op::Create => {
            let inserted = with_conn!(conn, |c| diesel::insert_into(artifact_heads::table)
                .values((
                    artifact_heads::community_id.eq(community_id),
                    artifact_heads::d.eq(&env.d),
                    artifact_heads::artifact_type.eq(&env.artifact_type),
                    artifact_heads::revision_id.eq(&event.id),
                    artifact_heads::channel_id.eq(&env.h),
                    artifact_heads::root_id.eq(&env.root),
                    artifact_heads::op.eq(env.op.as_str()),
                    artifact_heads::retired.eq(false),
                    artifact_heads::version.eq(1_i64),
                ))
                .on_conflict((artifact_heads::community_id, artifact_heads::d))
                .do_nothing()
                .execute(c))?;
            if inserted == 0 {
                return Err(Reason::Conflict(IDENTITY_TAKEN.into()));
            }
            1
        }
        _ => {
            let prev = env.prev.as_deref().unwrap_or_default();
            let advanced: Option<i64> = with_conn!(conn, |c| diesel::update(
                artifact_heads::table
                    .filter(artifact_heads::community_id.eq(community_id))
                    .filter(artifact_heads::d.eq(&env.d))
                    .filter(artifact_heads::revision_id.eq(prev))
                    // Immutable; checked before the transaction against this same prev.
                    .filter(artifact_heads::artifact_type.eq(&env.artifact_type))
            )
            .set((
                artifact_heads::revision_id.eq(&event.id),
                artifact_heads::channel_id.eq(&env.h),
                artifact_heads::root_id.eq(&env.root),
                artifact_heads::op.eq(env.op.as_str()),
                artifact_heads::retired.eq(false),
                artifact_heads::version.eq(artifact_heads::version + 1),
            ))
            .returning(artifact_heads::version)
            .get_result(c)
            .optional())?;
            advanced.ok_or_else(|| Reason::Conflict(NOT_CURRENT.into()))?
        }
    };
    with_conn!(conn, |c| diesel::insert_into(artifact_revisions::table)
        .values((
            artifact_revisions::community_id.eq(community_id),
            artifact_revisions::revision_id.eq(&event.id),
            artifact_revisions::d.eq(&env.d),
            artifact_revisions::version.eq(version),
            artifact_revisions::channel_id.eq(&env.h),
            artifact_revisions::op.eq(env.op.as_str()),
            artifact_revisions::redacted.eq(false),
        ))
        .execute(c))?;
    let listed = env.op != Op::Delete;
    replace_current_tags(conn, community_id, &env.d, listed.then_some(event))?;
    Ok(version)
}

/// The current tags of `d` become `event`'s (each tag's name and first value), or none.
fn replace_current_tags(
    conn: &mut Conn<'_>,
    community_id: i64,
    d: &str,
    event: Option<&Event>,
) -> Result<(), Reason> {
    with_conn!(conn, |c| diesel::delete(
        artifact_current_tags::table
            .filter(artifact_current_tags::community_id.eq(community_id))
            .filter(artifact_current_tags::d.eq(d))
    )
    .execute(c))?;
    let Some(event) = event else { return Ok(()) };
    let mut rows: Vec<(&str, &str)> = event
        .tags
        .iter()
        .filter_map(|t| match t.as_slice() {
            [name, value, ..] => Some((name.as_str(), value.as_str())),
            _ => None,
        })
        .collect();
    rows.sort_unstable();
    rows.dedup();
    let values: Vec<_> = rows
        .iter()
        .map(|(name, value)| {
            (
                artifact_current_tags::community_id.eq(community_id),
                artifact_current_tags::name.eq(*name),
                artifact_current_tags::value.eq(*value),
                artifact_current_tags::d.eq(d),
            )
        })
        .collect();
    // At most 256 tags of four parameters: within both backends' parameter limits.
    with_conn!(conn, |c| diesel::insert_into(artifact_current_tags::table)
        .values(&values)
        .execute(c))?;
    Ok(())
}

/// A moderator removed `target` (kind 9005 in `channel`): when it is a revision, withhold
/// it from now on; when it is its artifact's current revision, retire the artifact from
/// current-state queries. It stays the valid prev either way.
pub(crate) fn redact(
    conn: &mut Conn<'_>,
    community_id: i64,
    target: &str,
    channel: &str,
) -> Result<(), Reason> {
    let d: Option<String> = with_conn!(conn, |c| diesel::update(
        artifact_revisions::table
            .filter(artifact_revisions::community_id.eq(community_id))
            .filter(artifact_revisions::revision_id.eq(target))
            .filter(artifact_revisions::channel_id.eq(channel))
    )
    .set(artifact_revisions::redacted.eq(true))
    .returning(artifact_revisions::d)
    .get_result(c)
    .optional())?;
    let Some(d) = d else { return Ok(()) };
    let retired = with_conn!(conn, |c| diesel::update(
        artifact_heads::table
            .filter(artifact_heads::community_id.eq(community_id))
            .filter(artifact_heads::d.eq(&d))
            .filter(artifact_heads::revision_id.eq(target))
    )
    .set(artifact_heads::retired.eq(true))
    .execute(c))?;
    if retired > 0 {
        replace_current_tags(conn, community_id, &d, None)?;
    }
    Ok(())
}

/// Per community: (community id, listed, deleted, retired) artifacts, for the admin panel.
pub(crate) fn counts(conn: &mut Conn<'_>) -> Result<Vec<(i64, i64, i64, i64)>, Reason> {
    let rows: Vec<(i64, String, bool)> = with_conn!(conn, |c| artifact_heads::table
        .select((
            artifact_heads::community_id,
            artifact_heads::op,
            artifact_heads::retired
        ))
        .load(c))?;
    let mut by: std::collections::BTreeMap<i64, (i64, i64, i64)> = Default::default();
    for (community, op, retired) in rows {
        let entry = by.entry(community).or_default();
        match (op == Op::Delete.as_str(), retired) {
            (true, _) => entry.1 += 1,
            (false, true) => entry.2 += 1,
            (false, false) => entry.0 += 1,
        }
    }
    Ok(by.into_iter().map(|(c, (l, d, r))| (c, l, d, r)).collect())
}
