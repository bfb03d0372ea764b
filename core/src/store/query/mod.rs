//! Reading events by NIP-01 filter, scoped to one community and to the channels the
//! reader may see: the SQL under the query service (`crate::query_service`).
//!
//! `query_keys` answers a REQ as keys (seq, time, size), `query_stamps` the same rows as
//! `(created_at, id)` pairs for set reconciliation (NIP-77). A small channel set is an
//! `IN` list; a large one is one array parameter on PostgreSQL and, on SQLite, the
//! `buzz_readable(channel_id)` function of `readable_fn.rs`, which looks each examined row
//! up in the very set the access service decided: never a variable per channel, never a
//! per-query copy of the set. On PostgreSQL a community-wide filter over a large set first
//! reads a short prefix of its matches without the channel condition and keeps the
//! readable rows in Rust (`probe_wide`: exact because the order is total), binding the set
//! only when that prefix holds too few readable rows (`core/tests/many_channels.rs`,
//! `core/tests/wide_probe_fallback.rs`). `#h` is read through the channel index (an
//! event's channel is its `h` tag) with the tag checked on each row the index yields
//! (`tag_on_row.rs`), never as a list of every message of the channel.
//!
//! One file per job: `scope.rs` is the reader's scope model (what a reader may see),
//! `filter_sql.rs` writes a filter and a scope as SQL conditions, `tag_walk.rs` reads a
//! tag filter down the tag index newest first, `matching.rs` reads the
//! matches (keys, stamps, counts), `appended.rs` the stamps appended since a kept read, `by_seq.rs` loads the events those keys name, and
//! `rows.rs` holds the stored row types and their conversion to events and wire JSON.

mod appended;
mod by_seq;
mod filter_sql;
mod matching;
mod rows;
mod scope;
mod tag_walk;

pub use appended::appended_stamps;
pub use by_seq::{load_events, load_wire_events};
pub use matching::{count_matching, query_events, query_keys, query_stamps, Count, EventKey};
pub use rows::{row_to_event, EventRow, WireEvent};
pub use scope::{ChannelScope, ChannelSet, Scope};
