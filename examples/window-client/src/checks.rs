//! Every client check NIP-CW asks for, as pure functions over a received page.
//!
//! A page that fails any check is not a page: the caller discards it whole and never
//! advances its cursor (NIP-CW "Channel-mode Client Behavior" step 5, "Thread Bounds").
//! This client uses the identity-verified trust profile: every overlay's id, signature
//! and signer are checked against the NIP-11 `self` key.

use anyhow::{anyhow, bail, ensure, Context};
use buzz_nostr::event::{verify_signature, Event};
use serde_json::Value;

pub const SUMMARY_KIND: u32 = 39_005;
pub const CHANNEL_BOUNDS_KIND: u32 = 39_006;
pub const THREAD_BOUNDS_KIND: u32 = 39_007;
/// Aux-closure kinds: reaction, deletion, moderator removal, edit.
pub const AUX_KINDS: [u32; 4] = [7, 5, 9_005, 40_003];

/// A composite cursor `(created_at, id)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: i64,
    pub id: String,
}

/// The authoritative exhaustion fact of one page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bounds {
    pub has_more: bool,
    pub next_cursor: Option<Cursor>,
}

fn is_lower_hex64(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The event's id is the NIP-01 hash of its fields and its signature verifies.
pub fn verify_event(event: &Event) -> anyhow::Result<()> {
    ensure!(
        hex::encode(event.compute_id()) == event.id,
        "event {} has a wrong id",
        event.id
    );
    verify_signature(event).map_err(|e| anyhow!("event {}: {e}", event.id))
}

/// An overlay: signed by `relay`, valid id and signature, tags exactly `names` (one each,
/// two elements each), JSON object content. Returns the content.
pub fn verify_overlay(event: &Event, relay: &str, names: &[&str]) -> anyhow::Result<Value> {
    ensure!(
        event.pubkey == relay,
        "kind {} overlay signed by {} instead of the relay {relay}",
        event.kind,
        event.pubkey
    );
    verify_event(event)?;
    let got: Vec<&str> = event
        .tags
        .iter()
        .map(|t| t.first().map_or("", String::as_str))
        .collect();
    ensure!(
        got == names && event.tags.iter().all(|t| t.len() == 2),
        "kind {} overlay tags {:?} are not exactly {names:?}",
        event.kind,
        event.tags
    );
    let content: Value = serde_json::from_str(&event.content)
        .with_context(|| format!("kind {} overlay content is not JSON", event.kind))?;
    ensure!(
        content.is_object(),
        "kind {} overlay content is not an object",
        event.kind
    );
    Ok(content)
}

/// `has_more` / `next_cursor` with their runtime types and `null ⇔ false`. Unknown
/// content fields are ignored (reserved for extensions such as `oldest_retained`).
fn bounds_content(content: &Value) -> anyhow::Result<Bounds> {
    let has_more = content["has_more"]
        .as_bool()
        .ok_or_else(|| anyhow!("has_more is not a boolean"))?;
    let next_cursor = match &content["next_cursor"] {
        Value::Null => None,
        Value::Object(c) => {
            let created_at = c
                .get("created_at")
                .and_then(Value::as_i64)
                .filter(|t| *t >= 0)
                .ok_or_else(|| anyhow!("next_cursor.created_at is not a non-negative integer"))?;
            let id = c
                .get("id")
                .and_then(Value::as_str)
                .filter(|id| is_lower_hex64(id))
                .ok_or_else(|| anyhow!("next_cursor.id is not 64 lowercase hex"))?;
            Some(Cursor {
                created_at,
                id: id.to_owned(),
            })
        }
        other => bail!("next_cursor is neither null nor an object: {other}"),
    };
    ensure!(
        has_more == next_cursor.is_some(),
        "bounds violate next_cursor = null ⇔ has_more = false"
    );
    Ok(Bounds {
        has_more,
        next_cursor,
    })
}

/// The one bounds event of `kind` in `events`.
fn single(events: &[Event], kind: u32) -> anyhow::Result<&Event> {
    let mut found = events.iter().filter(|e| e.kind == kind);
    let first = found
        .next()
        .ok_or_else(|| anyhow!("no kind {kind} bounds: the window was not served"))?;
    ensure!(found.next().is_none(), "more than one kind {kind} bounds");
    Ok(first)
}

/// Channel mode: exactly one `39006`, bound to the request cursor.
pub fn channel_bounds(
    events: &[Event],
    relay: &str,
    channel: &str,
    request_cursor: Option<&Cursor>,
) -> anyhow::Result<Bounds> {
    let bounds = single(events, CHANNEL_BOUNDS_KIND)?;
    let content = verify_overlay(bounds, relay, &["d", "h"])?;
    let suffix = request_cursor.map_or_else(
        || "head".to_owned(),
        |c| format!("{}:{}", c.created_at, c.id),
    );
    ensure!(
        bounds.tags[0][1] == format!("{channel}:{suffix}"),
        "39006 d tag {:?} does not echo the request cursor {suffix:?}",
        bounds.tags[0][1]
    );
    ensure!(bounds.tags[1][1] == channel, "39006 names another channel");
    bounds_content(&content)
}

/// Thread mode: exactly one `39007` with the recomputed request binding.
pub fn thread_bounds(
    events: &[Event],
    relay: &str,
    channel: &str,
    root: &str,
    binding_d: &str,
) -> anyhow::Result<Bounds> {
    let bounds = single(events, THREAD_BOUNDS_KIND)?;
    let content = verify_overlay(bounds, relay, &["d", "h", "e"])?;
    ensure!(
        bounds.tags[0][1] == binding_d,
        "39007 d tag does not match the request binding"
    );
    ensure!(bounds.tags[1][1] == channel, "39007 names another channel");
    ensure!(bounds.tags[2][1] == root, "39007 names another root");
    ensure!(content["version"] == 1, "39007 version is not 1");
    ensure!(
        content["direction"] == "older",
        "39007 direction is not \"older\""
    );
    bounds_content(&content)
}

/// A `39005` summary: exact tags, `e` = `d`, the channel, typed content.
pub fn summary(event: &Event, relay: &str, channel: &str) -> anyhow::Result<Value> {
    let content = verify_overlay(event, relay, &["e", "d", "h"])?;
    ensure!(event.tags[0][1] == event.tags[1][1], "39005 e and d differ");
    ensure!(event.tags[2][1] == channel, "39005 names another channel");
    ensure!(
        content["reply_count"].is_i64()
            && content["descendant_count"].is_i64()
            && (content["last_reply_at"].is_null() || content["last_reply_at"].is_i64())
            && content["participants"]
                .as_array()
                .is_some_and(|p| p.len() <= 10 && p.iter().all(|k| k.is_string())),
        "39005 content has wrong field types: {content}"
    );
    Ok(content)
}

/// Rows are in `created_at DESC, id ASC` order and all strictly after `cursor`.
pub fn newest_first_after(rows: &[Event], cursor: Option<&Cursor>) -> anyhow::Result<()> {
    let after = |e: &Event, c: &Cursor| {
        e.created_at < c.created_at || (e.created_at == c.created_at && e.id > c.id)
    };
    for pair in rows.windows(2) {
        let earlier = Cursor {
            created_at: pair[0].created_at,
            id: pair[0].id.clone(),
        };
        ensure!(after(&pair[1], &earlier), "rows are not in keyset order");
    }
    if let (Some(first), Some(cursor)) = (rows.first(), cursor) {
        ensure!(after(first, cursor), "a row precedes the request cursor");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use buzz_nostr::keys::Keys;
    use serde_json::json;

    const CH: &str = "c0ffee00-0000-4000-8000-000000000000";

    fn bounds(keys: &Keys, d: &str, content: Value) -> Event {
        keys.sign(
            CHANNEL_BOUNDS_KIND,
            vec![vec!["d".into(), d.into()], vec!["h".into(), CH.into()]],
            &content.to_string(),
            1,
        )
    }

    #[test]
    fn channel_bounds_checks() {
        let relay = Keys::generate();
        let pk = relay.pubkey();
        let head = format!("{CH}:head");
        let id = "ab".repeat(32);
        let more = json!({"has_more": true, "next_cursor": {"created_at": 5, "id": id}});
        let good = bounds(&relay, &head, more.clone());
        assert_eq!(
            channel_bounds(std::slice::from_ref(&good), pk, CH, None).expect("valid"),
            Bounds {
                has_more: true,
                next_cursor: Some(Cursor {
                    created_at: 5,
                    id: id.clone()
                })
            }
        );
        let cursor = Cursor {
            created_at: 9,
            id: id.clone(),
        };
        let bad: Vec<(Vec<Event>, Option<&Cursor>)> = vec![
            (vec![], None),
            (vec![good.clone(), good.clone()], None),
            (vec![good.clone()], Some(&cursor)),
            (vec![bounds(&Keys::generate(), &head, more.clone())], None),
            (
                vec![bounds(
                    &relay,
                    &head,
                    json!({"has_more": true, "next_cursor": null}),
                )],
                None,
            ),
            (
                vec![bounds(
                    &relay,
                    &head,
                    json!({"has_more": "no", "next_cursor": null}),
                )],
                None,
            ),
            (
                vec![bounds(
                    &relay,
                    &head,
                    json!({"has_more": false,
                "next_cursor": {"created_at": 5, "id": "xyz"}}),
                )],
                None,
            ),
            (
                vec![{
                    let mut e = good.clone();
                    e.content = "{not json".into();
                    e
                }],
                None,
            ),
            (
                vec![relay.sign(
                    CHANNEL_BOUNDS_KIND,
                    vec![
                        vec!["d".into(), head.clone()],
                        vec!["h".into(), CH.into()],
                        vec!["x".into(), "1".into()],
                    ],
                    &more.to_string(),
                    1,
                )],
                None,
            ),
        ];
        for (events, cursor) in bad {
            assert!(
                channel_bounds(&events, pk, CH, cursor).is_err(),
                "{events:?}"
            );
        }
    }

    #[test]
    fn rows_must_follow_the_cursor_in_keyset_order() {
        let k = Keys::generate();
        let a = k.sign(9, vec![], "a", 10);
        let b = k.sign(9, vec![], "b", 9);
        assert!(newest_first_after(&[a.clone(), b.clone()], None).is_ok());
        assert!(newest_first_after(&[b.clone(), a.clone()], None).is_err());
        let cursor = Cursor {
            created_at: 10,
            id: a.id.clone(),
        };
        assert!(newest_first_after(&[a], Some(&cursor)).is_err());
        assert!(newest_first_after(&[b], Some(&cursor)).is_ok());
    }
}
