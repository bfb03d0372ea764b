//! The subscription index behind live fan-out: every open filter of every connection,
//! filed under one of its indexed fields, so that a published event is matched only
//! against the filters that could take it.
//!
//! A filter is filed under its ids, else its authors, else its first `#tag` list, else
//! its kinds; one with none of those (only `since`/`until`) is checked for every event.
//! An event looks up its id, its author, its kind and each (name, first value) of its
//! tags: the cost per event is the number of its tags plus the filters that share a
//! value with it, not the size of all subscriptions. Candidates are then checked in full
//! against hash sets, so even a 1,000-value filter costs a few lookups.

use buzz_nostr::event::Event;
use buzz_nostr::filter::Filter;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// What a plugin adds to a live filter it claimed (words to look for in the content, say): checked in
/// process, after the filter's NIP-01 fields matched, for each candidate event. It must
/// not block: it runs on the fan-out dispatcher.
pub type LiveCondition = Arc<dyn Fn(&Event) -> bool + Send + Sync>;

/// One subscription, unique within the process.
pub type SubKey = u64;
/// One filter of one subscription.
type FilterRef = (SubKey, usize);

/// A filter ready to test events with hash lookups.
struct Compiled {
    ids: Option<HashSet<String>>,
    authors: Option<HashSet<String>>,
    kinds: Option<HashSet<u32>>,
    tags: Vec<(String, HashSet<String>)>,
    since: Option<i64>,
    until: Option<i64>,
    /// The claiming plugin's own condition, if a plugin claimed the filter.
    condition: Option<LiveCondition>,
    /// Where this filter is filed (to unfile it).
    slot: Slot,
}

#[derive(Clone)]
enum Slot {
    Ids(Vec<String>),
    Authors(Vec<String>),
    Tag(String, Vec<String>),
    Kinds(Vec<u32>),
    Unindexed,
}

impl Compiled {
    fn new(filter: &Filter, condition: Option<LiveCondition>) -> Compiled {
        let set = |list: &Option<Vec<String>>| list.as_ref().map(|l| l.iter().cloned().collect());
        let slot = if let Some(ids) = &filter.ids {
            Slot::Ids(ids.clone())
        } else if let Some(authors) = &filter.authors {
            Slot::Authors(authors.clone())
        } else if let Some((name, values)) = filter.tags.iter().next() {
            Slot::Tag(name.clone(), values.clone())
        } else if let Some(kinds) = &filter.kinds {
            Slot::Kinds(kinds.clone())
        } else {
            Slot::Unindexed
        };
        Compiled {
            ids: set(&filter.ids),
            authors: set(&filter.authors),
            kinds: filter.kinds.as_ref().map(|k| k.iter().copied().collect()),
            tags: filter
                .tags
                .iter()
                .map(|(name, values)| (name.clone(), values.iter().cloned().collect()))
                .collect(),
            since: filter.since,
            until: filter.until,
            condition,
            slot,
        }
    }

    /// The same conditions as [`Filter::matches`], by hash lookup, then the plugin's.
    fn matches(&self, event: &Event) -> bool {
        self.plain_matches(event) && self.condition.as_ref().is_none_or(|c| c(event))
    }

    fn plain_matches(&self, event: &Event) -> bool {
        self.ids.as_ref().is_none_or(|s| s.contains(&event.id))
            && self
                .authors
                .as_ref()
                .is_none_or(|s| s.contains(&event.pubkey))
            && self.kinds.as_ref().is_none_or(|s| s.contains(&event.kind))
            && self.since.is_none_or(|s| event.created_at >= s)
            && self.until.is_none_or(|u| event.created_at <= u)
            && self
                .tags
                .iter()
                .all(|(name, values)| event.tag_values(name).any(|v| values.contains(v)))
    }
}

