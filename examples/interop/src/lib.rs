//! Interoperability checks against an independent Nostr implementation (the `nostr`
//! crate from crates.io). Everything lives in `tests/`: events built and signed by
//! `nostr` travel through a real Buzz relay and back, and ids/signatures made by either
//! side verify on the other.
