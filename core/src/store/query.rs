//! Reading events by NIP-01 filter, scoped to one community and to the channels the
//! reader may see.
//!
//! `query_keys` answers a REQ as keys (seq, time, size), `query_stamps` the same rows as
//! `(created_at, id)` pairs for set reconciliation (NIP-77). A small channel set is an
//! `IN` list; a large one is one array parameter on PostgreSQL and, on SQLite, the
//! `buzz_readable(channel_id)` function of `readable_fn.rs`, which looks each examined row
//! up in the very set the access service decided: never a variable per channel, never a
//! per-query copy of the set. On PostgreSQL a community-wide filter over a large set first
//! reads a short prefix of its matches without the channel condition and keeps the
//! readable rows in Rust (`probe_wide`: exact because the order is total), binding the set
//! only when that prefix holds too few readable rows (`core/tests/many_channels.rs`,
//! `core/tests/wide_probe_fallback.rs`). `#h` is read through the channel index (an
//! event's channel is its `h` tag) with the tag checked on each row the index yields
//! (`tag_on_row.rs`), never as a list of every message of the channel.

use super::conn::Conn;
use super::one_of::one_of;
use super::schema::{event_tags, events};
use super::tag_on_row::tag_on_row;
use super::StoreError;
use crate::error::Reason;
use crate::with_conn;
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use diesel::prelude::*;

/// Which channel-scoped rows a reader may receive. Rows without a channel are
/// community-wide and always visible to the community's readers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelScope {
    /// Every channel (relay-internal reads).
    All,
    /// No channel-scoped rows at all (e.g. unauthenticated readers).
    None,
    /// Only these channels.
    Only(ChannelSet),
}

/// A set of channel ids, shared (cheap to clone): a reader may have tens of thousands,
/// and live delivery asks "is this channel in it" for every event. Persistent
/// (structurally shared), so a change of one channel costs O(log n) even while scopes in
/// use still hold the previous version.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChannelSet(imbl::HashSet<String>);

