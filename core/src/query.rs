//! The one query service: WebSocket `REQ` and `POST /query` both call
//! [`QueryService::run`].
//!
//! Filters are checked (core access, then plugins), claimed filters go to their plugin,
//! the rest are served from the store within the caller's read scope.
//! Wire order: core's events (newest first, deduplicated), then each claiming plugin's
//! answer in plugin order.

use crate::ctx::ConnCtx;
use crate::error::Reason;
use crate::event::Event;
use crate::filter::Filter;
use crate::plugin::{Plugin, QueryAnswer, Services};
use crate::store::query_events;
use std::collections::HashSet;
use std::sync::Arc;

/// Everything a query produced.
#[derive(Debug, Default)]
pub struct QueryResult {
    pub events: Vec<Event>,
    /// A plugin's object answer (HTTP only).
    pub object: Option<serde_json::Value>,
    /// The filters core served, which stay live on a WebSocket subscription.
    pub live_filters: Vec<Filter>,
}

pub struct QueryService {
    services: Services,
    plugins: Arc<[Arc<dyn Plugin>]>,
}

impl QueryService {
    pub fn new(services: Services, plugins: Arc<[Arc<dyn Plugin>]>) -> Self {
        QueryService { services, plugins }
    }

    pub async fn run(&self, ctx: &ConnCtx, filters: Vec<Filter>) -> Result<QueryResult, Reason> {
        let limits = &self.services.settings.limits;
        if filters.is_empty() {
            return Err(Reason::invalid("at least one filter is required"));
        }
        if filters.len() > limits.max_filters {
            return Err(Reason::invalid(format!(
                "at most {} filters per query",
                limits.max_filters
            )));
        }
        // Claims first, so a plugin's filter is judged by its own rules only.
        let mut claimed: Vec<(usize, Vec<Filter>)> = Vec::new();
        let mut standard = Vec::new();
        for filter in filters {
            match self.plugins.iter().position(|p| p.claims_filter(&filter)) {
                Some(i) => match claimed.iter_mut().find(|(p, _)| *p == i) {
                    Some((_, list)) => list.push(filter),
                    None => claimed.push((i, vec![filter])),
                },
                None => standard.push(filter),
            }
        }
        for filter in &standard {
            self.services.access.check_filter(ctx, filter).await?;
            for plugin in self.plugins.iter() {
                plugin.check_filter(ctx, filter)?;
            }
        }

        let mut result = QueryResult::default();
        if !standard.is_empty() {
            let scope = self.services.access.read_scope(ctx).await?;
            let max_limit = limits.max_limit;
            let jobs: Vec<(Filter, u64)> = standard
                .iter()
                .map(|f| (f.clone(), f.limit.unwrap_or(max_limit).min(max_limit)))
                .collect();
            let mut events = self
                .services
                .store
                .read(move |mut conn| {
                    let mut all = Vec::new();
                    for (filter, limit) in &jobs {
                        all.extend(query_events(&mut conn, &scope, filter, *limit)?);
                    }
                    Ok(all)
                })
                .await?;
            let mut seen = HashSet::new();
            events.retain(|e| seen.insert(e.id.clone()));
            events.sort_by(|a, b| {
                b.created_at
                    .cmp(&a.created_at)
                    .then_with(|| a.id.cmp(&b.id))
            });
            result.events = events;
            result.live_filters = standard;
        }
        for (index, filters) in claimed {
            match self.plugins[index].answer_claimed(ctx, filters).await? {
                QueryAnswer::Events(events) => result.events.extend(events),
                QueryAnswer::Object(obj) => {
                    if result.object.is_some() || !result.events.is_empty() {
                        return Err(Reason::invalid(
                            "an action filter must be the only filter of its query",
                        ));
                    }
                    result.object = Some(obj);
                }
            }
        }
        Ok(result)
    }
}