/// Every live filter, filed for lookup by event.
#[derive(Default)]
pub struct SubscriptionIndex {
    /// Boxed: the table is sized for every live filter of the process and a `Compiled`
    /// is a few hundred bytes, so inline it took that much again for each empty slot of
    /// the table (docs/benchmarks.md "Idle connections").
    filters: HashMap<FilterRef, Box<Compiled>>,
    subs: HashMap<SubKey, usize>,
    by_id: HashMap<String, HashSet<FilterRef>>,
    by_author: HashMap<String, HashSet<FilterRef>>,
    by_tag: HashMap<String, HashMap<String, HashSet<FilterRef>>>,
    by_kind: HashMap<u32, HashSet<FilterRef>>,
    unindexed: HashSet<FilterRef>,
}

impl SubscriptionIndex {
    /// File the filters of subscription `sub` (a filter that can match nothing is left
    /// out).
    pub fn insert(&mut self, sub: SubKey, filters: &[Filter]) {
        self.insert_conditioned(sub, filters, &[]);
    }

    /// File core's `filters` of subscription `sub` and the plugin-claimed ones of
    /// `conditioned`, each with its plugin's condition.
    pub fn insert_conditioned(
        &mut self,
        sub: SubKey,
        filters: &[Filter],
        conditioned: &[(Filter, LiveCondition)],
    ) {
        let all = filters
            .iter()
            .map(|f| (f, None))
            .chain(conditioned.iter().map(|(f, c)| (f, Some(c.clone()))));
        self.subs.insert(sub, filters.len() + conditioned.len());
        for (i, (filter, condition)) in all.enumerate() {
            if filter.is_empty_match() {
                continue;
            }
            let compiled = Compiled::new(filter, condition);
            let at = (sub, i);
            match &compiled.slot {
                Slot::Ids(ids) => file(&mut self.by_id, ids, at),
                Slot::Authors(authors) => file(&mut self.by_author, authors, at),
                Slot::Tag(name, values) => {
                    file(self.by_tag.entry(name.clone()).or_default(), values, at)
                }
                Slot::Kinds(kinds) => file(&mut self.by_kind, kinds, at),
                Slot::Unindexed => {
                    self.unindexed.insert(at);
                }
            }
            self.filters.insert(at, Box::new(compiled));
        }
    }

    /// Unfile every filter of `sub`.
    pub fn remove(&mut self, sub: SubKey) {
        let Some(count) = self.subs.remove(&sub) else {
            return;
        };
        for i in 0..count {
            let at = (sub, i);
            let Some(compiled) = self.filters.remove(&at) else {
                continue;
            };
            match compiled.slot {
                Slot::Ids(ids) => unfile(&mut self.by_id, &ids, at),
                Slot::Authors(authors) => unfile(&mut self.by_author, &authors, at),
                Slot::Tag(name, values) => {
                    if let Some(map) = self.by_tag.get_mut(&name) {
                        unfile(map, &values, at);
                        if map.is_empty() {
                            self.by_tag.remove(&name);
                        }
                    }
                }
                Slot::Kinds(kinds) => unfile(&mut self.by_kind, &kinds, at),
                Slot::Unindexed => {
                    self.unindexed.remove(&at);
                }
            }
        }
    }

    /// The subscriptions with a filter that `event` satisfies, each once.
    pub fn matching(&self, event: &Event) -> Vec<SubKey> {
        let mut candidates: Vec<FilterRef> = self.unindexed.iter().copied().collect();
        let mut add = |set: Option<&HashSet<FilterRef>>| {
            if let Some(set) = set {
                candidates.extend(set.iter().copied());
            }
        };
        add(self.by_id.get(&event.id));
        add(self.by_author.get(&event.pubkey));
        add(self.by_kind.get(&event.kind));
        for tag in &event.tags {
            if let [name, value, ..] = tag.as_slice() {
                add(self.by_tag.get(name).and_then(|m| m.get(value)));
            }
        }
        let mut subs: Vec<SubKey> = candidates
            .into_iter()
            .filter(|at| self.filters.get(at).is_some_and(|f| f.matches(event)))
            .map(|(sub, _)| sub)
            .collect();
        subs.sort_unstable();
        subs.dedup();
        subs
    }

    /// Open subscriptions filed here.
    pub fn len(&self) -> usize {
        self.subs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.subs.is_empty()
    }
}

fn file<K: std::hash::Hash + Eq + Clone>(
    map: &mut HashMap<K, HashSet<FilterRef>>,
    keys: &[K],
    at: FilterRef,
) {
    for key in keys {
        map.entry(key.clone()).or_default().insert(at);
    }
}

