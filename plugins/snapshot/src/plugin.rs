//! [`Snapshot`]: the running plugin — the four actions, each bounded (four at once per
//! process, an elapsed limit per operation, a statement limit inside the database) and
//! each rechecking database authority.

use crate::error::{self, contract};
use crate::limits::{Limits, PAGE_ENVELOPE_BYTES};
use crate::manifest::{self, names, Captured, Entry, Header};
use crate::request::{Action, CaptureQuery, SNAPSHOT};
use crate::scope;
use crate::state::{CaptureStore, Lease, Quota, Refusal};
use crate::token::Tokens;
use buzz_artifacts::{count_listed, current_matches, load_revisions, revisions_by_id, QUERY_KEY};
use buzz_core::access::{AccessService, Authority};
use buzz_core::clock::Clock;
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_core::plugin::{Plugin, QueryAnswer};
use buzz_core::store::{Conn, Store};
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use diesel::RunQueryDsl;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use uuid::Uuid;

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
}

/// One operation's elapsed-time bound, checked between steps.
#[derive(Clone, Copy)]
pub(crate) struct Deadline {
    at: Instant,
    ms: u64,
}

impl Deadline {
    pub(crate) fn check(self) -> Result<(), Reason> {
        if Instant::now() >= self.at {
            return Err(error::unavailable(format!(
                "the snapshot operation exceeded its {} ms limit; retry later",
                self.ms
            )));
        }
        Ok(())
    }
}

/// Bound every following statement of this transaction (PostgreSQL; SQLite's
/// statements are checked between, by the deadline).
fn bound_statements(conn: &mut Conn<'_>, ms: u64) -> Result<(), Reason> {
    if let Conn::Pg(c) = conn {
        diesel::sql_query(format!("SET LOCAL statement_timeout = {ms}")).execute(*c)?;
    }
    Ok(())
}

/// The reader's authority decided in this transaction, its statements bounded, and
/// refused when the reader may not capture at all (banned, not a member): what every
/// step that reads captured state starts with.
pub(crate) fn admitted(
    conn: &mut Conn<'_>,
    access: &AccessService,
    community: &buzz_core::community::Community,
    reader: &str,
    now: i64,
    limits: &Limits,
) -> Result<Authority, Reason> {
    bound_statements(conn, limits.statement_ms)?;
    let authority = access
        .authority(conn, community, reader, now, limits.max_inspected)
        .map_err(contract)?;
    scope::admit(&authority)?;
    Ok(authority)
}

pub(crate) fn parse<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T, Reason> {
    serde_json::from_str(text)
        .map_err(|e| Reason::Internal(anyhow::anyhow!("snapshot {what}: {e}")))
}

fn refused(refusal: Refusal, limits: &Limits) -> Reason {
    error::unavailable(match refusal {
        Refusal::Capacity => format!(
            "all {} shared snapshot captures are in use; retry later",
            limits.max_captures
        ),
        Refusal::Community => format!(
            "this community holds its share of {} snapshot captures; retry later",
            limits.captures_per_community
        ),
        Refusal::CommunityBytes => format!(
            "this community's share of snapshot storage ({} bytes) is full; retry later",
            limits.charged_bytes_per_community
        ),
        Refusal::Reader => format!(
            "you hold {} captures in this community already; let one expire",
            limits.captures_per_reader
        ),
        Refusal::Bytes => format!(
            "the shared snapshot storage ({} bytes) is full; retry later",
            limits.max_charged_bytes
        ),
        Refusal::Lapsed => "the capture took longer than its registration lease".into(),
    })
}

