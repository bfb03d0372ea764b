//! What an artifact answer will hold, known before any body is read: each revision's id
//! and stored sizes (the database reports them without reading the bodies), so an answer
//! over `max_answer_bytes` is refused — naming how many revisions fit — and one that fits
//! reserves its memory (`memory.rs`) before it is loaded.

use crate::query::CurrentEntry;
use buzz_core::error::Reason;
use buzz_core::store::schema::events;
use buzz_core::store::Conn;
use buzz_core::with_conn;
use diesel::dsl::sql;
use diesel::prelude::*;
use diesel::sql_types::BigInt;
use std::collections::HashMap;

/// The fewest bytes an event's JSON takes besides its content and tags:
/// `{"id":"…","pubkey":"…","created_at":N,"kind":N,"tags":…,"content":"…","sig":"…"}`
/// with 64-, 64- and 128-character hex and one-digit numbers.
const FIXED_WIRE: usize = 331;
/// What a loaded event holds besides its content and tags: its id, pubkey and sig
/// strings and the struct and allocation overhead around them.
const LOADED_FIXED: usize = 512;

/// One revision an answer will hold, before its body is read.
#[derive(Debug, Clone)]
pub(crate) struct Stored {
    pub(crate) id: String,
    /// What continues a listing right after it: its `d` (current), its id (history).
    pub(crate) cursor: String,
    pub(crate) content_bytes: usize,
    /// Its tags as stored: their JSON, exactly what the wire carries.
    pub(crate) tags_bytes: usize,
}

impl Stored {
    /// The fewest bytes its JSON takes (escaping the content only adds).
    pub(crate) fn wire_at_least(&self) -> usize {
        self.content_bytes + self.tags_bytes + FIXED_WIRE
    }

    /// What it holds in memory while loaded: the content, the tags as text and parsed,
    /// the fixed fields.
    pub(crate) fn charge(&self) -> usize {
        self.content_bytes + 2 * self.tags_bytes + LOADED_FIXED
    }
}

/// Which query a plan answers (for the refusal's advice).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    Current,
    /// With the page size asked for, if any.
    History {
        limit: Option<usize>,
    },
}

/// The revisions one filter's answer will hold, in wire order.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) shape: Shape,
    pub(crate) rows: Vec<Stored>,
}

/// The stored sizes of the current revisions of `entries`, in their order (an event
/// removed since is left out: it is withheld from every surface).
pub(crate) fn current_sizes(
    conn: &mut Conn<'_>,
    community_id: i64,
    entries: Vec<CurrentEntry>,
) -> Result<Vec<Stored>, Reason> {
    let ids: Vec<String> = entries.iter().map(|e| e.revision_id.clone()).collect();
    let mut sizes: HashMap<String, (i64, i64)> = HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(500) {
        let rows: Vec<(String, i64, i64)> = with_conn!(conn, |c| events::table
            .filter(events::community_id.eq(community_id))
            .filter(events::id.eq_any(chunk))
            .filter(events::deleted_at.is_null())
            .select((
                events::id,
                sql::<BigInt>("CAST(octet_length(events.content) AS BIGINT)"),
                sql::<BigInt>("CAST(octet_length(events.tags) AS BIGINT)"),
            ))
            .load(c))?;
        sizes.extend(rows.into_iter().map(|(id, c, t)| (id, (c, t))));
    }
    Ok(entries
        .into_iter()
        .filter_map(|e| {
            let (content, tags) = sizes.get(&e.revision_id).copied()?;
            Some(Stored {
                id: e.revision_id,
                cursor: e.d,
                content_bytes: usize::try_from(content).unwrap_or(0),
                tags_bytes: usize::try_from(tags).unwrap_or(0),
            })
        })
        .collect())
}

/// The bytes of a JSON array being filled, against the cap.
pub(crate) struct ArrayBytes {
    total: usize,
    items: usize,
    cap: usize,
}

impl ArrayBytes {
    pub(crate) fn new(cap: usize) -> ArrayBytes {
        ArrayBytes {
            total: 2, // `[` and `]`
            items: 0,
            cap,
        }
    }

    /// Add an element of `bytes`; false (and nothing added) when the array would then
    /// be over the cap.
    pub(crate) fn add(&mut self, bytes: usize) -> bool {
        let next = self.total + bytes + usize::from(self.items > 0);
        if next > self.cap {
            return false;
        }
        self.total = next;
        self.items += 1;
        true
    }
}

/// Check `plans` against the cap with the sizes `size` gives (lower bounds before
/// loading, exact after); the refusal names how many revisions fit.
pub(crate) fn check_fits(
    plans: &[Plan],
    cap: usize,
    size: impl Fn(&Stored) -> usize,
    exact: bool,
) -> Result<(), Reason> {
    let mut array = ArrayBytes::new(cap);
    for (i, plan) in plans.iter().enumerate() {
        for (j, row) in plan.rows.iter().enumerate() {
            if !array.add(size(row)) {
                return Err(too_large(plans, i, j, size(row), cap, exact));
            }
        }
    }
    Ok(())
}

/// The refusal of an answer that first goes over `cap` at row `j` of plan `i`.
pub(crate) fn too_large(
    plans: &[Plan],
    i: usize,
    j: usize,
    bytes: usize,
    cap: usize,
    exact: bool,
) -> Reason {
    let plan = &plans[i];
    let row = &plan.rows[j];
    let (takes, fit) = if exact {
        ("takes", "the first")
    } else {
        ("takes at least", "at most the first")
    };
    if j == 0 && ArrayBytes::new(cap).total + bytes > cap {
        let what = match plan.shape {
            Shape::Current => format!("the current revision of artifact {}", row.cursor),
            Shape::History { .. } => format!("revision {}", row.id),
        };
        return Reason::TooLarge(format!(
            "{what} {takes} {bytes} bytes, more than an answer holds ({cap}, maxAnswerBytes): \
             it cannot be answered; continue after it with \"after\": \"{}\"",
            row.cursor
        ));
    }
    if plans.len() > 1 {
        return Reason::TooLarge(format!(
            "the answers of these {} artifact filters take more than {cap} bytes together \
             (maxAnswerBytes); ask for them in separate queries or with smaller limits",
            plans.len()
        ));
    }
    let n = plan.rows.len();
    Reason::TooLarge(match plan.shape {
        Shape::Current => format!(
            "the {n} artifacts of this page take more than {cap} bytes (maxAnswerBytes); \
             {fit} {j} fit: ask with \"limit\": {j} and continue with \"after\""
        ),
        Shape::History { limit: Some(_) } => format!(
            "the {n} revisions of this page take more than {cap} bytes (maxAnswerBytes); \
             {fit} {j} fit: ask with \"limit\": {j} and continue with \"after\""
        ),
        Shape::History { limit: None } => format!(
            "the history of these artifacts takes more than {cap} bytes (maxAnswerBytes); \
             {fit} {j} revisions fit: page it with \"limit\": {j} and \"after\": <the last \
             revision id of the previous page>"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::ArrayBytes;

    #[test]
    fn array_bytes_count_brackets_and_commas() {
        // `[` a `,` b `]`: 2 + 3 + 1 + 4 = 10.
        let mut array = ArrayBytes::new(10);
        assert!(array.add(3));
        assert!(!array.add(5));
        assert!(array.add(4));
        assert!(!array.add(0));
        assert!(ArrayBytes::new(2).add(0));
        assert!(!ArrayBytes::new(2).add(1));
    }
}