impl ChannelSet {
    pub fn contains(&self, channel: &str) -> bool {
        self.0.contains(channel)
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = &String> {
        self.0.iter()
    }

    /// Add `channel`; versions shared elsewhere are unaffected.
    pub fn insert(&mut self, channel: String) {
        self.0.insert(channel);
    }

    /// Remove `channel`; versions shared elsewhere are unaffected.
    pub fn remove(&mut self, channel: &str) {
        self.0.remove(channel);
    }
}

impl FromIterator<String> for ChannelSet {
    fn from_iter<I: IntoIterator<Item = String>>(ids: I) -> Self {
        ChannelSet(ids.into_iter().collect())
    }
}

/// Above this many channels, SQLite checks the reader's channels with `buzz_readable`
/// (one hash lookup per examined row) instead of an `IN` list of bound variables (which
/// it caps at 32,766 per statement, and which costs per channel on every query).
/// PostgreSQL always binds them as one array.
const INLINE_CHANNELS: usize = 200;

/// How one query hands the reader's channels to SQL.
enum Readable {
    /// Few channels, or PostgreSQL: an `IN` list / one array parameter.
    List(Vec<String>),
    /// Many channels on SQLite: the shared set, through `buzz_readable`.
    Function(ChannelSet),
}

impl Readable {
    /// `named`: the channels the request names (`#h`), if it names any.
    fn of(set: &ChannelSet, named: Option<&[String]>, backend: super::Backend) -> Readable {
        let sqlite = matches!(backend, super::Backend::Sqlite);
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

/// Where a query looks: one community, and within it what the reader may see.
#[derive(Debug, Clone)]
pub struct Scope {
    pub community_id: i64,
    /// Rows without a channel (community-wide events).
    pub community_wide: bool,
    pub channels: ChannelScope,
    /// TTL channels in scope → when they expire (unix seconds); live delivery stops then.
    pub expiry: std::collections::HashMap<String, i64>,
}

impl Scope {
    /// May a reader with this scope see `event` (a live event) at `now`?
    pub fn allows(&self, event: &crate::stored::StoredEvent, now: i64) -> bool {
        if event.community_id != self.community_id {
            return false;
        }
        let channel = event.channel.as_deref();
        match (channel, &self.channels) {
            (None, _) => self.community_wide,
            (Some(_), ChannelScope::All) => true,
            (Some(_), ChannelScope::None) => false,
            (Some(ch), ChannelScope::Only(list)) => {
                list.contains(ch) && self.expiry.get(ch).is_none_or(|t| *t > now)
            }
        }
    }

    /// Is `channel` readable in this scope?
    pub fn has_channel(&self, channel: &str) -> bool {
        match &self.channels {
            ChannelScope::All => true,
            ChannelScope::None => false,
            ChannelScope::Only(list) => list.contains(channel),
        }
    }
}

/// One `events` row as stored.
#[derive(Debug, Clone, Queryable, Selectable)]
#[diesel(table_name = events)]
pub struct EventRow {
    pub seq: i64,
    pub community_id: i64,
    pub id: String,
    pub pubkey: String,
    pub created_at: i64,
    pub kind: i32,
    pub tags: String,
    pub content: String,
    pub sig: String,
    pub received_at: i64,
    pub channel_id: Option<String>,
    pub deleted_at: Option<i64>,
}

/// Rebuild the wire event from a stored row.
pub fn row_to_event(row: EventRow) -> Result<Event, StoreError> {
    let tags: Vec<Vec<String>> = serde_json::from_str(&row.tags)
        .map_err(|e| StoreError::Corrupt(format!("tags of event {}: {e}", row.id)))?;
    let kind = u32::try_from(row.kind)
        .map_err(|_| StoreError::Corrupt(format!("kind of event {}", row.id)))?;
    Ok(Event {
        id: row.id,
        pubkey: row.pubkey,
        created_at: row.created_at,
        kind,
        tags,
        content: row.content,
        sig: row.sig,
    })
}

diesel::define_sql_function! {
    /// Characters of a text column (both backends): the size estimate of a stored event.
    fn length(x: diesel::sql_types::Text) -> diesel::sql_types::Integer;
}

/// What a query needs to know about a matching row before reading it: where it sorts and
/// roughly how big it is, so an answer can be read a page at a time within a byte budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventKey {
    pub seq: i64,
    pub created_at: i64,
    /// Characters of content plus tags (a lower bound of the wire size, close enough to
    /// size a page).
    pub size: usize,
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
                    let readable = super::readable_fn::buzz_readable(events::channel_id);
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

/// The channels one statement may read: the reader's, narrowed to those it `named` (if
/// any). A large set checked by `buzz_readable` (SQLite) is installed for as long as the
/// returned guard lives. `None`: it names channels and the reader reads none of them.
fn readable_for(
    conn: &Conn<'_>,
    scope: &Scope,
    named: Option<&[String]>,
) -> Option<(Option<Readable>, Option<super::readable_fn::Installed>)> {
    let readable = match &scope.channels {
        ChannelScope::Only(set) => Some(Readable::of(set, named, conn.backend())),
        _ => None,
    };
    if readable.as_ref().is_some_and(Readable::is_empty) && named.is_some() {
        return None;
    }
    let installed = match &readable {
        Some(Readable::Function(set)) => Some(super::readable_fn::install(set.clone())),
        _ => None,
    };
    Some((readable, installed))
}

/// Keys of the events matching `filter` (deleted and, at `now`, expired ones excluded),
/// newest first (`created_at DESC, id ASC`), at most `limit`, with the `id` for ordering.
pub fn query_keys(
    conn: &mut Conn<'_>,
    scope: &Scope,
    filter: &Filter,
    limit: u64,
    now: i64,
) -> Result<Vec<(EventKey, String)>, Reason> {
    if limit == 0 || filter.is_empty_match() {
        return Ok(Vec::new());
    }
    if let Some(keys) = probe_wide(conn, scope, filter, limit, now)? {
        return Ok(keys);
    }
    let Some((readable, _installed)) = readable_for(conn, scope, filter.channels()) else {
        return Ok(Vec::new());
    };
    let rows: Vec<(i64, i64, String, i32)> = with_conn!(conn, |c| {
        let q = events::table
            .select((
                events::seq,
                events::created_at,
                events::id,
                length(events::content) + length(events::tags),
            ))
            .into_boxed();
        let Some(q) = scoped!(q, scope, &readable, filter.channels(), now) else {
            return Ok(Vec::new());
        };
        narrowed!(q, filter, scope.community_id)
            .order((events::created_at.desc(), events::id.asc()))
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .load(c)
    })?;
    Ok(rows
        .into_iter()
        .map(|(seq, created_at, id, size)| key_of(seq, created_at, id, size))
        .collect())
}

fn key_of(seq: i64, created_at: i64, id: String, size: i32) -> (EventKey, String) {
    let size = usize::try_from(size).unwrap_or(0);
    (
        EventKey {
            seq,
            created_at,
            size,
        },
        id,
    )
}

/// PostgreSQL, a reader of many channels, a filter naming none (a community-wide REQ):
/// binding the reader's whole set as an array costs per channel on every query (12× at
/// 20,000 channels vs 10). Instead read a short prefix of the matches in answer order
/// without the channel condition and keep the readable ones here, a hash lookup a row —
/// exact, because the order is total: the first `limit` readable rows of a prefix are the
/// first overall, and a prefix shorter than asked for was everything. `None` (the caller
/// binds the set) when the prefix holds too few readable rows to decide: a reader of few
/// of a busy community's channels.
fn probe_wide(
    conn: &mut Conn<'_>,
    scope: &Scope,
    filter: &Filter,
    limit: u64,
    now: i64,
) -> Result<Option<Vec<(EventKey, String)>>, Reason> {
    let ChannelScope::Only(set) = &scope.channels else {
        return Ok(None);
    };
    let Conn::Pg(c) = conn else {
        return Ok(None);
    };
    if filter.channels().is_some() || set.len() <= INLINE_CHANNELS {
        return Ok(None);
    }
    let probe = limit.saturating_mul(4).saturating_add(64);
    let unscoped = Scope {
        community_id: scope.community_id,
        community_wide: true,
        channels: ChannelScope::All,
        expiry: std::collections::HashMap::new(),
    };
    let q = events::table
        .select((
            events::seq,
            events::created_at,
            events::id,
            length(events::content) + length(events::tags),
            events::channel_id,
        ))
        .into_boxed();
    let Some(q) = scoped!(q, &unscoped, &None::<Readable>, filter.channels(), now) else {
        return Ok(Some(Vec::new()));
    };
    let rows: Vec<(i64, i64, String, i32, Option<String>)> =
        narrowed!(q, filter, scope.community_id)
            .order((events::created_at.desc(), events::id.asc()))
            .limit(i64::try_from(probe).unwrap_or(i64::MAX))
            .load(*c)?;
    let complete = (rows.len() as u64) < probe;
    let kept: Vec<(EventKey, String)> = rows
        .into_iter()
        .filter(|row| match &row.4 {
            None => scope.community_wide,
            Some(channel) => set.contains(channel),
        })
        .take(usize::try_from(limit).unwrap_or(usize::MAX))
        .map(|(seq, created_at, id, size, _)| key_of(seq, created_at, id, size))
        .collect();
    if complete || kept.len() as u64 >= limit {
        Ok(Some(kept))
    } else {
        Ok(None)
    }
}

/// The `(created_at, id)` pairs of the events matching `filter` within `scope` at `now`
/// (deleted and expired ones excluded, exactly as [`query_keys`] excludes them), newest
/// first, at most `limit`: what a set reconciliation (NIP-77) compares, read from the
/// `events` indexes and row headers alone — no content, tags or signature is read or
/// sent. A caller bounding the set asks for one more than it accepts to learn that there
/// are more. Run it inside [`Conn::repeatable_read`] with the reads it must agree with.
pub fn query_stamps(
    conn: &mut Conn<'_>,
    scope: &Scope,
    filter: &Filter,
    limit: u64,
    now: i64,
) -> Result<Vec<(i64, String)>, Reason> {
    if limit == 0 || filter.is_empty_match() {
        return Ok(Vec::new());
    }
    let Some((readable, _installed)) = readable_for(conn, scope, filter.channels()) else {
        return Ok(Vec::new());
    };
    let rows: Vec<(i64, String)> = with_conn!(conn, |c| {
        let q = events::table
            .select((events::created_at, events::id))
            .into_boxed();
        let Some(q) = scoped!(q, scope, &readable, filter.channels(), now) else {
            return Ok(Vec::new());
        };
        narrowed!(q, filter, scope.community_id)
            .order((events::created_at.desc(), events::id.asc()))
            .limit(i64::try_from(limit).unwrap_or(i64::MAX))
            .load(c)
    })?;
    Ok(rows)
}

/// NIP-45: how many events match any of `filters` within `scope` at `now` — each event
/// once, however many filters match it; `limit` does not bound it. One statement: the
/// filters' conditions OR'd, under the same scope, deletion and expiry rules as
/// [`query_keys`]. Counts no further than `cap` (at least 1): past it the answer is `cap`,
/// approximate (NIP-45), so a COUNT over a whole community stops after `cap` rows
/// instead of scanning them all.
pub fn count_matching(
    conn: &mut Conn<'_>,
    scope: &Scope,
    filters: &[Filter],
    now: i64,
    cap: u64,
) -> Result<Count, Reason> {
    let none = Count {
        count: 0,
        approximate: false,
    };
    let filters: Vec<&Filter> = filters.iter().filter(|f| !f.is_empty_match()).collect();
    if filters.is_empty() {
        return Ok(none);
    }
    let cap = cap.max(1);
    // One row past the cap says "more than cap" without reading on.
    let rows_read = i64::try_from(cap).unwrap_or(i64::MAX - 1) + 1;
    // One channel list for the statement: the channels the filters name when every
    // filter names some (each filter's `#h` condition narrows further), else the
    // reader's whole set.
    let named: Option<Vec<String>> = filters
        .iter()
        .map(|f| f.channels().map(<[String]>::to_vec))
        .collect::<Option<Vec<_>>>()
        .map(|lists| lists.concat());
    let Some((readable, _installed)) = readable_for(conn, scope, named.as_deref()) else {
        return Ok(none);
    };
    let community_id = scope.community_id;
    let seqs: Vec<i64> = match conn {
        Conn::Sqlite(c) => {
            let q = events::table.select(events::seq).into_boxed();
            let Some(mut q) = scoped!(q, scope, &readable, named.as_deref(), now) else {
                return Ok(none);
            };
            let mut any = conditions!(diesel::sqlite::Sqlite, filters[0], community_id);
            for f in &filters[1..] {
                let next = conditions!(diesel::sqlite::Sqlite, f, community_id);
                any = Box::new(any.or(next));
            }
            q = q.filter(any).limit(rows_read);
            q.load(*c)?
        }
        Conn::Pg(c) => {
            let q = events::table.select(events::seq).into_boxed();
            let Some(mut q) = scoped!(q, scope, &readable, named.as_deref(), now) else {
                return Ok(none);
            };
            let mut any = conditions!(diesel::pg::Pg, filters[0], community_id);
            for f in &filters[1..] {
                let next = conditions!(diesel::pg::Pg, f, community_id);
                any = Box::new(any.or(next));
            }
            q = q.filter(any).limit(rows_read);
            q.load(*c)?
        }
    };
    let counted = u64::try_from(seqs.len()).unwrap_or(u64::MAX);
    Ok(Count {
        count: counted.min(cap),
        approximate: counted > cap,
    })
}

/// A NIP-45 count: `approximate` when counting stopped at the relay's cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count {
    pub count: u64,
    pub approximate: bool,
}

/// The events `seqs` name in `community_id`, in the order given; rows deleted since their
/// keys were read are left out.
pub fn load_events(
    conn: &mut Conn<'_>,
    community_id: i64,
    seqs: &[i64],
) -> Result<Vec<Event>, Reason> {
    if seqs.is_empty() {
        return Ok(Vec::new());
    }
    // By primary key alone: with `community_id = ?` in the statement SQLite may walk a
    // whole-community index instead of looking the rows up (issue 23); the community is
    // checked on the rows instead.
    let rows: Vec<EventRow> = with_conn!(conn, |c| events::table
        .filter(one_of(events::seq, seqs.to_vec()))
        .filter(events::deleted_at.is_null())
        .select(EventRow::as_select())
        .load(c))?;
    in_seq_order(rows, seqs, |r| (r.seq, r.community_id == community_id))
        .into_iter()
        .map(|r| row_to_event(r).map_err(Reason::from))
        .collect()
}

/// Rows read by primary key, in the order of `seqs`, keeping those `key` accepts (the
/// caller's community): `key` gives a row's seq and whether to keep it.
fn in_seq_order<R>(rows: Vec<R>, seqs: &[i64], key: impl Fn(&R) -> (i64, bool)) -> Vec<R> {
    let mut by_seq: std::collections::HashMap<i64, R> = rows
        .into_iter()
        .filter_map(|r| match key(&r) {
            (seq, true) => Some((seq, r)),
            (_, false) => None,
        })
        .collect();
    seqs.iter().filter_map(|seq| by_seq.remove(seq)).collect()
}

/// A stored event as its NIP-01 JSON object, ready for the wire, and its id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireEvent {
    pub id: String,
    pub json: String,
}

/// The columns a wire event is written from.
#[derive(Queryable, Selectable)]
#[diesel(table_name = events)]
struct WireRow {
    seq: i64,
    community_id: i64,
    id: String,
    pubkey: String,
    created_at: i64,
    kind: i32,
    tags: String,
    content: String,
    sig: String,
}

/// [`Event`]'s wire shape (same fields, same order) over a row's text: the tags column
/// is the JSON the relay stored, checked to be JSON and copied as it is, not rebuilt
/// string by string and serialized again (the bulk of a REQ's cost per returned event).
#[derive(serde::Serialize)]
struct WireFields<'a> {
    id: &'a str,
    pubkey: &'a str,
    created_at: i64,
    kind: u32,
    tags: &'a serde_json::value::RawValue,
    content: &'a str,
    sig: &'a str,
}

