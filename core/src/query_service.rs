//! The one query service: WebSocket `REQ` and `POST /query` both go through
//! [`QueryService::prepare`] and [`QueryService::execute`] ([`QueryService::run`] does both).
//!
//! Filters are checked (shape and size bounds, core access, then plugins), claimed
//! filters go to their plugin, the rest are served from the store within the caller's
//! read scope (the SQL of that is the store's, `store/query/`).
//! Wire order: core's events (newest first, deduplicated), then each claiming plugin's
//! answer in plugin order.
//!
//! Core's events are never read whole: the store first returns the keys of the matches
//! (seq, time, size), and [`StoredAnswer::next_page`] reads the events a page at a time
//! within a byte budget, so a large answer costs what the caller can send at once, not
//! what matched (issue 10: a REQ's answer streams under the outbound bound).

mod stored;

pub use stored::{FirstPage, StoredAnswer};

use crate::access::{auth_first, Readable, StoredCheck};
use crate::config::LimitSettings;
use crate::ctx::ConnCtx;
use crate::error::Reason;
use crate::live::LiveCondition;
use crate::plugin::{PlainReads, Plugin, QueryAnswer, Services};
use crate::store::{count_matching, query_keys, Count, WireEvent};
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use std::sync::Arc;

/// A query's result and, when asked for with [`FirstPage`], core's first page read
/// with its keys (with the room it took).
pub type WithFirstPage<R> = (QueryResult, Option<(R, Vec<WireEvent>)>);

/// Everything a query produced.
pub struct QueryResult {
    /// Core's matches, read a page at a time; they come first on the wire.
    pub stored: StoredAnswer,
    /// Claiming plugins' events, after core's.
    pub events: Vec<Event>,
    /// A plugin's object answer (HTTP only).
    pub object: Option<serde_json::Value>,
    /// The filters core served, which stay live on a WebSocket subscription.
    pub live_filters: Vec<Filter>,
    /// `Some` for a reader who has not authenticated when the filters could also match
    /// channel data (`access/anonymous.rs`): the answer holds what it may read and ends
    /// with this refusal — a WebSocket `CLOSED` instead of `EOSE` — and nothing of it
    /// stays live.
    pub needs_auth: Option<Reason>,
}

/// A query whose filters passed every check, split between core and claiming plugins.
pub struct CheckedQuery {
    standard: Vec<Filter>,
    claimed: Vec<(usize, Vec<Filter>)>,
    /// Claimed filters their plugin keeps live ([`Plugin::live_condition`]).
    live_claimed: Vec<(Filter, LiveCondition)>,
    /// Access checks that need stored rows (an anonymous ids lookup), run on the
    /// connection that then reads: one that is not whole makes the answer partial.
    stored_checks: Vec<StoredCheck>,
    /// An anonymous reader's filter could also match channel data: the answer is the
    /// community-wide part, ended by `auth-required:` ([`QueryResult::needs_auth`]).
    partial: bool,
}

impl CheckedQuery {
    /// The filters core serves (and a WebSocket subscription keeps live).
    pub fn live_filters(&self) -> &[Filter] {
        &self.standard
    }

    /// The claimed filters a WebSocket subscription keeps live too, each with its
    /// plugin's condition.
    pub fn live_claimed(&self) -> &[(Filter, LiveCondition)] {
        &self.live_claimed
    }
}

pub struct QueryService {
    services: Services,
    plugins: Arc<[Arc<dyn Plugin>]>,
}

impl QueryService {
    pub fn new(services: Services, plugins: Arc<[Arc<dyn Plugin>]>) -> Self {
        QueryService { services, plugins }
    }

    /// Check and execute in one go.
    pub async fn run(&self, ctx: &ConnCtx, filters: Vec<Filter>) -> Result<QueryResult, Reason> {
        let prepared = self.prepare(ctx, filters).await?;
        self.execute(ctx, prepared).await
    }

    /// Every refusal a query can get before anything is read: shape and size bounds,
    /// core's access rules, plugins' filter rules. Whether an anonymous reader's answer is
    /// whole is decided here from the filters' shapes, and for an ids lookup in the same
    /// trip to the store as the read ([`QueryResult::needs_auth`]).
    /// A refusal here is counted as a rejected query in the relay's metrics.
    pub async fn prepare(
        &self,
        ctx: &ConnCtx,
        filters: Vec<Filter>,
    ) -> Result<CheckedQuery, Reason> {
        let started = std::time::Instant::now();
        let outcome = self.prepare_checked(ctx, filters).await;
        if outcome.is_err() {
            self.services.metrics.queried(started, &outcome);
        }
        outcome
    }

