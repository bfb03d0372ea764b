//! Authentication on the relay: NIP-98 requests checked once (replay guard). The event
//! checks themselves, NIP-42's and NIP-98's, are protocol rules in `buzz_nostr`.

pub mod nip98;