impl Snapshot {
    fn quota(&self) -> Quota {
        Quota {
            max_captures: self.limits.max_captures,
            per_community: self.limits.captures_per_community,
            per_reader: self.limits.captures_per_reader,
            max_charged_bytes: self.limits.max_charged_bytes,
            community_bytes: self.limits.charged_bytes_per_community,
        }
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

    async fn start(
        &self,
        ctx: &ConnCtx,
        reader: &str,
        query: CaptureQuery,
        deadline: Deadline,
    ) -> Result<Value, Reason> {
        // Admission before any slot is counted: a start by someone who may not capture
        // in this community (not a member of a closed one, banned) holds no slot of its
        // share, not even for the moment its access is checked — else a flood of such
        // starts would keep a closed community's members out. The capture itself
        // decides access again, in its own transaction.
        self.authority_now(ctx, reader).await?;
        deadline.check()?;
        let id = Uuid::new_v4();
        let lease = Lease {
            id: id.to_string(),
            community: ctx.community.id,
            reader: reader.to_owned(),
            until_ms: self.now_ms() + self.limits.operation_ms as i64,
        };
        if let Err(refusal) = self
            .captures
            .reserve(&lease, self.quota(), self.now_ms())
            .await?
        {
            return Err(refused(refusal, &self.limits));
        }
        let answer = self.capture(ctx, reader, id, query, deadline).await;
        if answer.is_err() {
            self.captures.release(&lease.id).await;
        }
        answer
    }

    /// Everything a start does once its lease is held: the capture in one
    /// repeatable-read transaction, the manifest, its atomic registration.
    async fn capture(
        &self,
        ctx: &ConnCtx,
        reader: &str,
        id: Uuid,
        query: CaptureQuery,
        deadline: Deadline,
    ) -> Result<Value, Reason> {
        let captured_at = self.clock.now_secs();
        let canonical = query.canonical.clone();
        let (readable, entries) = self.take(ctx, reader, query, captured_at, deadline).await?;
        deadline.check()?;
        let id_text = id.to_string();
        let manifest = manifest::build(
            Captured {
                id: &id_text,
                community: ctx.community.id,
                reader,
                query: &canonical,
                now_ms: self.now_ms(),
                captured_at,
                entries,
                readable: &readable,
            },
            &self.limits,
        )?;
        deadline.check()?;
        if let Err(refusal) = self
            .captures
            .register(&manifest, self.quota(), self.now_ms())
            .await?
        {
            return Err(refused(refusal, &self.limits));
        }
        let token = self.tokens.token(&id, reader, ctx.community.id);
        page_answer(
            &self.tokens,
            &id,
            &token,
            &manifest.header,
            0,
            &manifest.first_page,
        )
    }

    /// The capture itself: scope decided and every matching current identity read in
    /// one repeatable-read transaction. Bounds: inspected memberships, channels and
    /// candidates; the row limit (over → `snapshot_limit`, never cut); a readable
    /// matching artifact in a TTL channel → `snapshot_unsupported_scope`.
    async fn take(
        &self,
        ctx: &ConnCtx,
        reader: &str,
        query: CaptureQuery,
        now: i64,
        deadline: Deadline,
    ) -> Result<
        (
            BTreeMap<String, buzz_core::store::channel_state::ChannelRow>,
            Vec<Entry>,
        ),
        Reason,
    > {
        let (access, community, reader) = (
            self.access.clone(),
            ctx.community.clone(),
            reader.to_owned(),
        );
        let limits = self.limits.clone();
        self.store
            .read(move |mut conn| {
                conn.repeatable_read(|conn| {
                    let authority = admitted(conn, &access, &community, &reader, now, &limits)?;
                    deadline.check()?;
                    let channels: Vec<String> = authority.readable.keys().cloned().collect();
                    let candidates = count_listed(
                        conn,
                        community.id,
                        &channels,
                        query.types.as_deref(),
                        limits.max_inspected + 1,
                    )
                    .map_err(contract)?;
                    if candidates > limits.max_inspected {
                        return Err(error::limit(format!(
                            "more than {} current artifacts to inspect; narrow the query",
                            limits.max_inspected
                        )));
                    }
                    deadline.check()?;
                    let mut current = query.current.clone();
                    current.after = None;
                    current.limit = limits.max_rows + 1;
                    let matches = current_matches(conn, community.id, &channels, &current)
                        .map_err(contract)?;
                    deadline.check()?;
                    if matches.len() > limits.max_rows {
                        return Err(error::limit(format!(
                            "more than {} artifacts match (maxRows); narrow the query",
                            limits.max_rows
                        )));
                    }
                    let temporary = matches.iter().find(|m| {
                        authority.readable.get(&m.channel_id).is_some_and(|row| {
                            row.ttl_seconds.is_some() || row.expires_at.is_some()
                        })
                    });
                    if let Some(m) = temporary {
                        return Err(error::unsupported_scope(format!(
                            "artifact {} matches in channel {}, which has a TTL; version 1 \
                             captures permanent channels only",
                            m.d, m.channel_id
                        )));
                    }
                    let entries = matches
                        .into_iter()
                        .map(|m| Entry {
                            artifact_id: m.d,
                            revision_id: m.revision_id,
                            channel_id: m.channel_id,
                        })
                        .collect();
                    Ok((authority.readable, entries))
                })
            })
            .await
            .map_err(contract)
    }

    /// The capture `token` names for this reader here, and its header. A token that was
    /// not issued to this reader in this community is refused exactly as a made-up one.
    async fn open(
        &self,
        ctx: &ConnCtx,
        reader: &str,
        token: &str,
    ) -> Result<(Uuid, Header), Reason> {
        let id = self
            .tokens
            .open_token(token, reader, ctx.community.id)
            .ok_or_else(|| error::invalid("unknown snapshot token"))?;
        let header = self
            .captures
            .records(&id.to_string(), &[names::HEADER.into()])
            .await?
            .pop()
            .flatten()
            .ok_or_else(|| error::reset("the capture expired or was evicted; start a new one"))?;
        let header: Header = parse(&header, "header")?;
        if header.reader != reader || header.community != ctx.community.id {
            return Err(error::invalid("unknown snapshot token"));
        }
        if header.expires_ms <= self.now_ms() {
            return Err(error::reset("the capture expired; start a new one"));
        }
        Ok((id, header))
    }

    async fn page(
        &self,
        ctx: &ConnCtx,
        reader: &str,
        token: &str,
        cursor: &str,
        deadline: Deadline,
    ) -> Result<Value, Reason> {
        let (id, header) = self.open(ctx, reader, token).await?;
        let n = self
            .tokens
            .open_cursor(&id, cursor)
            .filter(|n| *n < header.pages)
            .ok_or_else(|| error::invalid("unknown cursor for this capture"))?;
        let (frozen, pages, entries) = self.whole(&id, &header).await?;
        deadline.check()?;
        self.recheck(ctx, reader, &header, frozen, entries, deadline)
            .await?;
        deadline.check()?;
        if !self.captures.mark_served(&id.to_string(), n).await? {
            return Err(error::reset("the capture was evicted; start a new one"));
        }
        let page = usize::try_from(n)
            .ok()
            .and_then(|n| pages.get(n))
            .ok_or_else(|| {
                Reason::Internal(anyhow::anyhow!("page {n} of {} missing", header.pages))
            })?;
        page_answer(&self.tokens, &id, token, &header, n, page)
    }

    async fn bodies(
        &self,
        ctx: &ConnCtx,
        reader: &str,
        token: &str,
        revision_ids: Vec<String>,
        deadline: Deadline,
    ) -> Result<Value, Reason> {
        let (id, _header) = self.open(ctx, reader, token).await?;
        let wanted: Vec<String> = revision_ids.iter().map(|r| names::body(r)).collect();
        let records = self.captures.records(&id.to_string(), &wanted).await?;
        let mut captured: Vec<(String, String)> = Vec::with_capacity(records.len());
        let mut channels: BTreeMap<String, String> = BTreeMap::new();
        for (revision, record) in revision_ids.iter().zip(records) {
            let record = record.ok_or_else(|| {
                error::invalid(format!("revision {revision} is not in this capture"))
            })?;
            let [artifact, channel, print]: [String; 3] = parse(&record, "body record")?;
            channels.insert(channel.clone(), print);
            captured.push((artifact, channel));
        }
        deadline.check()?;
        let (access, community, reader_key) = (
            self.access.clone(),
            ctx.community.clone(),
            reader.to_owned(),
        );
        let (now, limits, ids) = (
            self.clock.now_secs(),
            self.limits.clone(),
            revision_ids.clone(),
        );
        let expected = captured.clone();
        let events: Vec<Event> = self
            .store
            .read(move |mut conn| {
                conn.repeatable_read(|conn| {
                    let authority = admitted(conn, &access, &community, &reader_key, now, &limits)?;
                    scope::check_channels(&channels, &authority)?;
                    deadline.check()?;
                    let revisions: BTreeMap<String, _> = revisions_by_id(conn, community.id, &ids)?
                        .into_iter()
                        .map(|r| (r.revision_id.clone(), r))
                        .collect();
                    for (id, (artifact, channel)) in ids.iter().zip(&expected) {
                        match revisions.get(id) {
                            Some(r)
                                if !r.redacted && r.d == *artifact && r.channel_id == *channel => {}
                            _ => {
                                return Err(error::reset(format!(
                                    "captured revision {id} is missing or was removed"
                                )))
                            }
                        }
                    }
                    let events = load_revisions(conn, community.id, &ids)?;
                    if events.len() != ids.len() {
                        return Err(error::reset("a captured revision was removed"));
                    }
                    Ok(events)
                })
            })
            .await
            .map_err(contract)?;
        deadline.check()?;
        let budget = self.limits.body_bytes.saturating_sub(PAGE_ENVELOPE_BYTES);
        let mut total = 0usize;
        let mut out = Vec::with_capacity(events.len());
        for event in events {
            let value = serde_json::to_value(&event).map_err(|e| Reason::Internal(e.into()))?;
            let size = value.to_string().len();
            if size > budget {
                return Err(error::limit(format!(
                    "revision {} takes {size} bytes, over the body limit of {} (bodyBytes)",
                    event.id, self.limits.body_bytes
                )));
            }
            total += size + 1;
            if total > budget {
                return Err(error::limit(format!(
                    "these bodies exceed {} bytes (bodyBytes); ask for fewer at once",
                    self.limits.body_bytes
                )));
            }
            out.push(value);
        }
        Ok(json!({"version": 1, "token": token, "events": out}))
    }

    async fn complete(
        &self,
        ctx: &ConnCtx,
        reader: &str,
        token: &str,
        deadline: Deadline,
    ) -> Result<Value, Reason> {
        let (id, header) = self.open(ctx, reader, token).await?;
        let marks: Vec<String> = (0..header.pages).map(names::served).collect();
        let served = self.captures.records(&id.to_string(), &marks).await?;
        if let Some(skipped) = served.iter().position(Option::is_none) {
            return Err(error::invalid(format!(
                "page {skipped} of this capture was never fetched; fetch every page, then complete"
            )));
        }
        let (frozen, _pages, entries) = self.whole(&id, &header).await?;
        deadline.check()?;
        self.recheck(ctx, reader, &header, frozen, entries, deadline)
            .await?;
        deadline.check()?;
        Ok(json!({"version": 1, "token": token, "complete": true}))
    }
}

/// A start or page response.
fn page_answer(
    tokens: &Tokens,
    id: &Uuid,
    token: &str,
    header: &Header,
    n: u32,
    page: &str,
) -> Result<Value, Reason> {
    let entries: Value = parse(page, "page")?;
    let next = (n + 1 < header.pages).then(|| tokens.cursor(id, n + 1));
    Ok(json!({
        "version": 1,
        "token": token,
        "expiresAt": header.expires_ms.div_euclid(1_000),
        "entries": entries,
        "nextToken": next,
    }))
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
        let deadline = Deadline {
            at: Instant::now() + Duration::from_millis(self.limits.operation_ms),
            ms: self.limits.operation_ms,
        };
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
