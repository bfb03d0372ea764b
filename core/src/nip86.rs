//! NIP-86 relay management: what each method means here. `http/nip86.rs` speaks the
//! HTTP side (`POST /`, `application/nostr+json+rpc`, NIP-98); this module parses a call
//! and carries it out.
//!
//! Methods act on the same moderation state as the owners' own events, through the
//! same ingest path: the relay signs the matching event (9042 ban, 9043 unban, 9044
//! timeout, 9040 add member, 9005 removal) with an `["actor", owner]` tag, and
//! [`Ingest::submit_authorized`] stores it — shape checks, the transaction, cache
//! updates and live fan-out (so every relay process and open subscription sees the
//! change) are those of any event. The stored event is the audit record; sanction rows
//! name the owner as their author.
//!
//! Authorization: the NIP-98 signer must be one of the community's `owners` (checked
//! by the caller before [`Call::run`]).

use crate::ctx::ConnCtx;
use crate::error::Reason;
use crate::ingest::Ingest;
use crate::plugin::Services;
use crate::store::{event_channel, moderation};
use buzz_nostr::event::Event;
use buzz_nostr::kinds::{BAN, COMMUNITY_ADD_MEMBER, MODERATE_REMOVE, TIMEOUT, UNBAN};
use serde_json::{json, Value};

/// Every method this relay answers, in `supportedmethods` order. The first seven are
/// NIP-86's; `unbanpubkey`, `timeoutpubkey` and `listtimedoutpubkeys` map the rest of
/// the 9043/9044 state.
pub const METHODS: [&str; 10] = [
    "supportedmethods",
    "banpubkey",
    "unbanpubkey",
    "listbannedpubkeys",
    "allowpubkey",
    "listallowedpubkeys",
    "timeoutpubkey",
    "listtimedoutpubkeys",
    "banevent",
    "listbannedevents",
];

/// Longest `reason` accepted (it is stored in the event and the sanction row).
pub const MAX_REASON_BYTES: usize = 1_024;

/// One parsed call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    SupportedMethods,
    BanPubkey {
        pubkey: String,
        reason: String,
    },
    UnbanPubkey {
        pubkey: String,
    },
    ListBannedPubkeys,
    AllowPubkey {
        pubkey: String,
        reason: String,
    },
    ListAllowedPubkeys,
    TimeoutPubkey {
        pubkey: String,
        until: i64,
        reason: String,
    },
    ListTimedOutPubkeys,
    BanEvent {
        id: String,
        reason: String,
    },
    ListBannedEvents,
}

