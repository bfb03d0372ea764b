//! Scoped terms: what keeps a search's index walk inside its reader's scope (issue 45).
//!
//! Every token is indexed as `{community}¦{token}¦{place}`: the event's community id in
//! decimal, the plugin's token (`text.rs`), and where the event lives — nothing for a
//! community-wide row, 10 hex digits of the SHA-256 of its channel id otherwise (channel
//! ids are arbitrary strings; two that collide only cost time, as the statement checks
//! the channel itself: 40 bits keep that unlikely among a community's channels, and each
//! digit is a byte of every distinct term). `¦` is never part of a token (`text.rs` keeps letters, digits
//! and marks) and is a term character to FTS5's `ascii` tokenizer (every non-ASCII byte
//! is), so a scoped token is one term on both backends.
//!
//! A search names its reader's places in the expression ([`Places`]): a word's postings
//! in a channel the reader cannot read, or in another community, are other terms, never
//! read, so how often a word occurs there does not change how long a search takes.
//! Readers of more than [`MAX_PLACES`] places, and prefix terms (whose place comes after
//! the part the prefix leaves open), match `{community}¦{token}¦*` / `{community}¦{prefix}*`:
//! the community's matches, never another community's, the reader's channels applied by
//! the statement, the walk capped by `max_count_rows`.

use buzz_core::store::{ChannelScope, Scope};
use buzz_nostr::filter::Filter;
use sha2::{Digest, Sha256};

/// Between a scoped token's parts; no token holds it.
pub(crate) const SEP: char = '¦';
/// Most places a search names one by one: each is a term per search word on every
/// index segment, so past this the community's term is cheaper.
pub(crate) const MAX_PLACES: usize = 64;

/// Bytes of a channel id's hash in its place (twice as many hex digits).
const PLACE_BYTES: usize = 5;

/// Where an event lives, as its scoped tokens end: empty for a community-wide row.
pub(crate) fn place(channel: Option<&str>) -> String {
    match channel {
        None => String::new(),
        Some(channel) => hex::encode(&Sha256::digest(channel.as_bytes())[..PLACE_BYTES]),
    }
}

/// The tokens of an event of `community_id` living in `channel`, as indexed.
pub(crate) fn scoped(community_id: i64, channel: Option<&str>, tokens: &[String]) -> Vec<String> {
    let place = place(channel);
    tokens
        .iter()
        .map(|t| format!("{community_id}{SEP}{t}{SEP}{place}"))
        .collect()
}

/// The part of the index a search walks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Places {
    pub community_id: i64,
    /// The places read, each by its own terms; `None`: the whole community.
    pub exact: Option<Vec<String>>,
}

impl Places {
    /// A token exactly at one place.
    pub(crate) fn at(&self, token: &str, place: &str) -> String {
        format!("{}{SEP}{token}{SEP}{place}", self.community_id)
    }

    /// The start of a token at any place of the community (a whole token: `¦` closes it).
    pub(crate) fn anywhere(&self, token: &str) -> String {
        format!("{}{SEP}{token}{SEP}", self.community_id)
    }

    /// The start of any token beginning with `prefix` in the community.
    pub(crate) fn starting(&self, prefix: &str) -> String {
        format!("{}{SEP}{prefix}", self.community_id)
    }
}

/// What a reader with `scope` walks for `filter`: the community-wide place if it reads
/// community-wide rows and names no channel, and each channel it may read (those the
/// filter names, when it names some); the whole community past [`MAX_PLACES`].
/// Mirrors the statement's channel conditions (`search.rs`), which still apply.
pub(crate) fn places(scope: &Scope, filter: &Filter) -> Places {
    let named = filter.channels();
    let whole = Places {
        community_id: scope.community_id,
        exact: None,
    };
    // Channels read one by one; a set of tens of thousands is not listed to find out.
    let channels: Vec<&String> = match (&scope.channels, named) {
        (ChannelScope::All, Some(named)) if named.len() <= MAX_PLACES => named.iter().collect(),
        (ChannelScope::All, _) => return whole,
        (ChannelScope::None, _) => Vec::new(),
        (ChannelScope::Only(set), Some(named)) if named.len() <= MAX_PLACES => {
            named.iter().filter(|c| set.contains(c)).collect()
        }
        (ChannelScope::Only(set), None) if set.len() <= MAX_PLACES => set.iter().collect(),
        (ChannelScope::Only(_), _) => return whole,
    };
    let mut places: Vec<String> = channels.into_iter().map(|c| place(Some(c))).collect();
    if scope.community_wide && named.is_none() {
        places.push(place(None));
    }
    places.sort();
    places.dedup();
    if places.len() > MAX_PLACES {
        return whole;
    }
    Places {
        community_id: scope.community_id,
        exact: Some(places),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scoped_tokens_are_one_term_apart_from_any_word() {
        let doc = crate::text::tokens("Deploy friday ¦ deploy");
        let wide = scoped(7, None, &doc);
        assert_eq!(wide, vec!["7¦deploy¦", "7¦friday¦", "7¦deploy¦"]);
        let chan = scoped(7, Some("a b\"c"), &doc);
        assert!(
            chan[0].starts_with("7¦deploy¦")
                && chan[0].len() == "7¦deploy¦".len() + 2 * PLACE_BYTES
        );
        assert_ne!(place(Some("x")), place(Some("y")));
        // No token holds the separator, so `anywhere` never reaches a longer word.
        assert!(crate::text::tokens("a¦b").iter().all(|t| !t.contains(SEP)));
    }

    fn scope(channels: usize, wide: bool) -> Scope {
        Scope {
            community_id: 5,
            community_wide: wide,
            channels: ChannelScope::Only((0..channels).map(|i| format!("c{i}")).collect()),
            expiry: Default::default(),
        }
    }

    fn filter(value: serde_json::Value) -> Filter {
        Filter::parse(&value).expect("filter")
    }

    #[test]
    fn places_are_the_readers_own_up_to_the_bound() {
        let any = filter(serde_json::json!({}));
        let two = places(&scope(1, true), &any);
        assert_eq!(two.community_id, 5);
        assert_eq!(
            two.exact.map(|mut p| {
                p.sort();
                p
            }),
            Some({
                let mut p = vec![place(None), place(Some("c0"))];
                p.sort();
                p
            })
        );
        assert_eq!(
            places(&scope(MAX_PLACES - 1, true), &any)
                .exact
                .map(|p| p.len()),
            Some(MAX_PLACES)
        );
        assert_eq!(places(&scope(MAX_PLACES, true), &any).exact, None);
        assert_eq!(places(&scope(10_000, false), &any).exact, None);
        // Named channels: only those readable, never the community-wide place.
        let named = filter(serde_json::json!({"#h": ["c3", "elsewhere"]}));
        assert_eq!(
            places(&scope(10_000, true), &named).exact,
            Some(vec![place(Some("c3"))])
        );
        let anonymous = Scope {
            channels: ChannelScope::None,
            ..scope(0, true)
        };
        assert_eq!(places(&anonymous, &any).exact, Some(vec![place(None)]));
        assert_eq!(places(&anonymous, &named).exact, Some(vec![]));
    }
}