    async fn prepare_checked(
        &self,
        ctx: &ConnCtx,
        filters: Vec<Filter>,
    ) -> Result<CheckedQuery, Reason> {
        check_bounds(&filters, &self.services.settings.limits)?;
        // A banned member reads nothing (`access/standing.rs`), claimed filters included.
        self.services.access.check_standing(ctx).await?;
        // Claims first, so a plugin's filter is judged by its own rules only.
        let mut claimed: Vec<(usize, Vec<Filter>)> = Vec::new();
        let mut live_claimed = Vec::new();
        let mut standard = Vec::new();
        let count = filters.len();
        for filter in filters {
            let claimant = self.plugins.iter().position(|p| p.claims_filter(&filter));
            if let Some(i) = claimant.filter(|&i| self.plugins[i].is_action(&filter)) {
                if let Err(why) = check_action(ctx, count, self.plugins[i].name()) {
                    return Err(self.plugins[i].refuse_action(why));
                }
            }
            if let Some(condition) = claimant.and_then(|i| self.plugins[i].live_condition(&filter))
            {
                live_claimed.push((filter.clone(), condition));
            }
            match claimant {
                Some(i) => match claimed.iter_mut().find(|(p, _)| *p == i) {
                    Some((_, list)) => list.push(filter),
                    None => claimed.push((i, vec![filter])),
                },
                None => standard.push(filter),
            }
        }
        let mut stored_checks = Vec::new();
        let mut partial = false;
        for filter in &standard {
            match self.services.access.readable(ctx, filter)? {
                Readable::All => {}
                Readable::Public => partial = true,
                Readable::Decided(check) => stored_checks.push(check),
            }
            for plugin in self.plugins.iter() {
                if let Err(reason) = plugin.reject_filter(ctx, filter) {
                    self.services
                        .metrics
                        .plugin_refused(plugin.name(), "check_filter");
                    return Err(reason);
                }
            }
        }
        Ok(CheckedQuery {
            standard,
            claimed,
            live_claimed,
            stored_checks,
            partial,
        })
    }

    /// Read what a prepared query matches (core's events only as keys, see
    /// [`StoredAnswer`]) and ask the claiming plugins.
    /// Counted (outcome and time) in the relay's metrics.
    pub async fn execute(
        &self,
        ctx: &ConnCtx,
        prepared: CheckedQuery,
    ) -> Result<QueryResult, Reason> {
        let no_first_page: Option<FirstPage<()>> = None;
        let (result, _) = self.execute_reading(ctx, prepared, no_first_page).await?;
        Ok(result)
    }

    /// [`Self::execute`], reading core's first page with the keys when `first` finds
    /// room for it (see [`FirstPage`]): that page, with the room it took, comes back
    /// beside the result, whose [`StoredAnswer`] continues after it.
    pub async fn execute_with_first_page<R: Send + 'static>(
        &self,
        ctx: &ConnCtx,
        prepared: CheckedQuery,
        first: FirstPage<R>,
    ) -> Result<WithFirstPage<R>, Reason> {
        self.execute_reading(ctx, prepared, Some(first)).await
    }

    async fn execute_reading<R: Send + 'static>(
        &self,
        ctx: &ConnCtx,
        prepared: CheckedQuery,
        first: Option<FirstPage<R>>,
    ) -> Result<WithFirstPage<R>, Reason> {
        let started = std::time::Instant::now();
        let outcome = self.execute_prepared(ctx, prepared, first).await;
        self.services.metrics.queried(started, &outcome);
        outcome
    }

    async fn execute_prepared<R: Send + 'static>(
        &self,
        ctx: &ConnCtx,
        prepared: CheckedQuery,
        first: Option<FirstPage<R>>,
    ) -> Result<WithFirstPage<R>, Reason> {
        let CheckedQuery {
            standard,
            claimed,
            stored_checks,
            mut partial,
            ..
        } = prepared;
        let limits = &self.services.settings.limits;
        let mut stored = StoredAnswer::empty(self.services.store.clone());
        let mut first_page = None;
        if !standard.is_empty() {
            let scope = self.scope_of(ctx, &standard).await?;
            let community_id = scope.community_id;
            let max_limit = limits.max_limit;
            let now = self.services.clock.now_secs();
            let jobs: Vec<(Filter, u64)> = standard
                .iter()
                .map(|f| (f.clone(), row_limit(f, max_limit)))
                .collect();
            let store = self.services.store.clone();
            let whole;
            (stored, first_page, whole) = self
                .services
                .store
                .read(move |mut conn| {
                    let whole = StoredCheck::all_whole(&stored_checks, &mut conn)?;
                    let mut matches = Vec::new();
                    for (filter, limit) in &jobs {
                        matches.extend(query_keys(&mut conn, &scope, filter, *limit, now)?);
                    }
                    let mut stored = StoredAnswer::merged(store, community_id, matches);
                    let page = match first {
                        Some(first) => stored.read_first(&mut conn, first)?,
                        None => None,
                    };
                    Ok((stored, page, whole))
                })
                .await?;
            partial |= !whole;
        }
        let mut result = QueryResult {
            stored,
            events: Vec::new(),
            object: None,
            live_filters: standard,
            needs_auth: partial.then(auth_first),
        };
        for (index, filters) in claimed {
            match self.plugins[index].answer_claimed(ctx, filters).await? {
                QueryAnswer::Events(events) => result.events.extend(events),
                QueryAnswer::Stored(keys) => result.stored.extend(ctx.community_id(), keys),
                QueryAnswer::Object(obj) => {
                    if result.object.is_some()
                        || !result.events.is_empty()
                        || !result.stored.is_empty()
                    {
                        return Err(Reason::invalid(
                            "an action filter must be the only filter of its query",
                        ));
                    }
                    result.object = Some(obj);
                }
            }
        }
        Ok((result, first_page))
    }
}

