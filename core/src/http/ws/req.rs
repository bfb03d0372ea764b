//! REQ and CLOSE on one connection: the stored answer page by page, then the live
//! subscription; refusals end the subscription of that id. An anonymous reader's answer
//! that could also match channel data ends with `CLOSED auth-required:` instead of EOSE
//! and keeps nothing live (`access/anonymous.rs`).

use super::answered::Answered;
use super::messages;
use super::outbound::Reserved;
use super::subs::Sub;
use super::Connection;
use crate::error::Reason;
use crate::query_service::FirstPage;
use crate::store::WireEvent;
use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use serde_json::Value;

impl Connection {
    /// Forget subscription `sub_id` (if open).
    pub(super) fn close_sub(&mut self, sub_id: &str) {
        if let Some(sub) = self.subs.remove(sub_id) {
            self.live.remove(sub.key);
            self.filter_bytes -= sub.filter_bytes;
        }
    }

    /// Refuse a REQ: it ends any subscription of that id.
    pub(super) fn refuse_req(&mut self, sub_id: &str, reason: &Reason) {
        self.close_sub(sub_id);
        self.out
            .refuse(messages::closed(sub_id, &reason.wire_text()));
    }

    pub(super) async fn serve_req(&mut self, sub_id: String, raw: Vec<Value>, filter_bytes: usize) {
        let limits = &self.state.services.settings.limits;
        let (max_subs, max_filter_bytes) = (limits.max_subscriptions, limits.max_filter_bytes);
        if self.subs.get(&sub_id).is_none() && self.subs.len() >= max_subs {
            let reason = Reason::RateLimited(format!("at most {max_subs} open subscriptions"));
            self.out
                .refuse(messages::closed(&sub_id, &reason.wire_text()));
            return;
        }
        // A REQ with an open id replaces that subscription: its bytes are given back.
        let replaced = self.subs.get(&sub_id).map_or(0, |s| s.filter_bytes);
        if self.filter_bytes - replaced + filter_bytes > max_filter_bytes {
            let reason = Reason::invalid(format!(
                "the filters of this connection's subscriptions would exceed \
                 {max_filter_bytes} bytes (max_filter_bytes)"
            ));
            return self.refuse_req(&sub_id, &reason);
        }
        let prepared = match Filter::parse_many(&raw) {
            Ok(filters) => self.state.query.prepare(&self.ctx, filters).await,
            Err(refusal) => Err(refusal.into()),
        };
        let prepared = match prepared {
            Ok(prepared) => prepared,
            Err(reason) => return self.refuse_req(&sub_id, &reason),
        };
        self.close_sub(&sub_id);
        // Listen before querying, so nothing stored meanwhile is missed; the scope may
        // be stale after a time without subscriptions.
        let was_idle = self.live.is_idle();
        let key = self
            .live
            .add_conditioned(prepared.live_filters(), prepared.live_claimed());
        if was_idle {
            self.refresh_scope().await;
        }
        // Stream core's events a page at a time within the outbound bound, then the
        // plugins' events, then EOSE; the subscription is live from then on.
        // Each page's room is taken before it is read, so a client that does not read
        // holds its pages' bytes within its outbound bound too. A page is a quarter of
        // that bound, so live events still find room while an answer streams. The first
        // page is read with the keys when there is room for it at once (`FirstPage`):
        // most answers are one page, and then one trip to the store serves the REQ.
        let page_budget = (self.state.services.settings.limits.max_outbound_bytes / 4).max(1);
        let out = self.out.clone();
        let first = FirstPage {
            budget: page_budget,
            room: Box::new(move |bytes| out.try_reserve(bytes)),
        };
        let executed = self
            .state
            .query
            .execute_with_first_page(&self.ctx, prepared, first)
            .await;
        let executed = match executed {
            Ok((result, _)) if result.object.is_some() => Err(Reason::invalid(
                "this request is only served by POST /query",
            )),
            other => other,
        };
        let (mut result, first_page) = match executed {
            Ok(executed) => executed,
            Err(reason) => {
                self.live.remove(key);
                self.out
                    .refuse(messages::closed(&sub_id, &reason.wire_text()));
                return;
            }
        };
        // A partial answer ends with CLOSED, which ends the subscription (NIP-01): it
        // stops listening now (nothing is delivered to a key before its EOSE anyway).
        let ends_with = result.needs_auth.take();
        if ends_with.is_some() {
            self.live.remove(key);
        }
        let mut answered = Answered::new();
        let prefix = messages::event_prefix(&sub_id);
        if let Some((mut reserved, page)) = first_page {
            if !self
                .send_page(&prefix, &page, &mut reserved, &mut answered)
                .await
            {
                return self.live.remove(key);
            }
        }
        loop {
            let page_bytes = result.stored.next_page_bytes(page_budget);
            if page_bytes == 0 {
                break;
            }
            let Some(mut reserved) = self.out.reserve(page_bytes).await else {
                return self.live.remove(key);
            };
            match result.stored.next_wire_page(page_budget).await {
                Ok(Some(page)) => {
                    if !self
                        .send_page(&prefix, &page, &mut reserved, &mut answered)
                        .await
                    {
                        return self.live.remove(key);
                    }
                }
                Ok(None) => break,
                Err(reason) => {
                    self.live.remove(key);
                    self.out
                        .refuse(messages::closed(&sub_id, &reason.wire_text()));
                    return;
                }
            }
        }
        for event in &result.events {
            answered.push(&event.id);
        }
        if let Some(reason) = ends_with {
            if self.send_events(&sub_id, &result.events).await {
                let closed = messages::closed(&sub_id, &reason.wire_text());
                self.out.send_answer(closed).await;
            }
            return;
        }
        if !self.send_events(&sub_id, &result.events).await
            || !self.out.send_answer(messages::eose(&sub_id)).await
        {
            return self.live.remove(key);
        }
        self.filter_bytes += filter_bytes;
        let answered = answered.seal();
        self.subs.insert(Sub {
            id: sub_id,
            key,
            filter_bytes,
            answered,
        });
    }

    /// Queue a page of a REQ's stored events within the room reserved for it (waiting
    /// for more only if the page's estimate fell short); `false`: the client is gone or
    /// too slow.
    async fn send_page(
        &self,
        prefix: &str,
        page: &[WireEvent],
        reserved: &mut Reserved,
        answered: &mut Answered,
    ) -> bool {
        for event in page {
            answered.push(&event.id);
            let text = messages::event_frame(prefix, &event.json);
            if !self.out.send_reserved(text, reserved).await {
                return false;
            }
        }
        true
    }

    /// Queue a REQ's events, waiting for room; `false`: the client is gone or too slow.
    pub(super) async fn send_events(&self, sub_id: &str, events: &[Event]) -> bool {
        for event in events {
            if !self.out.send_answer(messages::event(sub_id, event)).await {
                return false;
            }
        }
        true
    }
}
