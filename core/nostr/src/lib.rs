//! Nostr as the Buzz relay speaks it, with no I/O: the protocol types and the rules that
//! need no storage.
//!
//! - [`event`]: the NIP-01 event, its id, signature and kind classes, NIP-40 expiry;
//! - [`filter`]: NIP-01 filters, their parsing and plain matching;
//! - [`keys`]: secp256k1 key pairs that sign events;
//! - [`kinds`] and [`threads`]: NIP-29-shaped channel kinds and NIP-10 reply rules;
//! - [`channel_tags`]: how channel events spell privacy and roles (ours and the other
//!   spelling clients send);
//! - [`nip42`], [`nip98`], [`url`]: the auth event checks and how their URLs compare;
//! - [`host`]: host names as communities are keyed by them;
//! - [`error`]: [`error::Refusal`], why a request was refused, and its NIP-01 prefix.
//!
//! The relay (`buzz-core`), its plugins and its tools build on this crate; it depends on
//! none of them and on no runtime, database, server or script engine.

pub mod channel_tags;
pub mod error;
pub mod event;
pub mod filter;
pub mod host;
pub mod keys;
pub mod kinds;
pub mod nip42;
pub mod nip98;
pub mod threads;
pub mod url;
