//! The relay's record of an accepted event: the NIP-01 event plus where and when it
//! arrived. Every stored, queried and fanned-out event travels as one.

use buzz_nostr::event::Event;

/// An event the relay has accepted, with what the relay knows about its arrival.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    pub event: Event,
    /// Community (host) the event belongs to.
    pub community_id: i64,
    /// The channel the event is scoped to: its `h` tag, or for relay-signed group state
    /// (39000–39002) its `d` tag. Readers of that channel only.
    pub channel: Option<String>,
    /// Relay arrival time in microseconds since the epoch.
    pub received_at: i64,
}
