//! Structural checks of channel and community events, before any storage or policy.

use crate::error::Reason;
use buzz_nostr::channel_tags::{is_lowercase_uuid, requested_privacy, requested_role, target_id};
use buzz_nostr::event::Event;
use buzz_nostr::kinds::*;

fn is_hex64(v: &str) -> bool {
    v.len() == 64
        && v.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Why `id` cannot name a new channel, in words a client author can act on: NIP-CW and
/// NIP-AR bind channels by lowercase UUID, so the relay takes no other ids.
fn not_a_channel_id(id: &str) -> Reason {
    let shown: String = id.chars().take(64).collect();
    Reason::invalid(format!(
        "channel ids on this relay are lowercase UUIDs (8-4-4-4-12 hex digits, e.g. \
         0f8b7e3c-1d2a-4b5c-9e8f-123456789abc); {shown:?} is not one: send the 9007 with a \
         freshly generated UUID v4, lowercased, as its h tag"
    ))
}

/// Reject malformed channel and community events.
pub fn check(event: &Event) -> Result<(), Reason> {
    let kind = event.kind;
    let h_count = event.tag_values("h").count();
    if requires_channel(kind) && h_count != 1 {
        return Err(Reason::invalid(format!(
            "kind {kind} requires exactly one h tag"
        )));
    }
    match kind {
        CREATE_CHANNEL => {
            let id = event.channel_id().unwrap_or_default();
            if !is_lowercase_uuid(id) {
                return Err(not_a_channel_id(id));
            }
            // NIP-29 requires no name: a channel may go unnamed until a 9002 names it.
            // One given must name something.
            if event.tag_value("name").is_some_and(|n| n.trim().is_empty()) {
                return Err(Reason::invalid("channel name must not be empty"));
            }
            if let Some(t) = event.tag_value("channel_type") {
                if !matches!(t, "stream" | "forum" | "dm") {
                    return Err(Reason::invalid("channel_type must be stream, forum or dm"));
                }
            }
            if let Some(ttl) = event.tag_value("ttl") {
                if !ttl.parse::<i64>().is_ok_and(|t| t > 0) {
                    return Err(Reason::invalid("ttl must be a positive number of seconds"));
                }
            }
            requested_privacy(event)?;
        }
        EDIT_CHANNEL => {
            let has_change = ["name", "about", "archived", "private", "open", "visibility"]
                .iter()
                .any(|n| {
                    event
                        .tags
                        .iter()
                        .any(|t| t.first().map(String::as_str) == Some(n))
                });
            if !has_change {
                return Err(Reason::invalid("channel edit changes nothing"));
            }
            if let Some(a) = event.tag_value("archived") {
                if !matches!(a, "true" | "false") {
                    return Err(Reason::invalid("archived must be \"true\" or \"false\""));
                }
            }
            if event.tag_value("name").is_some_and(|n| n.trim().is_empty()) {
                return Err(Reason::invalid("channel name must not be empty"));
            }
            requested_privacy(event)?;
        }
        ADD_MEMBER
        | REMOVE_MEMBER
        | COMMUNITY_ADD_MEMBER
        | COMMUNITY_REMOVE_MEMBER
        | BAN
        | UNBAN
        | TIMEOUT => {
            let tag = event
                .tags
                .iter()
                .find(|t| t.first().map(String::as_str) == Some("p"));
            if !tag.is_some_and(|t| t.get(1).is_some_and(|p| is_hex64(p))) {
                return Err(Reason::invalid(format!(
                    "kind {kind} needs a p tag with a hex pubkey"
                )));
            }
            if kind == ADD_MEMBER {
                requested_role(event)?;
            }
            if kind == TIMEOUT
                && event
                    .tag_value("until")
                    .and_then(|u| u.parse::<i64>().ok())
                    .is_none()
            {
                return Err(Reason::invalid(
                    "a timeout needs an until tag (unix seconds)",
                ));
            }
        }
        MODERATE_REMOVE if !target_id(event).is_some_and(is_hex64) => {
            return Err(Reason::invalid("a removal needs an e tag naming the event"));
        }
        k if TARGETING.contains(&k) && !target_id(event).is_some_and(is_hex64) => {
            return Err(Reason::invalid(format!(
                "kind {k} needs an e tag naming its target"
            )));
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use buzz_nostr::keys::Keys;

    fn ev(kind: u32, tags: &[&[&str]]) -> Event {
        let tags = tags
            .iter()
            .map(|t| t.iter().map(|s| s.to_string()).collect())
            .collect();
        Keys::generate().sign(kind, tags, "", 1)
    }

    const CH: &str = "0f8b7e3c-1d2a-4b5c-9e8f-123456789abc";

    #[test]
    fn structural_rules() {
        let pk = "a".repeat(64);
        let ok: Vec<Event> = vec![
            ev(9007, &[&["h", CH], &["name", "general"]]),
            // NIP-29 helpers send only `h`.
            ev(9007, &[&["h", CH]]),
            ev(
                9007,
                &[
                    &["h", CH],
                    &["name", "x"],
                    &["channel_type", "forum"],
                    &["ttl", "60"],
                ],
            ),
            ev(9002, &[&["h", CH], &["archived", "true"]]),
            ev(9000, &[&["h", CH], &["p", &pk, "admin"]]),
            ev(9000, &[&["h", CH], &["p", &pk], &["role", "admin"]]),
            ev(9007, &[&["h", CH], &["visibility", "private"]]),
            ev(9002, &[&["h", CH], &["visibility", "public"]]),
            ev(9044, &[&["p", &pk], &["until", "5"]]),
            ev(9, &[&["h", CH]]),
        ];
        for e in &ok {
            assert!(check(e).is_ok(), "kind {} {:?}", e.kind, e.tags);
        }
        let bad: Vec<Event> = vec![
            ev(9, &[]),
            ev(9, &[&["h", CH], &["h", CH]]),
            ev(9007, &[&["h", "NOT-A-UUID"], &["name", "x"]]),
            ev(9007, &[&["h", &CH.to_uppercase()], &["name", "x"]]),
            ev(9007, &[&["h", CH], &["name", " "]]),
            ev(
                9007,
                &[&["h", CH], &["name", "x"], &["channel_type", "voice"]],
            ),
            ev(9007, &[&["h", CH], &["name", "x"], &["ttl", "0"]]),
            ev(9002, &[&["h", CH]]),
            ev(9002, &[&["h", CH], &["archived", "yes"]]),
            ev(9000, &[&["h", CH], &["p", "xyz"]]),
            ev(9000, &[&["h", CH], &["p", &pk, "king"]]),
            ev(
                9000,
                &[&["h", CH], &["p", &pk, "member"], &["role", "admin"]],
            ),
            ev(9007, &[&["h", CH], &["visibility", "secret"]]),
            ev(9002, &[&["h", CH], &["private"], &["visibility", "public"]]),
            ev(9005, &[&["h", CH]]),
            ev(7, &[&["h", CH]]),
            ev(9044, &[&["p", &pk]]),
        ];
        for e in &bad {
            let err = check(e).expect_err(&format!("kind {} {:?}", e.kind, e.tags));
            assert!(err.to_string().starts_with("invalid: "), "{err}");
        }
    }
}
