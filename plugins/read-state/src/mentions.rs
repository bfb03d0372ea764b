//! Which `p` tags of a message are its mentions (what gets a mention row and a follow):
//! the first `max_message_mentions` distinct values, in tag order, that name a member of
//! the message's channel other than its author. Everything else the message tags is
//! stored and served with it but changes nobody's read state.
//!
//! Members only: the sidebar lists joined channels, and joining starts a channel caught
//! up, so a mention of anyone else could never count — it would only be rows. The cap
//! bounds what one message writes (a 2,000-tag message wrote ~4,000 rows) and the lookup
//! is bounded with it: membership is asked a fixed-size chunk at a time, and asking
//! stops once the cap is reached.

use crate::ingest::is_hex64;
use crate::sql::{load, Val};
use buzz_core::error::Reason;
use buzz_core::store::Conn;
use buzz_nostr::event::Event;
use diesel::sql_types::Text;
use diesel::QueryableByName;
use std::collections::HashSet;

/// Values asked per membership statement; one SQL text (short chunks repeat a value).
const CHUNK: usize = 100;

#[derive(QueryableByName)]
struct Member {
    #[diesel(sql_type = Text)]
    pubkey: String,
}

/// The mentions of `event` in `channel`, in tag order.
pub(crate) fn select(
    conn: &mut Conn<'_>,
    community_id: i64,
    channel: &str,
    event: &Event,
    max: usize,
) -> Result<Vec<String>, Reason> {
    let mut seen = HashSet::new();
    let candidates: Vec<&str> = event
        .tag_values("p")
        .filter(|p| is_hex64(p) && *p != event.pubkey && seen.insert(*p))
        .collect();
    let text = format!(
        "SELECT pubkey FROM channel_members \
         WHERE community_id = ? AND channel_id = ? AND pubkey IN ({})",
        vec!["?"; CHUNK].join(", ")
    );
    let mut out = Vec::new();
    if max == 0 {
        return Ok(out);
    }
    for chunk in candidates.chunks(CHUNK) {
        let mut binds = vec![Val::I(community_id), Val::T(channel)];
        binds.extend((0..CHUNK).map(|i| Val::T(chunk.get(i).unwrap_or(&chunk[0]))));
        let members: HashSet<String> = load::<Member>(conn, &text, &binds)?
            .into_iter()
            .map(|m| m.pubkey)
            .collect();
        for p in chunk {
            if members.contains(*p) {
                out.push((*p).to_owned());
                if out.len() == max {
                    return Ok(out);
                }
            }
        }
    }
    Ok(out)
}
