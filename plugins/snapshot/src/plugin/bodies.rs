//! NIP-AR snapshot bodies: the revision bodies a reader asks for by id, each rechecked
//! against the capture and the reader's current authority.

use crate::error::{self, contract};
use crate::limits::PAGE_ENVELOPE_BYTES;
use crate::manifest::names;
use crate::scope;
use buzz_artifacts::{load_revisions, revisions_by_id};
use buzz_core::ctx::ConnCtx;
use buzz_core::error::Reason;
use buzz_nostr::event::Event;
use serde_json::{json, Value};
use std::collections::BTreeMap;

use super::bounds::{admitted, parse, Deadline};
use super::Snapshot;

impl Snapshot {
    pub(super) async fn bodies(
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
}
