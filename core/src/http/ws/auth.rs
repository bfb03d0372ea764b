//! NIP-42 AUTH on one connection (refused to a banned pubkey), and the read scope it and
//! access changes decide.

use super::messages;
use super::Connection;
use crate::error::Reason;
use crate::store::Scope;
use buzz_nostr::event::Event;
use buzz_nostr::nip42;
use serde_json::Value;

impl Connection {
    pub(super) async fn on_auth(&mut self, value: Value) {
        let id = value
            .get("id")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let result = serde_json::from_value::<Event>(value)
            .map_err(|e| Reason::invalid(format!("not a Nostr event: {e}")))
            .and_then(|event| {
                let now = self.state.services.clock.now_secs();
                nip42::verify(&event, &self.challenge, &self.relay_url, now)
                    .map(|()| event.pubkey)
                    .map_err(Reason::from)
            });
        // A banned pubkey gets no session (`access/standing.rs`).
        let result = match result {
            Ok(pubkey) => self
                .state
                .services
                .access
                .check_standing_of(&self.ctx.community, &pubkey)
                .await
                .map(|()| pubkey),
            Err(reason) => Err(reason),
        };
        match result {
            Ok(pubkey) => {
                // From now on its reads share its pubkey's lane and bound.
                crate::store::ReadClient::switch_to(crate::store::ReadClient::pubkey(&pubkey));
                self.ctx.pubkey = Some(pubkey);
                self.live.authenticated();
                self.refresh_scope().await;
                self.out.send(messages::ok(&id, true, ""));
            }
            Err(reason) => self
                .out
                .refuse(messages::ok(&id, false, &reason.wire_text())),
        }
    }

    pub(super) async fn refresh_scope(&mut self) {
        let scope = self.state.services.access.read_scope(&self.ctx).await;
        self.set_scope(scope);
    }

    /// After an access change passed by: the cached decisions brought forward by it.
    pub(super) async fn refresh_live_scope(&mut self) {
        let scope = self.state.services.access.live_scope(&self.ctx).await;
        self.set_scope(scope);
    }

    pub(super) fn set_scope(&mut self, scope: Result<Scope, Reason>) {
        match scope {
            Ok(scope) => self.scope = Some(scope),
            Err(reason) => {
                // Without a scope nothing live is delivered (fail closed).
                self.scope = None;
                self.out.send(messages::notice(&reason.wire_text()));
            }
        }
    }
}