fn is_hex64(v: &str) -> bool {
    v.len() == 64
        && v.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Call {
    /// The method name (one of [`METHODS`]), for metrics and logs.
    pub fn method(&self) -> &'static str {
        match self {
            Call::SupportedMethods => METHODS[0],
            Call::BanPubkey { .. } => METHODS[1],
            Call::UnbanPubkey { .. } => METHODS[2],
            Call::ListBannedPubkeys => METHODS[3],
            Call::AllowPubkey { .. } => METHODS[4],
            Call::ListAllowedPubkeys => METHODS[5],
            Call::TimeoutPubkey { .. } => METHODS[6],
            Call::ListTimedOutPubkeys => METHODS[7],
            Call::BanEvent { .. } => METHODS[8],
            Call::ListBannedEvents => METHODS[9],
        }
    }

    /// Parse `{"method": "...", "params": [...]}`. Every malformed call is `invalid:`
    /// naming what is wrong.
    pub fn parse(body: &Value) -> Result<Call, Reason> {
        let method = body
            .get("method")
            .and_then(Value::as_str)
            .ok_or_else(|| Reason::invalid("a NIP-86 call needs a string \"method\""))?;
        let params: &[Value] = match body.get("params") {
            None | Some(Value::Null) => &[],
            Some(Value::Array(list)) => list,
            Some(_) => return Err(Reason::invalid("\"params\" must be an array")),
        };
        let text = |i: usize, what: &str| -> Result<String, Reason> {
            match params.get(i) {
                Some(Value::String(s)) => Ok(s.clone()),
                Some(_) => Err(Reason::invalid(format!("{what} must be a string"))),
                None => Err(Reason::invalid(format!("{method} needs {what}"))),
            }
        };
        let key = |i: usize, what: &str| -> Result<String, Reason> {
            let v = text(i, what)?;
            if is_hex64(&v) {
                Ok(v)
            } else {
                Err(Reason::invalid(format!("{what} must be 64 lowercase hex")))
            }
        };
        let reason = |i: usize| -> Result<String, Reason> {
            match params.get(i) {
                None | Some(Value::Null) => Ok(String::new()),
                Some(Value::String(s)) if s.len() <= MAX_REASON_BYTES => Ok(s.clone()),
                Some(Value::String(_)) => Err(Reason::invalid(format!(
                    "reason is longer than {MAX_REASON_BYTES} bytes"
                ))),
                Some(_) => Err(Reason::invalid("reason must be a string")),
            }
        };
        let none = |call: Call| -> Result<Call, Reason> {
            if params.is_empty() {
                Ok(call)
            } else {
                Err(Reason::invalid(format!("{method} takes no params")))
            }
        };
        let at_most = |n: usize| -> Result<(), Reason> {
            if params.len() > n {
                Err(Reason::invalid(format!(
                    "{method} takes at most {n} params"
                )))
            } else {
                Ok(())
            }
        };
        match method {
            "supportedmethods" => none(Call::SupportedMethods),
            "listbannedpubkeys" => none(Call::ListBannedPubkeys),
            "listallowedpubkeys" => none(Call::ListAllowedPubkeys),
            "listtimedoutpubkeys" => none(Call::ListTimedOutPubkeys),
            "listbannedevents" => none(Call::ListBannedEvents),
            "banpubkey" => {
                at_most(2)?;
                Ok(Call::BanPubkey {
                    pubkey: key(0, "the pubkey")?,
                    reason: reason(1)?,
                })
            }
            "unbanpubkey" => {
                at_most(2)?;
                Ok(Call::UnbanPubkey {
                    pubkey: key(0, "the pubkey")?,
                })
            }
            "allowpubkey" => {
                at_most(2)?;
                Ok(Call::AllowPubkey {
                    pubkey: key(0, "the pubkey")?,
                    reason: reason(1)?,
                })
            }
            "timeoutpubkey" => {
                at_most(3)?;
                let until = params
                    .get(1)
                    .and_then(Value::as_i64)
                    .ok_or_else(|| Reason::invalid("timeoutpubkey needs until (unix seconds)"))?;
                Ok(Call::TimeoutPubkey {
                    pubkey: key(0, "the pubkey")?,
                    until,
                    reason: reason(2)?,
                })
            }
            "banevent" => {
                at_most(2)?;
                Ok(Call::BanEvent {
                    id: key(0, "the event id")?,
                    reason: reason(1)?,
                })
            }
            other => Err(Reason::invalid(format!(
                "unknown method {:?}; supportedmethods lists them",
                other.chars().take(64).collect::<String>()
            ))),
        }
    }

    /// Carry out the call for `ctx` (whose pubkey is a verified owner). Returns the
    /// `result` of the answer. Crate-only: it skips the access service, so only the HTTP
    /// handler that checked NIP-98 and ownership may call it.
    pub(crate) async fn run(
        self,
        ctx: &ConnCtx,
        services: &Services,
        ingest: &Ingest,
    ) -> Result<Value, Reason> {
        let owner = ctx
            .pubkey
            .clone()
            .ok_or_else(|| Reason::AuthRequired("NIP-98 authorization required".into()))?;
        let cid = ctx.community_id();
        let store = &services.store;
        let sign = |kind: u32, mut tags: Vec<Vec<String>>, content: &str| -> Event {
            tags.push(vec!["actor".into(), owner.clone()]);
            // Each call is its own event, even when repeated within one second (a ban,
            // an unban and the same ban again must all take effect).
            tags.push(vec![
                "request".into(),
                uuid::Uuid::new_v4().simple().to_string(),
            ]);
            services
                .relay_keys
                .sign(kind, tags, content, services.clock.now_secs())
        };
        let p = |pubkey: &str| vec!["p".to_owned(), pubkey.to_owned()];
        let r = |reason: &str| vec!["reason".to_owned(), reason.to_owned()];
        let event = match self {
            Call::SupportedMethods => return Ok(json!(METHODS)),
            Call::ListBannedPubkeys => return sanctions(services, cid, "ban").await,
            Call::ListTimedOutPubkeys => return sanctions(services, cid, "timeout").await,
            Call::ListAllowedPubkeys => {
                let rows = store
                    .read(move |mut conn| moderation::listed_members(&mut conn, cid))
                    .await?;
                let list: Vec<Value> = rows
                    .into_iter()
                    .map(|m| json!({"pubkey": m.pubkey, "reason": ""}))
                    .collect();
                return Ok(Value::Array(list));
            }
            Call::ListBannedEvents => {
                let rows = store
                    .read(move |mut conn| moderation::removed_events(&mut conn, cid))
                    .await?;
                let list: Vec<Value> = rows
                    .into_iter()
                    .map(|e| json!({"id": e.id, "reason": e.reason}))
                    .collect();
                return Ok(Value::Array(list));
            }
            Call::BanPubkey { pubkey, reason } => {
                let mut tags = vec![p(&pubkey)];
                if !reason.is_empty() {
                    tags.push(r(&reason));
                }
                sign(BAN, tags, &reason)
            }
            Call::UnbanPubkey { pubkey } => sign(UNBAN, vec![p(&pubkey)], ""),
            Call::AllowPubkey { pubkey, reason } => {
                sign(COMMUNITY_ADD_MEMBER, vec![p(&pubkey)], &reason)
            }
            Call::TimeoutPubkey {
                pubkey,
                until,
                reason,
            } => {
                let mut tags = vec![p(&pubkey), vec!["until".into(), until.to_string()]];
                if !reason.is_empty() {
                    tags.push(r(&reason));
                }
                sign(TIMEOUT, tags, &reason)
            }
            Call::BanEvent { id, reason } => {
                let target = id.clone();
                let channel = store
                    .read(move |mut conn| event_channel(&mut conn, cid, &target))
                    .await?;
                let channel = match channel {
                    None => return Err(Reason::NotFound("no such event".into())),
                    Some(None) => {
                        return Err(Reason::invalid(
                            "only channel events can be banned (removed by a moderator)",
                        ))
                    }
                    Some(Some(channel)) => channel,
                };
                sign(
                    MODERATE_REMOVE,
                    vec![vec!["h".into(), channel], vec!["e".into(), id]],
                    &reason,
                )
            }
        };
        tracing::info!(
            community = %ctx.community.host,
            owner = %owner,
            kind = event.kind,
            id = %event.id,
            "NIP-86 moderation"
        );
        ingest.submit_authorized(ctx, event).await?;
        Ok(Value::Bool(true))
    }
}

