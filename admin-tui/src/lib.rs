//! The `buzz-admin` console as a library (the binary is `main.rs`).
//!
//! Layout: `data/` gathers (database, config, each process's metrics, NIP-11, NIP-86
//! calls, policy dry-runs) and knows no UI; `ui/` draws a [`data::Snapshot`], one
//! component per pane; `console.rs` is the terminal loop. Like `src/main.rs`, this is
//! where plugins could be named — and none needs to be: each plugin's pane is drawn
//! from its `AdminPanel`.

pub mod console;
pub mod data;
pub mod ui;
