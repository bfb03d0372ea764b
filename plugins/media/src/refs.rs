//! Which blobs stored events name, kept in `media_refs` in each event's own transaction
//! (so it commits or rolls back with the event), for garbage collection: an `imeta` tag's
//! `x <sha256>` or `url …/<sha256>[.ext]` (NIP-92), or a URL naming a sha256 in the
//! content. A 64-hex run counts only after a `/`, so an event id quoted in a message is
//! not taken for a blob; naming too much only keeps a blob longer.

use crate::path::is_sha256;
use buzz_core::error::Reason;
use buzz_core::plugin::PurgedEvent;
use buzz_core::store::prepared::{execute, Val};
use buzz_core::store::Conn;
use buzz_nostr::event::Event;
use std::collections::BTreeSet;

/// Blobs one event may name; more are not recorded (a message does not share 64 files).
const MAX_REFS_PER_EVENT: usize = 64;

/// The blobs `event` names, at most [`MAX_REFS_PER_EVENT`].
pub(crate) fn named_blobs(event: &Event) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for tag in &event.tags {
        if tag.first().map(String::as_str) != Some("imeta") {
            continue;
        }
        for value in tag.iter().skip(1) {
            if let Some(x) = value.strip_prefix("x ") {
                if is_sha256(x.trim()) {
                    found.insert(x.trim().to_owned());
                }
            } else if let Some(url) = value.strip_prefix("url ") {
                in_urls(url, &mut found);
            }
        }
    }
    in_urls(&event.content, &mut found);
    found.into_iter().take(MAX_REFS_PER_EVENT).collect()
}

/// Every `/<64 lowercase hex>` in `text` not followed by more hex.
fn in_urls(text: &str, found: &mut BTreeSet<String>) {
    let bytes = text.as_bytes();
    let hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
    for (i, _) in text.match_indices('/') {
        let start = i + 1;
        let Some(run) = bytes.get(start..start + 64) else {
            break;
        };
        let ends = bytes.get(start + 64).is_none_or(|b| !hex(b));
        if ends && run.iter().all(hex) {
            if let Ok(sha) = std::str::from_utf8(run) {
                found.insert(sha.to_owned());
            }
        }
        if found.len() > MAX_REFS_PER_EVENT {
            return;
        }
    }
}

/// Record what event `seq` of community `cid` names (in the event's transaction).
pub(crate) fn record(conn: &mut Conn<'_>, cid: i64, seq: i64, event: &Event) -> Result<(), Reason> {
    for sha in named_blobs(event) {
        execute(
            conn,
            "INSERT INTO media_refs (community_id, sha256, event_seq) VALUES (?, ?, ?) \
             ON CONFLICT DO NOTHING",
            &[Val::I(cid), Val::T(&sha), Val::I(seq)],
        )?;
    }
    Ok(())
}

/// The purge is deleting these events: their references go with them.
pub(crate) fn forget(conn: &mut Conn<'_>, purged: &[PurgedEvent]) -> Result<(), Reason> {
    for event in purged {
        execute(
            conn,
            "DELETE FROM media_refs WHERE event_seq = ?",
            &[Val::I(event.seq)],
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "b1674191a88ec5cdd733e4240a81803105dc412d6c6708d53ab94fc248f4f553";
    const B: &str = "88a74d0b866c8ba79251a11fe5ac807839226870e77355f02eaf68b156522576";

    fn event(tags: Vec<Vec<String>>, content: &str) -> Event {
        Event {
            id: String::new(),
            pubkey: String::new(),
            created_at: 0,
            kind: 9,
            tags,
            content: content.into(),
            sig: String::new(),
        }
    }

    #[test]
    fn imeta_and_urls_name_blobs_and_bare_ids_do_not() {
        let imeta = vec![
            "imeta".to_owned(),
            format!("url https://x.test/{A}.png"),
            format!("x {B}"),
        ];
        assert_eq!(
            named_blobs(&event(vec![imeta], "")),
            BTreeSet::from([A.to_owned(), B.to_owned()])
        );
        let content = format!("see https://relay.test/{A}.pdf and event {B}");
        assert_eq!(
            named_blobs(&event(vec![], &content)),
            BTreeSet::from([A.to_owned()])
        );
        let longer = format!("https://x.test/{A}0");
        assert!(named_blobs(&event(vec![], &longer)).is_empty());
        let upper = format!("https://x.test/{}", A.to_uppercase());
        assert!(named_blobs(&event(vec![], &upper)).is_empty());
    }
}
