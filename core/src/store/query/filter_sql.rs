//! A NIP-01 filter and a reader's scope as SQL conditions on `events`: how the reader's
//! channels reach the statement ([`Readable`]: an `IN` list, one array parameter, or
//! `buzz_readable`), and the macros `scoped!`, `narrowed!` and `conditions!` that write
//! the scope and the filter's fields onto a boxed query for either backend. Macros, not
//! functions, because the boxed query's type differs per backend and per select clause;
//! they are used from `matching.rs`, which must have their names (`events`, `one_of`,
//! `Readable`, …) in scope.

use super::scope::{ChannelScope, ChannelSet, Scope};
use crate::store::Conn;

/// Above this many channels, SQLite checks the reader's channels with `buzz_readable`
/// (one hash lookup per examined row) instead of an `IN` list of bound variables (which
/// it caps at 32,766 per statement, and which costs per channel on every query).
/// PostgreSQL always binds them as one array.
pub(super) const INLINE_CHANNELS: usize = 200;

/// How one query hands the reader's channels to SQL.
pub(super) enum Readable {
    /// Few channels, or PostgreSQL: an `IN` list / one array parameter.
    List(Vec<String>),
    /// Many channels on SQLite: the shared set, through `buzz_readable`.
    Function(ChannelSet),
}

impl Readable {
    /// `named`: the channels the request names (`#h`), if it names any.
    fn of(set: &ChannelSet, named: Option<&[String]>, backend: crate::store::Backend) -> Readable {
        let sqlite = matches!(backend, crate::store::Backend::Sqlite);
        match named {
            Some(named) => {
                let list: Vec<String> = named.iter().filter(|c| set.contains(c)).cloned().collect();
                if sqlite && list.len() > INLINE_CHANNELS {
                    Readable::Function(list.into_iter().collect())
                } else {
                    Readable::List(list)
                }
            }
            // No copy of a large set: the function reads the shared one.
            None if sqlite && set.len() > INLINE_CHANNELS => Readable::Function(set.clone()),
            None => Readable::List(set.iter().cloned().collect()),
        }
    }

    fn is_empty(&self) -> bool {
        match self {
            Readable::List(list) => list.is_empty(),
            Readable::Function(set) => set.is_empty(),
        }
    }
}

/// Restrict a boxed `events` query to what the reader may see: the community, rows not
/// deleted and not expired at `$now` (NIP-40), and the channels of `$scope` (through
/// `$readable`). `$named`: the channels the request names (`#h`), if it names any — then
/// this is the statement's one channel condition (named ∩ readable, no community-wide
/// rows), so the planner sees a single `channel_id` equality and walks the channel index
/// in answer order: a second, redundant `channel_id` condition made PostgreSQL multiply
/// the two selectivities, underestimate the rows ~20× and sort the whole channel (issue
/// 39). Evaluates to `None` when nothing can match.
macro_rules! scoped {
    ($q:expr, $scope:expr, $readable:expr, $named:expr, $now:expr) => {{
        let now: i64 = $now;
        let named: Option<&[String]> = $named;
        let q = $q
            .filter(events::community_id.eq($scope.community_id))
            .filter(events::deleted_at.is_null())
            .filter(events::expires_at.is_null().or(events::expires_at.gt(now)));
        // A filter naming channels never matches a community-wide row.
        let wide = $scope.community_wide && named.is_none();
        match (&$scope.channels, wide) {
            (ChannelScope::All, _) if named.is_some() => {
                let named = named.map(<[String]>::to_vec).unwrap_or_default();
                Some(q.filter(one_of(events::channel_id, named)))
            }
            (ChannelScope::All, true) => Some(q),
            (ChannelScope::All, false) => Some(q.filter(events::channel_id.is_not_null())),
            (ChannelScope::None, true) => Some(q.filter(events::channel_id.is_null())),
            (ChannelScope::None, false) => None,
            (ChannelScope::Only(_), wide) => match $readable {
                Some(Readable::Function(_)) => {
                    let readable = $crate::store::readable_fn::buzz_readable(events::channel_id);
                    Some(if wide {
                        q.filter(events::channel_id.is_null().or(readable))
                    } else {
                        q.filter(readable)
                    })
                }
                Some(Readable::List(list)) => Some(if wide {
                    q.filter(
                        events::channel_id
                            .is_null()
                            .or(one_of(events::channel_id, list.clone())),
                    )
                } else {
                    q.filter(one_of(events::channel_id, list.clone()))
                }),
                None => None,
            },
        }
    }};
}

