//! The grammar of NIP-77's client messages. Every refusal is decided here, before any
//! session or storage is touched:
//!
//! - `["NEG-OPEN", <sub id>, <filter>, <hex message>]`
//! - `["NEG-MSG", <sub id>, <hex message>]`
//! - `["NEG-CLOSE", <sub id>]`
//!
//! A message whose subscription id is unusable cannot be answered `NEG-ERR` (there is no
//! id to answer under): it gets a `NOTICE`. Any other malformation is answered `NEG-ERR`
//! under its id, and closes that session (NIP-77: a session is closed after `NEG-ERR`).

use buzz_core::error::Reason;
use buzz_nostr::filter::Filter;
use serde_json::Value;

pub(crate) const OPEN: &str = "NEG-OPEN";
pub(crate) const MSG: &str = "NEG-MSG";
pub(crate) const CLOSE: &str = "NEG-CLOSE";
pub(crate) const ERR: &str = "NEG-ERR";
/// The verbs this plugin serves.
pub(crate) const VERBS: &[&str] = &[OPEN, MSG, CLOSE];

/// Longest subscription id, as for REQ.
const MAX_SUB_ID: usize = 64;

/// One parsed client message.
#[derive(Debug)]
pub(crate) enum Request {
    Open {
        sub: String,
        filter: Filter,
        message: Vec<u8>,
    },
    Msg {
        sub: String,
        message: Vec<u8>,
    },
    Close {
        sub: String,
    },
}

/// Why a message cannot be served.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// No usable subscription id: answered with a `NOTICE`.
    Unaddressed(Reason),
    /// Answered `NEG-ERR` under `sub`.
    Addressed(String, Reason),
}

/// Parse `message` (the whole array, verb first).
pub(crate) fn parse(message: &[Value]) -> Result<Request, Refusal> {
    let verb = message.first().and_then(Value::as_str).unwrap_or_default();
    let sub = sub_id(message.get(1), verb).map_err(Refusal::Unaddressed)?;
    let refused = |why: String| Refusal::Addressed(sub.clone(), Reason::Invalid(why));
    let expected = match verb {
        OPEN => 4,
        MSG => 3,
        CLOSE => 2,
        other => {
            return Err(Refusal::Unaddressed(Reason::invalid(format!(
                "unknown message type {other:?}"
            ))))
        }
    };
    if message.len() != expected {
        return Err(refused(format!(
            "{verb} has {expected} elements, not {}",
            message.len()
        )));
    }
    match verb {
        OPEN => {
            let filter = Filter::parse(&message[2])
                .map_err(|refusal| Refusal::Addressed(sub.clone(), refusal.into()))?;
            let message = hex_message(&message[3]).map_err(refused)?;
            Ok(Request::Open {
                sub,
                filter,
                message,
            })
        }
        MSG => {
            let message = hex_message(&message[2]).map_err(refused)?;
            Ok(Request::Msg { sub, message })
        }
        _ => Ok(Request::Close { sub }),
    }
}

fn sub_id(value: Option<&Value>, verb: &str) -> Result<String, Reason> {
    let id = value
        .and_then(Value::as_str)
        .ok_or_else(|| Reason::invalid(format!("{verb} needs a subscription id string second")))?;
    if id.is_empty() || id.chars().count() > MAX_SUB_ID {
        return Err(Reason::invalid(format!(
            "{verb} subscription id must be 1 to {MAX_SUB_ID} characters"
        )));
    }
    Ok(id.to_owned())
}

/// A negentropy message: non-empty hex (it starts with the protocol version byte).
fn hex_message(value: &Value) -> Result<Vec<u8>, String> {
    let text = value
        .as_str()
        .ok_or_else(|| "the negentropy message must be a hex string".to_owned())?;
    if text.is_empty() {
        return Err("the negentropy message is empty (it starts with a version byte)".into());
    }
    hex::decode(text).map_err(|e| format!("the negentropy message is not hex: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parsed(v: Value) -> Result<Request, Refusal> {
        let items = v.as_array().cloned().unwrap_or_default();
        parse(&items)
    }

    fn addressed(v: Value) -> (String, String) {
        match parsed(v) {
            Err(Refusal::Addressed(sub, reason)) => (sub, reason.wire_text()),
            other => panic!("expected NEG-ERR, got {other:?}"),
        }
    }

    #[test]
    fn well_formed_messages_parse() {
        match parsed(json!(["NEG-OPEN", "s", {"kinds": [1]}, "6100"])) {
            Ok(Request::Open {
                sub,
                filter,
                message,
            }) => {
                assert_eq!(sub, "s");
                assert_eq!(filter.kinds, Some(vec![1]));
                assert_eq!(message, vec![0x61, 0x00]);
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parsed(json!(["NEG-MSG", "s", "61"])),
            Ok(Request::Msg { .. })
        ));
        assert!(matches!(
            parsed(json!(["NEG-CLOSE", "s"])),
            Ok(Request::Close { .. })
        ));
    }

    #[test]
    fn a_bad_subscription_id_is_a_notice() {
        for bad in [
            json!(["NEG-OPEN"]),
            json!(["NEG-OPEN", 7, {}, "61"]),
            json!(["NEG-MSG", "", "61"]),
            json!(["NEG-CLOSE", "x".repeat(65)]),
        ] {
            match parsed(bad.clone()) {
                Err(Refusal::Unaddressed(reason)) => {
                    assert!(reason.wire_text().starts_with("invalid: "), "{bad}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn every_other_malformation_is_neg_err_invalid() {
        for bad in [
            json!(["NEG-OPEN", "s", {"kinds": [1]}]),
            json!(["NEG-OPEN", "s", {"kinds": [1]}, "61", "extra"]),
            json!(["NEG-OPEN", "s", [], "61"]),
            json!(["NEG-OPEN", "s", {"kinds": "one"}, "61"]),
            json!(["NEG-OPEN", "s", {}, "zz"]),
            json!(["NEG-OPEN", "s", {}, "616"]),
            json!(["NEG-OPEN", "s", {}, ""]),
            json!(["NEG-OPEN", "s", {}, 61]),
            json!(["NEG-MSG", "s"]),
            json!(["NEG-MSG", "s", "xyz"]),
            json!(["NEG-CLOSE", "s", "more"]),
        ] {
            let (sub, text) = addressed(bad.clone());
            assert_eq!(sub, "s", "{bad}");
            assert!(text.starts_with("invalid: "), "{bad}: {text}");
        }
    }
}