fn row_to_wire(row: WireRow) -> Result<WireEvent, StoreError> {
    let tags: &serde_json::value::RawValue = serde_json::from_str(&row.tags)
        .map_err(|e| StoreError::Corrupt(format!("tags of event {}: {e}", row.id)))?;
    let kind = u32::try_from(row.kind)
        .map_err(|_| StoreError::Corrupt(format!("kind of event {}", row.id)))?;
    let fields = WireFields {
        id: &row.id,
        pubkey: &row.pubkey,
        created_at: row.created_at,
        kind,
        tags,
        content: &row.content,
        sig: &row.sig,
    };
    let json = serde_json::to_string(&fields)
        .map_err(|e| StoreError::Corrupt(format!("event {}: {e}", row.id)))?;
    Ok(WireEvent { id: row.id, json })
}

/// [`load_events`] as wire JSON: the events `seqs` name in `community_id`, in the order
/// given, rows deleted since their keys were read left out.
pub fn load_wire_events(
    conn: &mut Conn<'_>,
    community_id: i64,
    seqs: &[i64],
) -> Result<Vec<WireEvent>, Reason> {
    if seqs.is_empty() {
        return Ok(Vec::new());
    }
    // By primary key alone, as in `load_events`.
    let rows: Vec<WireRow> = with_conn!(conn, |c| events::table
        .filter(one_of(events::seq, seqs.to_vec()))
        .filter(events::deleted_at.is_null())
        .select(WireRow::as_select())
        .load(c))?;
    in_seq_order(rows, seqs, |r| (r.seq, r.community_id == community_id))
        .into_iter()
        .map(|r| row_to_wire(r).map_err(Reason::from))
        .collect()
}

