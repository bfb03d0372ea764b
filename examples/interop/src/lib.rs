//! Interoperability checks against an independent Nostr implementation (the `nostr`
//! crate from crates.io). Everything lives in `tests/`: events built and signed by
//! `nostr` travel through a real Buzz relay and back, and ids/signatures made by either
//! side verify on the other. `tests/nostr_sdk.rs` drives the relay with rust-nostr's
//! `nostr-sdk` client as an application would, and `tests/node_clients.rs` runs the NDK
//! and nostr-tools suites of `examples/node-clients` against a relay it starts.