/// Plugins' message verbs check their filters through the query service without the
/// plugin API naming it.
#[async_trait::async_trait]
impl PlainReads for QueryService {
    async fn check_plain(
        &self,
        ctx: &ConnCtx,
        filters: Vec<Filter>,
        verb: &str,
    ) -> Result<Vec<Filter>, Reason> {
        QueryService::check_plain(self, ctx, filters, verb).await
    }
}

impl QueryService {
    /// NIP-45 `COUNT`: the same checks as a REQ ([`Self::prepare`]: bounds, core's access
    /// rules — `auth-required:` for channel data before AUTH — and plugins' filter rules),
    /// then the number of distinct events the filters match within the caller's read
    /// scope, so a channel the caller cannot read counts like one that does not exist.
    /// Filters a plugin claims are refused (their answers are not plain event sets)
    /// unless one plugin claimed all of them and counts them ([`Plugin::answer_count`]).
    /// Counted in the relay's metrics like a query. Counting stops at `limits.max_count`:
    /// a larger count is answered as that number, approximate (NIP-45).
    pub async fn count(&self, ctx: &ConnCtx, filters: Vec<Filter>) -> Result<Count, Reason> {
        let started = std::time::Instant::now();
        let outcome = self.count_checked(ctx, filters).await;
        self.services.metrics.queried(started, &outcome);
        outcome
    }

    async fn count_checked(&self, ctx: &ConnCtx, filters: Vec<Filter>) -> Result<Count, Reason> {
        let CheckedQuery {
            standard,
            claimed,
            stored_checks,
            partial,
            ..
        } = self.prepare_checked(ctx, filters).await?;
        if let [(index, filters)] = claimed.as_slice() {
            if standard.is_empty() {
                let plugin = &self.plugins[*index];
                if let Some(count) = plugin.answer_count(ctx, filters.clone()).await? {
                    return Ok(count);
                }
            }
        }
        if !claimed.is_empty() {
            return Err(Reason::invalid(
                "COUNT takes plain NIP-01 filters; this one has extension fields that only \
                 REQ or POST /query answer",
            ));
        }
        // A count cannot be a part and a CLOSED at once: what could match channel data
        // before AUTH is refused whole (`access/anonymous.rs`).
        if partial {
            return Err(auth_first());
        }
        let scope = self.scope_of(ctx, &standard).await?;
        let now = self.services.clock.now_secs();
        let cap = self.services.settings.limits.max_count;
        self.services
            .store
            .read(move |mut conn| {
                if !StoredCheck::all_whole(&stored_checks, &mut conn)? {
                    return Err(auth_first());
                }
                count_matching(&mut conn, &scope, &standard, now, cap)
            })
            .await
    }

