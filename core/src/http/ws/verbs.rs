//! The client verbs beyond REQ, EVENT, CLOSE and AUTH: NIP-45 `COUNT`, and every other
//! verb — handed to the plugin that declares it, or answered here so a client never
//! waits on silence (NIP-77's `NEG-OPEN` / `NEG-MSG` get `NEG-ERR` at once while no
//! plugin serves sync).

use super::messages;
use super::Connection;
use crate::error::Reason;
use buzz_nostr::filter::Filter;
use serde_json::Value;

/// NIP-77's verbs that expect an answer; `NEG-CLOSE` expects none.
const NEGENTROPY_ASKING: [&str; 2] = ["NEG-OPEN", "NEG-MSG"];
const NEGENTROPY_CLOSE: &str = "NEG-CLOSE";

impl Connection {
    /// NIP-45: one `COUNT` answer, or `CLOSED` with the reason (the same refusals a REQ
    /// of these filters gets, `auth-required:` included).
    pub(super) async fn serve_count(&mut self, sub_id: String, raw: Vec<Value>) {
        let counted = match Filter::parse_many(&raw) {
            Ok(filters) => self.state.query.count(&self.ctx, filters).await,
            Err(refusal) => Err(refusal.into()),
        };
        match counted {
            Ok(n) => self.out.send(messages::count(&sub_id, n)),
            Err(reason) => self
                .out
                .refuse(messages::closed(&sub_id, &reason.wire_text())),
        }
    }

    /// A verb NIP-01 does not define: the first plugin declaring it answers; else core.
    pub(super) async fn on_other(&mut self, verb: &str, message: Vec<Value>) {
        let plugins = self.state.plugins.clone();
        if let Some(plugin) = plugins.iter().find(|p| p.message_verbs().contains(&verb)) {
            let answered = plugin
                .answer_message(&self.ctx, self.id, message, &self.state.query)
                .await;
            match answered {
                Ok(replies) => {
                    for reply in replies {
                        if is_refusal(&reply) {
                            self.out.refuse(reply.to_string());
                        } else {
                            self.out.send(reply.to_string());
                        }
                    }
                }
                Err(reason) => self.out.refuse(messages::notice(&reason.wire_text())),
            }
            return;
        }
        let sub_id = message.get(1).and_then(Value::as_str);
        match sub_id {
            Some(id) if NEGENTROPY_ASKING.contains(&verb) => {
                let reason = Reason::Blocked(
                    "NIP-77 negentropy sync is not enabled on this relay; use REQ".into(),
                );
                self.out.refuse(messages::neg_err(id, &reason.wire_text()));
            }
            Some(_) if verb == NEGENTROPY_CLOSE => {}
            _ => {
                let reason = Reason::invalid(format!("unknown message type {verb:?}"));
                self.out.refuse(messages::notice(&reason.wire_text()));
            }
        }
    }
}

/// A plugin's reply that refuses what the client sent (it counts against the
/// connection's refusal budget like core's own refusals).
fn is_refusal(reply: &Value) -> bool {
    match reply.get(0).and_then(Value::as_str) {
        Some("NOTICE" | "CLOSED" | "NEG-ERR") => true,
        Some("OK") => reply.get(2) == Some(&Value::Bool(false)),
        _ => false,
    }
}
