//! Structural limits, id and BIP-340 signature checks.

use super::Event;
use crate::error::Refusal;
use secp256k1::{schnorr::Signature, XOnlyPublicKey, SECP256K1};

/// Size and time limits applied to every incoming event; advertised in NIP-11.
#[derive(Debug, Clone, Copy)]
pub struct EventLimits {
    pub max_content_bytes: usize,
    pub max_tags: usize,
    /// Values all tags of the event hold together (names included): what a policy
    /// script's `req.event.tags` and the tag index are built from.
    pub max_tag_values: usize,
    /// Allowed distance of `created_at` from relay time, in seconds, both directions.
    pub max_clock_skew_secs: i64,
}

impl Default for EventLimits {
    fn default() -> Self {
        EventLimits {
            max_content_bytes: 256 * 1024,
            max_tags: 2_000,
            max_tag_values: 10_000,
            max_clock_skew_secs: 15 * 60,
        }
    }
}

impl EventLimits {
    /// Every check an event must pass before anything else looks at it, cheapest first:
    /// shape, size, time, id, then the signature.
    pub fn check(&self, event: &Event, now_secs: i64) -> Result<(), Refusal> {
        self.check_at(event, now_secs, false)
    }

    /// [`EventLimits::check`] for history being imported: an event may be any age (it
    /// was accepted by its relay when it was new); only a future beyond the clock skew
    /// is refused.
    pub fn check_history(&self, event: &Event, now_secs: i64) -> Result<(), Refusal> {
        self.check_at(event, now_secs, true)
    }

    fn check_at(&self, event: &Event, now_secs: i64, any_age: bool) -> Result<(), Refusal> {
        check_hex(&event.id, 64, "id")?;
        check_hex(&event.pubkey, 64, "pubkey")?;
        check_hex(&event.sig, 128, "sig")?;
        if event.content.len() > self.max_content_bytes {
            return Err(Refusal::invalid(format!(
                "content exceeds {} bytes",
                self.max_content_bytes
            )));
        }
        if event.tags.len() > self.max_tags {
            return Err(Refusal::invalid(format!(
                "more than {} tags (max_event_tags)",
                self.max_tags
            )));
        }
        let values: usize = event.tags.iter().map(Vec::len).sum();
        if values > self.max_tag_values {
            return Err(Refusal::invalid(format!(
                "tags hold {values} values; at most {} (max_tag_values)",
                self.max_tag_values
            )));
        }
        // An empty tag `[]` is allowed by NIP-01 (it names nothing and indexes nothing),
        // so it is not refused here.
        if event.kind > 65_535 {
            return Err(Refusal::invalid("kind must be between 0 and 65535"));
        }
        let skew = event.created_at - now_secs;
        if skew > self.max_clock_skew_secs || (!any_age && -skew > self.max_clock_skew_secs) {
            return Err(Refusal::invalid(format!(
                "created_at is more than {} seconds from relay time",
                self.max_clock_skew_secs
            )));
        }
        if hex::encode(event.compute_id()) != event.id {
            return Err(Refusal::invalid("event id does not match its content"));
        }
        verify_signature(event)
    }
}

fn check_hex(value: &str, len: usize, field: &str) -> Result<(), Refusal> {
    let ok = value.len() == len
        && value
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if ok {
        Ok(())
    } else {
        Err(Refusal::invalid(format!(
            "{field} must be {len} lowercase hex characters"
        )))
    }
}

/// BIP-340 Schnorr verification of `sig` over the id bytes with `pubkey`.
/// Assumes `id`, `pubkey` and `sig` are well-formed hex (see [`EventLimits::check`]).
pub fn verify_signature(event: &Event) -> Result<(), Refusal> {
    let bad = || Refusal::invalid("signature verification failed");
    let mut id = [0u8; 32];
    hex::decode_to_slice(&event.id, &mut id).map_err(|_| bad())?;
    let mut pk = [0u8; 32];
    hex::decode_to_slice(&event.pubkey, &mut pk).map_err(|_| bad())?;
    let mut sig = [0u8; 64];
    hex::decode_to_slice(&event.sig, &mut sig).map_err(|_| bad())?;
    let pubkey = XOnlyPublicKey::from_byte_array(pk).map_err(|_| bad())?;
    SECP256K1
        .verify_schnorr(&Signature::from_byte_array(sig), &id, &pubkey)
        .map_err(|_| bad())
}