    /// The checks a REQ of these filters gets ([`Self::prepare`]: bounds, core's access
    /// rules — `auth-required:` for channel data before AUTH —, plugins' filter rules), for
    /// a verb that reads plain NIP-01 filters some other way (a plugin's message verb: a
    /// NIP-77 reconciliation, say). `verb` names it in the refusal of a filter a plugin
    /// claims: claimed filters' answers are not plain event sets. Returns the filters,
    /// which the caller then reads within [`crate::access::AccessService::scope_for`].
    /// A refusal is counted as a rejected query in the relay's metrics.
    pub async fn check_plain(
        &self,
        ctx: &ConnCtx,
        filters: Vec<Filter>,
        verb: &str,
    ) -> Result<Vec<Filter>, Reason> {
        let started = std::time::Instant::now();
        let outcome = self.plain_checked(ctx, filters, verb).await;
        if outcome.is_err() {
            self.services.metrics.queried(started, &outcome);
        }
        outcome
    }

    async fn plain_checked(
        &self,
        ctx: &ConnCtx,
        filters: Vec<Filter>,
        verb: &str,
    ) -> Result<Vec<Filter>, Reason> {
        let CheckedQuery {
            standard,
            claimed,
            stored_checks,
            partial,
            ..
        } = self.prepare_checked(ctx, filters).await?;
        if !claimed.is_empty() {
            return Err(Reason::invalid(format!(
                "{verb} takes plain NIP-01 filters; this one has extension fields that only \
                 REQ or POST /query answer"
            )));
        }
        // Its caller reads every match: what could match channel data before AUTH is
        // refused whole, as for COUNT.
        if partial {
            return Err(auth_first());
        }
        if !stored_checks.is_empty() {
            let whole = self
                .services
                .store
                .read(move |mut conn| StoredCheck::all_whole(&stored_checks, &mut conn))
                .await?;
            if !whole {
                return Err(auth_first());
            }
        }
        Ok(standard)
    }

    /// The caller's read scope for `filters`: filters that all name their channels need
    /// decisions on those alone.
    async fn scope_of(
        &self,
        ctx: &ConnCtx,
        filters: &[Filter],
    ) -> Result<crate::store::Scope, Reason> {
        let named: Option<Vec<String>> = filters
            .iter()
            .map(|f| f.channels().map(<[String]>::to_vec))
            .collect::<Option<Vec<_>>>()
            .map(|lists| lists.concat());
        self.services.access.scope_for(ctx, named).await
    }
}

/// An action filter (see [`Plugin::is_action`]) is the whole query, over HTTP.
fn check_action(ctx: &ConnCtx, filters: usize, plugin: &str) -> Result<(), String> {
    if ctx.transport != crate::ctx::Transport::Http {
        return Err(format!("{plugin} actions are served over POST /query only"));
    }
    if filters != 1 {
        return Err("an action filter must be the only filter of its query".into());
    }
    Ok(())
}

/// How many filters, and how many values in each and in all: every value is an SQL
/// parameter and a fan-out index entry, so these bounds keep a request within what the
/// databases accept and what the relay can hold (advertised in NIP-11).
/// How many rows one filter may return: its `limit`, at most `max_limit`, which bounds what
/// an open-ended filter costs. A filter naming ids is bounded by them instead (each matches
/// at most one event, and `max_filter_values` caps how many it names), so a client that
/// looks up 1,000 ids it holds gets every stored one, not the first `max_limit`.
fn row_limit(filter: &Filter, max_limit: u64) -> u64 {
    let cap = match &filter.ids {
        Some(ids) => ids.len() as u64,
        None => max_limit,
    };
    filter.limit.unwrap_or(cap).min(cap)
}

fn check_bounds(filters: &[Filter], limits: &LimitSettings) -> Result<(), Reason> {
    if filters.is_empty() {
        return Err(Reason::invalid("at least one filter is required"));
    }
    if filters.len() > limits.max_filters {
        return Err(Reason::invalid(format!(
            "at most {} filters per query (max_filters)",
            limits.max_filters
        )));
    }
    let mut total = 0;
    for filter in filters {
        let values = filter.value_count();
        if values > limits.max_filter_values {
            return Err(Reason::invalid(format!(
                "a filter holds {values} values; at most {} (ids, authors, kinds and tag \
                 values together; max_filter_values)",
                limits.max_filter_values
            )));
        }
        total += values;
    }
    if total > limits.max_query_values {
        return Err(Reason::invalid(format!(
            "the filters hold {total} values; at most {} per query (max_query_values)",
            limits.max_query_values
        )));
    }
    Ok(())
}
