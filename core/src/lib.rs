//! Buzz relay core.
//!
//! The core owns the wire (NIP-01 over WebSocket, NIP-11, NIP-42, NIP-98, the HTTP bridge),
//! storage, communities and live fan-out, and offers hook points to plugins
//! ([`plugin::Plugin`]). It knows no plugin by name. The protocol types and rules it
//! builds on (events, filters, keys, kinds, NIP-10/NIP-42/NIP-98 checks, [`Reason`](crate::error::Reason)) are
//! the `buzz_nostr` crate's. See `ARCHITECTURE.md` for the map.

pub mod access;
pub mod auth;
pub mod channels;
pub mod clock;
pub mod community;
pub mod config;
pub mod ctx;
pub mod error;
pub(crate) mod expiry;
pub mod http;
pub mod import;
pub mod ingest;
pub mod live;
pub mod metrics;
pub mod nip86;
pub mod nips;
pub mod plugin;
pub mod query_service;
pub(crate) mod queue;
pub mod redis_link;
pub mod relay;
pub mod relay_key;
pub mod replay;
pub mod store;
pub mod stored;
#[cfg(feature = "testkit")]
pub mod testkit;
