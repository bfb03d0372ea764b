//! `channel_windows`: NIP-CW channel and thread windows.
//!
//! The plugin claims four kinds of extended NIP-01 filter and answers them with ordinary
//! signed events, on `POST /query` and WebSocket `REQ` alike (both reach
//! [`buzz_core::query_service::QueryService`], which hands claimed filters to
//! [`ChannelWindows`]'s `answer`):
//!
//! | filter | mode | answer |
//! |---|---|---|
//! | `top_level: true` | channel window | top-level rows newest first, aux closure, `39005` summaries, one `39006` bounds |
//! | `thread_window: true` | thread window | replies newest first, aux closure, one request-bound `39007` bounds |
//! | one `#e` + `depth_limit` (no `thread_window`) | legacy thread | replies oldest first, aux closure, no bounds |
//! | `resolve_thread_roots: true` | recovery | one `39005` per distinct owning root of the target replies |
//!
//! Layout, one concern per file:
//!
//! - [`plugin`](crate::ChannelWindows) — the [`Plugin`] impl: claims, dispatch, NIP-11.
//! - `request/` — the request grammar of each mode (`channel.rs`, `thread.rs`,
//!   `legacy.rs`, `resolve.rs`), shared field parsing (`fields.rs`) and the claim rule
//!   (`mod.rs`). Everything a client can get wrong is rejected there, before any read.
//! - `rows.rs` — the SQL that selects rows (channel, thread, legacy) with every predicate
//!   applied in the database, so the `limit + 1` probe is exact.
//! - `page.rs` — the probe: `has_more`, the scan-position cursor, reconstruction.
//! - `aux.rs` — the two-hop aux closure (reactions, deletions, edits by exact `e` tag).
//! - `channel_mode.rs`, `thread_mode.rs`, `legacy.rs`, `recovery.rs` — one mode each.
//! - `overlays.rs` — the relay-signed `39005` / `39006` / `39007` events.
//! - `binding.rs` — the thread-window request binding (`tw:1:<sha256>`).
//! - `budget.rs` — the shared per-query budgets of thread windows.
//! - `readers.rs` — what the reader may read, as the access service decided it.
//! - `cursor.rs` — the composite `(created_at, id)` cursor.
//!
//! Configuration: `[plugins.channel_windows]` — `enabled` (default true) and the
//! per-query thread-window budgets ([`Config`]; defaults in `config.example.toml`). A
//! disabled plugin claims nothing, so core serves these filters as plain NIP-01 filters,
//! and NIP-11 has no `channel_windows` field. Its overlay kinds (39005–39007) are
//! reserved: clients may never publish them.

mod aux;
pub mod binding;
mod budget;
mod channel_mode;
mod config;
mod cursor;
mod legacy;
mod overlays;
mod page;
mod plugin;
mod readers;
mod recovery;
mod request;
mod rows;
mod summary;
mod thread_mode;

pub use budget::ThreadBudgets;
pub use config::{ChannelWindowsPlugin, Config};
pub use cursor::Cursor;
pub use plugin::{AccessRefreshHook, ChannelWindows};

/// The config name: `[plugins.channel_windows]`.
pub const NAME: &str = "channel_windows";

/// Overlay kinds (relay-signed, synthesized per query, never stored).
pub const SUMMARY_KIND: u32 = 39_005;
pub const CHANNEL_BOUNDS_KIND: u32 = 39_006;
pub const THREAD_BOUNDS_KIND: u32 = 39_007;
