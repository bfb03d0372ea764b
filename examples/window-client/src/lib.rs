//! `buzz-window-client`: an example NIP-CW client that pages a whole channel and a whole
//! thread using nothing but the wire protocol — NIP-98 `POST /query` or NIP-42
//! WebSocket `REQ` — and applies every client check of NIP-CW to every page:
//!
//! - exactly one bounds event (`39006` channel, `39007` thread), bound to the request
//!   (`d` = `<channel>:head` / `<channel>:<created_at>:<id>`, or the recomputed
//!   `tw:1:<sha256>` thread binding);
//! - exact tag cardinality, JSON content with the right field types, `has_more ⇔
//!   next_cursor`;
//! - identity-verified overlays: id, Schnorr signature and signer = NIP-11 `self`;
//! - rows in keyset order, after the request cursor, at most `limit`; every event's id
//!   and signature verified;
//! - paging stops only on `has_more: false`, and every cursor must advance.
//!
//! Layout: `transport.rs` (the two surfaces), `checks.rs` (the checks, pure),
//! `binding.rs` (thread binding), `pager.rs` (the paging loops). `main.rs` is the CLI.

mod binding;
pub mod checks;
mod pager;
mod transport;

pub use binding::ThreadRequest;
pub use checks::{Bounds, Cursor};
pub use pager::{ChannelPage, ThreadPage, WindowClient, CHANNEL_KINDS, THREAD_DEPTH, THREAD_KINDS};
pub use transport::Transport;