/// Sanctions of one kind still in force, as NIP-86 lists them (timeouts with `until`).
async fn sanctions(services: &Services, cid: i64, kind: &'static str) -> Result<Value, Reason> {
    let now = services.clock.now_secs();
    let rows = services
        .store
        .read(move |mut conn| moderation::sanctions(&mut conn, cid, Some(kind)))
        .await?;
    Ok(rows
        .into_iter()
        .filter(|s| s.until.is_none_or(|u| u > now))
        .map(|s| match s.until {
            None => json!({"pubkey": s.pubkey, "reason": s.reason}),
            Some(until) => json!({"pubkey": s.pubkey, "reason": s.reason, "until": until}),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn malformed_calls_are_invalid() {
        let pk = "a".repeat(64);
        let bad = [
            json!({}),
            json!({"method": 7}),
            json!({"method": "banpubkey"}),
            json!({"method": "banpubkey", "params": ["xyz"]}),
            json!({"method": "banpubkey", "params": [pk.to_uppercase()]}),
            json!({"method": "banpubkey", "params": [pk, 5]}),
            json!({"method": "banpubkey", "params": [pk, "x".repeat(MAX_REASON_BYTES + 1)]}),
            json!({"method": "banpubkey", "params": [pk, "", "extra"]}),
            json!({"method": "banpubkey", "params": {"pubkey": pk}}),
            json!({"method": "timeoutpubkey", "params": [pk]}),
            json!({"method": "timeoutpubkey", "params": [pk, "soon"]}),
            json!({"method": "listbannedpubkeys", "params": [pk]}),
            json!({"method": "changerelayname", "params": ["x"]}),
        ];
        for body in bad {
            let err = Call::parse(&body).expect_err(&body.to_string());
            assert!(err.to_string().starts_with("invalid: "), "{err}");
        }
    }

    #[test]
    fn every_listed_method_parses_and_names_itself() {
        let pk = "b".repeat(64);
        for method in METHODS {
            let params = match method {
                "timeoutpubkey" => json!([pk, 10]),
                m if m.starts_with("list") || m == "supportedmethods" => json!([]),
                _ => json!([pk]),
            };
            let call = Call::parse(&json!({"method": method, "params": params}))
                .unwrap_or_else(|e| panic!("{method}: {e}"));
            assert_eq!(call.method(), method);
        }
    }
}
