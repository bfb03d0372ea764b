//! Ranking a query's candidates within its bounds, and the answer as keys.
//!
//! The index walks (`search.rs`) give each filter's newest candidates as keys and sizes.
//! Here they are pooled — an event several filters found is read once — and ranked
//! newest first until `max_ranked_bytes` of their text, a page of bodies at a time: each
//! page's bytes are reserved from the process's [`RankMemory`] before it is read, each
//! document is scored for every filter that found it and dropped, so one query holds
//! one page of text at most and no body outlives its scoring. What comes back are keys
//! in rank order ([`QueryAnswer::Stored`]): core reads the bodies of the events it sends
//! a page at a time within the connection's outbound bound.
//!
//! [`QueryAnswer::Stored`]: buzz_core::plugin::QueryAnswer::Stored

use crate::memory::{RankMemory, WAIT};
use crate::query::Search as SearchQuery;
use crate::search::{self, Candidate};
use buzz_core::error::Reason;
use buzz_core::store::{EventKey, Store};
use std::collections::HashMap;
use std::sync::Arc;

/// Most bytes of text one page of bodies holds (one larger body is a page alone).
const PAGE_BYTES: usize = 1 << 20;
/// Most rows one page reads.
const PAGE_ROWS: usize = 256;

/// One filter's part: what it looks for, its candidates (newest first) and its `limit`.
pub(crate) struct Part {
    pub search: SearchQuery,
    pub candidates: Vec<Candidate>,
    pub limit: usize,
}

/// A candidate with its rank.
struct Scored {
    key: EventKey,
    id: String,
    score: f64,
}

/// Rank `parts` and answer their events as keys: each filter's best `limit`, every event
/// once at its best rank, in rank order.
pub(crate) async fn rank(
    store: &Store,
    memory: &RankMemory,
    parts: Vec<Part>,
    max_ranked_bytes: usize,
) -> Result<Vec<EventKey>, Reason> {
    // Every candidate once, with the filters that found it.
    let mut pooled: HashMap<i64, (Candidate, Vec<usize>)> = HashMap::new();
    for (i, part) in parts.iter().enumerate() {
        for c in &part.candidates {
            pooled
                .entry(c.seq)
                .or_insert_with(|| (c.clone(), Vec::new()))
                .1
                .push(i);
        }
    }
    let mut order: Vec<(i64, usize)> = pooled.values().map(|(c, _)| (c.seq, size_of(c))).collect();
    order.sort_by_key(|&(seq, _)| std::cmp::Reverse(seq));
    let kept = within(&order, max_ranked_bytes);
    let searches: Arc<Vec<SearchQuery>> =
        Arc::new(parts.iter().map(|p| p.search.clone()).collect());
    let found_by: Arc<HashMap<i64, Vec<usize>>> = Arc::new(
        order[..kept]
            .iter()
            .filter_map(|(seq, _)| pooled.get(seq).map(|(_, jobs)| (*seq, jobs.clone())))
            .collect(),
    );
    let mut scores: Vec<(usize, i64, f64)> = Vec::new();
    let mut at = 0;
    while at < kept {
        let end = page_end(&order[..kept], at);
        let bytes: usize = order[at..end].iter().map(|(_, size)| size).sum();
        let seqs: Vec<i64> = order[at..end].iter().map(|(seq, _)| *seq).collect();
        at = end;
        let reserved = memory.reserve(bytes, WAIT).await?;
        let (searches, found_by) = (searches.clone(), found_by.clone());
        let page = store
            .read(move |mut conn| {
                let mut page = Vec::new();
                search::documents(&mut conn, &seqs, |seq, doc| {
                    for &job in found_by.get(&seq).map_or(&[][..], Vec::as_slice) {
                        let search = &searches[job];
                        // The index and the matcher agree; the matcher is the reference.
                        if search.matches(doc) {
                            page.push((job, seq, search.score(doc)));
                        }
                    }
                })?;
                Ok(page)
            })
            .await?;
        drop(reserved);
        scores.extend(page);
    }
    // Each filter's best `limit`, then every event once at its best rank.
    let mut per_job: Vec<Vec<Scored>> = parts.iter().map(|_| Vec::new()).collect();
    for (job, seq, score) in scores {
        if let Some((c, _)) = pooled.get(&seq) {
            per_job[job].push(scored(c, score));
        }
    }
    let mut best: HashMap<i64, Scored> = HashMap::new();
    for (mut list, part) in per_job.into_iter().zip(&parts) {
        sort(&mut list);
        list.truncate(part.limit);
        for s in list {
            match best.get(&s.key.seq) {
                Some(kept) if kept.score >= s.score => {}
                _ => {
                    best.insert(s.key.seq, s);
                }
            }
        }
    }
    let mut all: Vec<Scored> = best.into_values().collect();
    sort(&mut all);
    Ok(all.into_iter().map(|s| s.key).collect())
}

fn size_of(c: &Candidate) -> usize {
    usize::try_from(c.size).unwrap_or(0)
}

fn scored(c: &Candidate, score: f64) -> Scored {
    Scored {
        key: EventKey {
            seq: c.seq,
            created_at: c.created_at,
            size: size_of(c),
        },
        id: c.id.clone(),
        score,
    }
}

/// How many of `order` (newest first, with sizes) fit in `budget` bytes: at least one.
fn within(order: &[(i64, usize)], budget: usize) -> usize {
    let mut total = 0usize;
    for (i, (_, size)) in order.iter().enumerate() {
        total = total.saturating_add(*size);
        if i > 0 && total > budget {
            return i;
        }
    }
    order.len()
}

/// Where the page starting at `at` ends: [`PAGE_BYTES`] and [`PAGE_ROWS`] at most, one
/// row at least.
fn page_end(order: &[(i64, usize)], at: usize) -> usize {
    let mut end = at;
    let mut bytes = 0usize;
    while end < order.len() && end - at < PAGE_ROWS {
        bytes = bytes.saturating_add(order[end].1);
        if end > at && bytes > PAGE_BYTES {
            break;
        }
        end += 1;
    }
    end
}

/// Rank, then newest, then id.
fn sort(list: &mut [Scored]) {
    list.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| b.key.created_at.cmp(&a.key.created_at))
            .then_with(|| a.id.cmp(&b.id))
    });
}

#[cfg(test)]
mod tests {
    use super::{page_end, within, PAGE_BYTES};

    #[test]
    fn budgets_keep_the_newest_and_at_least_one() {
        let order = [(9, 400), (8, 400), (7, 10)];
        assert_eq!(within(&order, 1_000), 3);
        assert_eq!(within(&order, 800), 2);
        assert_eq!(within(&order, 100), 1);
        let big = [(3, PAGE_BYTES * 2), (2, 10), (1, PAGE_BYTES)];
        assert_eq!(page_end(&big, 0), 1);
        assert_eq!(page_end(&big, 1), 2);
    }
}