/// Events matching `filter` (deleted and expired ones excluded), newest first (`created_at DESC,
/// id ASC`), at most `limit`, read whole (for callers that need them all at once).
pub fn query_events(
    conn: &mut Conn<'_>,
    scope: &Scope,
    filter: &Filter,
    limit: u64,
    now: i64,
) -> Result<Vec<Event>, Reason> {
    let seqs: Vec<i64> = query_keys(conn, scope, filter, limit, now)?
        .into_iter()
        .map(|(key, _)| key.seq)
        .collect();
    load_events(conn, scope.community_id, &seqs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use buzz_nostr::keys::Keys;

    /// A row written as wire JSON reads exactly as the event serialized whole: same
    /// fields, order and escaping (quotes, backslashes, control and non-ASCII text).
    #[test]
    fn wire_json_is_the_event_serialized() {
        let tags = vec![
            vec!["t".to_owned(), "a \"quoted\" \\ tag".to_owned()],
            vec!["e".to_owned(), "x".repeat(64), "wss://r".to_owned()],
            vec![],
        ];
        let event =
            Keys::generate().sign(1, tags, "line\nnext\ttab \u{1} é 🦀 \"q\"", 1_700_000_000);
        let row = WireRow {
            seq: 7,
            community_id: 1,
            id: event.id.clone(),
            pubkey: event.pubkey.clone(),
            created_at: event.created_at,
            kind: 1,
            tags: serde_json::to_string(&event.tags).expect("tags"),
            content: event.content.clone(),
            sig: event.sig.clone(),
        };
        let wire = row_to_wire(row).expect("wire");
        assert_eq!(wire.id, event.id);
        assert_eq!(wire.json, serde_json::to_string(&event).expect("event"));
    }

    /// Tags that are not JSON are a corrupt row, not text passed to a client.
    #[test]
    fn tags_that_are_not_json_are_refused() {
        let row = WireRow {
            seq: 1,
            community_id: 1,
            id: "ab".repeat(32),
            pubkey: "cd".repeat(32),
            created_at: 0,
            kind: 1,
            tags: "[[\"t\",".into(),
            content: String::new(),
            sig: "ef".repeat(64),
        };
        assert!(matches!(row_to_wire(row), Err(StoreError::Corrupt(_))));
    }
}
