//! [`Snapshot`]: the running plugin — the four actions, each bounded (four at once per
//! process, an elapsed limit per operation, a statement limit inside the database) and
//! each rechecking database authority. This file dispatches them and answers the plugin
//! API; `capture.rs` (start), `pages.rs` (page, complete), `bodies.rs` (bodies) do the
//! work, `bounds.rs` the bounds every action shares.

mod bodies;
mod bounds;
mod capture;
mod pages;

use bounds::bound_statements;
pub(crate) use bounds::{admitted, parse, Deadline};

use crate::error::{self, contract};
use crate::limits::Limits;
use crate::request::{Action, SNAPSHOT};
use crate::scope;
use crate::state::{CaptureStore, Quota};
use crate::token::Tokens;
use buzz_artifacts::QUERY_KEY;
use buzz_core::access::{AccessService, Authority};
use buzz_core::clock::Clock;
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::plugin::{Plugin, QueryAnswer};
use buzz_core::store::Store;
use buzz_nostr::filter::Filter;
use serde_json::{Map, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;

pub struct Snapshot {
    pub(crate) store: Store,
    pub(crate) access: Arc<AccessService>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) captures: Arc<dyn CaptureStore>,
    pub(crate) tokens: Tokens,
    pub(crate) limits: Limits,
    /// The artifact plugin's query limits: a capture query obeys them too.
    pub(crate) artifact_limits: buzz_artifacts::Limits,
    /// Snapshot operations running in this process.
    pub(crate) operations: Arc<Semaphore>,
    /// The shared limits on this relay's communities.
    pub(crate) quota: Quota,
}

impl Snapshot {
    fn quota(&self) -> Quota {
        self.quota.clone()
    }

    fn now_ms(&self) -> i64 {
        self.clock.now_micros().div_euclid(1_000)
    }

    async fn run(
        &self,
        ctx: &ConnCtx,
        reader: &str,
        action: Action,
        deadline: Deadline,
    ) -> Result<Value, Reason> {
        match action {
            Action::Start(query) => self.start(ctx, reader, query, deadline).await,
            Action::Page { token, cursor } => {
                self.page(ctx, reader, &token, &cursor, deadline).await
            }
            Action::Bodies {
                token,
                revision_ids,
            } => {
                self.bodies(ctx, reader, &token, revision_ids, deadline)
                    .await
            }
            Action::Complete { token } => self.complete(ctx, reader, &token, deadline).await,
        }
    }

    /// Decide the reader's scope now, from the database, in a transaction of its own.
    async fn authority_now(&self, ctx: &ConnCtx, reader: &str) -> Result<Authority, Reason> {
        let (access, community, reader) = (
            self.access.clone(),
            ctx.community.clone(),
            reader.to_owned(),
        );
        let (now, statement_ms, max) = (
            self.clock.now_secs(),
            self.limits.statement_ms,
            self.limits.max_inspected,
        );
        let authority = self
            .store
            .read(move |mut conn| {
                conn.repeatable_read(|conn| {
                    bound_statements(conn, statement_ms)?;
                    access.authority(conn, &community, &reader, now, max)
                })
            })
            .await
            .map_err(contract)?;
        scope::admit(&authority)?;
        Ok(authority)
    }
}

#[async_trait::async_trait]
impl Plugin for Snapshot {
    fn name(&self) -> &'static str {
        crate::NAME
    }

    /// `artifacts.snapshot`: NIP-AR's table (merged into the artifact plugin's object).
    fn extend_nip11(&self, doc: &mut Map<String, Value>) {
        let artifacts = doc
            .entry(buzz_artifacts::NAME)
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(object) = artifacts {
            object.insert(SNAPSHOT.into(), self.limits.nip11());
        }
    }

    fn claims_filter(&self, filter: &Filter) -> bool {
        filter.extensions.get(QUERY_KEY).and_then(Value::as_str) == Some(SNAPSHOT)
    }

    fn is_action(&self, _filter: &Filter) -> bool {
        true
    }

    fn refuse_action(&self, why: String) -> Reason {
        error::invalid(why)
    }

    async fn answer_claimed(
        &self,
        ctx: &ConnCtx,
        filters: Vec<Filter>,
    ) -> Result<QueryAnswer, Reason> {
        let [filter] = filters.as_slice() else {
            return Err(error::invalid("a snapshot request is exactly one filter"));
        };
        let action = Action::parse(filter, &self.artifact_limits, &self.limits)?;
        let Some(reader) = ctx.pubkey.as_deref() else {
            return Err(Reason::AuthRequired(
                "snapshot requests require authentication".into(),
            ));
        };
        let Ok(_permit) = self.operations.try_acquire() else {
            return Err(error::unavailable(format!(
                "{} snapshot operations are running on this relay process; retry shortly",
                self.limits.concurrent_operations
            )));
        };
        let deadline = Deadline::after_ms(self.limits.operation_ms);
        let run = self.run(ctx, reader, action, deadline);
        match tokio::time::timeout(Duration::from_millis(self.limits.operation_ms), run).await {
            Ok(answer) => answer.map(QueryAnswer::Object),
            Err(_) => Err(error::unavailable(format!(
                "the snapshot operation exceeded its {} ms limit; retry later",
                self.limits.operation_ms
            ))),
        }
    }

    /// Expired captures are removed a bounded step at a time, here as well as on every
    /// start, so an idle relay does not keep them.
    fn background(self: Arc<Self>) -> Vec<futures_util::future::BoxFuture<'static, ()>> {
        let me = self;
        vec![Box::pin(async move {
            let every = Duration::from_secs(me.limits.lifetime_seconds.clamp(1, 60));
            loop {
                tokio::time::sleep(every).await;
                loop {
                    match me
                        .captures
                        .sweep(me.now_ms(), crate::state::SWEEP_STEP)
                        .await
                    {
                        Ok(n) if n == crate::state::SWEEP_STEP => continue,
                        Ok(_) => break,
                        Err(reason) => {
                            tracing::warn!(%reason, "removing expired snapshot captures");
                            break;
                        }
                    }
                }
            }
        })]
    }
}
