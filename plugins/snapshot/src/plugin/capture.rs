//! NIP-AR snapshot start: register a capture, take the current-state rows under the
//! reader's authority in one read, and write the manifest pages.

use crate::error::{self, contract};
use crate::manifest::{self, Captured, Entry};
use crate::request::CaptureQuery;
use crate::state::Lease;
use buzz_artifacts::{count_listed, current_matches};
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use serde_json::Value;
use std::collections::BTreeMap;
use uuid::Uuid;

use super::bounds::{admitted, refused, Deadline};
use super::pages::page_answer;
use super::Snapshot;

impl Snapshot {
    pub(super) async fn start(
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
    pub(super) async fn capture(
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
    pub(super) async fn take(
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
}