/// One filter's conditions on `events` (ids, authors, kinds, time range, tags) as one
/// boxed boolean expression for backend `$db`, so several filters can be OR'd in one
/// statement (COUNT).
macro_rules! conditions {
    ($db:ty, $filter:expr, $community_id:expr) => {{
        type Condition =
            Box<dyn BoxableExpression<events::table, $db, SqlType = diesel::sql_types::Bool>>;
        let filter: &Filter = $filter;
        // Always true for the filter's own community: the neutral start of the AND.
        let mut all: Condition = Box::new(events::community_id.eq($community_id));
        if let Some(ids) = &filter.ids {
            all = Box::new(all.and(one_of(events::id, ids.clone())));
        }
        if let Some(authors) = &filter.authors {
            all = Box::new(all.and(one_of(events::pubkey, authors.clone())));
        }
        if let Some(kinds) = &filter.kinds {
            let kinds: Vec<i32> = kinds.iter().map(|k| *k as i32).collect();
            all = Box::new(all.and(one_of(events::kind, kinds)));
        }
        if let Some(since) = filter.since {
            all = Box::new(all.and(events::created_at.ge(since)));
        }
        if let Some(until) = filter.until {
            all = Box::new(all.and(events::created_at.le(until)));
        }
        for (name, values) in &filter.tags {
            if name == "h" {
                // As in `narrowed!`: the channel index serves `#h`.
                all = Box::new(
                    all.and(one_of(events::channel_id, values.clone()))
                        .and(tag_on_row(name, values.clone())),
                );
                continue;
            }
            all = Box::new(
                all.and(
                    events::seq.eq_any(
                        event_tags::table
                            .filter(event_tags::community_id.eq($community_id))
                            .filter(event_tags::name.eq(name.clone()))
                            .filter(one_of(event_tags::value, values.clone()))
                            .select(event_tags::event_seq),
                    ),
                ),
            );
        }
        all
    }};
}

/// A boxed `events` query narrowed by one filter's fields (ids, authors, kinds, time
/// range, tags), as `AND`ed conditions.
macro_rules! narrowed {
    ($q:expr, $filter:expr, $community_id:expr) => {{
        let filter: &Filter = $filter;
        let mut q = narrowed_fields!($q, filter);
        for (name, values) in &filter.tags {
            if name == "h" {
                // An event's channel is its `h` tag (ingest refuses a second one), so the
                // channel index reads `#h` in answer order, through the channel condition
                // `scoped!` writes for the named channels; the tag itself is checked on
                // the rows it yields (relay-signed group state holds its channel in `d`).
                q = q.filter(tag_on_row(name, values.clone()));
                continue;
            }
            q = q.filter(
                events::seq.eq_any(
                    event_tags::table
                        .filter(event_tags::community_id.eq($community_id))
                        .filter(event_tags::name.eq(name.clone()))
                        .filter(one_of(event_tags::value, values.clone()))
                        .select(event_tags::event_seq),
                ),
            );
        }
        q
    }};
}

/// A boxed query narrowed by one filter's fields other than its tags (ids, authors,
/// kinds, time range), as `AND`ed conditions on `events`.
macro_rules! narrowed_fields {
    ($q:expr, $filter:expr) => {{
        let filter: &Filter = $filter;
        let mut q = $q;
        if let Some(ids) = &filter.ids {
            q = q.filter(one_of(events::id, ids.clone()));
        }
        if let Some(authors) = &filter.authors {
            q = q.filter(one_of(events::pubkey, authors.clone()));
        }
        if let Some(kinds) = &filter.kinds {
            let kinds: Vec<i32> = kinds.iter().map(|k| *k as i32).collect();
            q = q.filter(one_of(events::kind, kinds));
        }
        if let Some(since) = filter.since {
            q = q.filter(events::created_at.ge(since));
        }
        if let Some(until) = filter.until {
            q = q.filter(events::created_at.le(until));
        }
        q
    }};
}

/// The channels one statement may read: the reader's, narrowed to those it `named` (if
/// any). A large set checked by `buzz_readable` (SQLite) is installed for as long as the
/// returned guard lives. `None`: it names channels and the reader reads none of them.
pub(super) fn readable_for(
    conn: &Conn<'_>,
    scope: &Scope,
    named: Option<&[String]>,
) -> Option<(
    Option<Readable>,
    Option<crate::store::readable_fn::Installed>,
)> {
    let readable = match &scope.channels {
        ChannelScope::Only(set) => Some(Readable::of(set, named, conn.backend())),
        _ => None,
    };
    if readable.as_ref().is_some_and(Readable::is_empty) && named.is_some() {
        return None;
    }
    let installed = match &readable {
        Some(Readable::Function(set)) => Some(crate::store::readable_fn::install(set.clone())),
        _ => None,
    };
    Some((readable, installed))
}

pub(super) use {conditions, narrowed, narrowed_fields, scoped};