fn unfile<K: std::hash::Hash + Eq>(
    map: &mut HashMap<K, HashSet<FilterRef>>,
    keys: &[K],
    at: FilterRef,
) {
    for key in keys {
        if let Some(set) = map.get_mut(key) {
            set.remove(&at);
            if set.is_empty() {
                map.remove(key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use buzz_nostr::keys::Keys;
    use serde_json::{json, Value};

    fn f(v: Value) -> Filter {
        Filter::parse(&v).expect("valid filter")
    }

    /// The index agrees with `Filter::matches` on every (event, filter) pair.
    #[test]
    fn index_agrees_with_plain_matching() {
        let (a, b) = (Keys::generate(), Keys::generate());
        let t = |p: &[&str]| p.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let events = vec![
            a.sign(
                1,
                vec![t(&["t", "rust"]), t(&["e", &"1".repeat(64)])],
                "x",
                100,
            ),
            a.sign(7, vec![t(&["t", "go"]), vec![]], "y", 200),
            b.sign(
                1,
                vec![t(&["h", "room"]), t(&["t", "rust", "extra"])],
                "z",
                300,
            ),
            b.sign(30_000, vec![t(&["d", "k"])], "w", 400),
        ];
        let mut filters = vec![
            json!({}),
            json!({"since": 250}),
            json!({"until": 150}),
            json!({"kinds": [1]}),
            json!({"kinds": [1, 7], "since": 150}),
            json!({"authors": [a.pubkey()]}),
            json!({"authors": [b.pubkey()], "kinds": [1], "#h": ["room"]}),
            json!({"#t": ["rust"]}),
            json!({"#t": ["rust", "go"], "#e": ["1".repeat(64)]}),
            json!({"#d": ["k"], "kinds": [30000]}),
            json!({"kinds": []}),
            json!({"#t": ["extra"]}),
        ];
        filters.push(json!({"ids": [events[1].id, events[3].id]}));
        let filters: Vec<Filter> = filters.into_iter().map(f).collect();
        let mut index = SubscriptionIndex::default();
        for (key, filter) in filters.iter().enumerate() {
            index.insert(key as SubKey, std::slice::from_ref(filter));
        }
        for event in &events {
            let expected: Vec<SubKey> = filters
                .iter()
                .enumerate()
                .filter(|(_, filter)| filter.matches(event))
                .map(|(key, _)| key as SubKey)
                .collect();
            assert_eq!(index.matching(event), expected, "{}", event.content);
        }
        for key in 0..filters.len() {
            index.remove(key as SubKey);
        }
        assert!(index.is_empty() && index.filters.is_empty());
        assert!(index.by_id.is_empty() && index.by_tag.is_empty() && index.by_kind.is_empty());
        assert!(index.by_author.is_empty() && index.unindexed.is_empty());
    }

    /// A plugin's condition narrows its filter: a candidate must pass the NIP-01 fields
    /// and the condition; core's filters of the same subscription are not affected.
    #[test]
    fn a_condition_narrows_only_its_own_filter() {
        let a = Keys::generate();
        let hello = a.sign(1, vec![], "hello world", 100);
        let other = a.sign(1, vec![], "goodbye", 100);
        let note7 = a.sign(7, vec![], "hello", 100);
        let says_hello: LiveCondition = Arc::new(|e: &Event| e.content.contains("hello"));
        let mut index = SubscriptionIndex::default();
        index.insert_conditioned(1, &[], &[(f(json!({"kinds": [1]})), says_hello.clone())]);
        index.insert_conditioned(
            2,
            &[f(json!({"kinds": [7]}))],
            &[(f(json!({})), says_hello)],
        );
        assert_eq!(index.matching(&hello), vec![1, 2]);
        assert_eq!(index.matching(&other), Vec::<SubKey>::new());
        assert_eq!(index.matching(&note7), vec![2]);
        index.remove(1);
        index.remove(2);
        assert!(index.is_empty() && index.filters.is_empty() && index.unindexed.is_empty());
    }
}
