//! The Nostr event (NIP-01): its shape, its id, its signature and its kind classes.

mod kind;
mod verify;

pub use kind::KindClass;
pub use verify::{verify_signature, EventLimits};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// A signed Nostr event exactly as it travels on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Event {
    pub id: String,
    pub pubkey: String,
    pub created_at: i64,
    pub kind: u32,
    pub tags: Vec<Vec<String>>,
    pub content: String,
    pub sig: String,
}

impl Event {
    /// The NIP-01 id: SHA-256 of `[0, pubkey, created_at, kind, tags, content]`
    /// serialized without whitespace. serde_json escapes exactly what JSON requires
    /// (quote, backslash, control characters) and nothing else, which is the NIP-01
    /// canonical form.
    pub fn compute_id(&self) -> [u8; 32] {
        compute_id(
            &self.pubkey,
            self.created_at,
            self.kind,
            &self.tags,
            &self.content,
        )
    }

    /// The kind's storage class (regular, replaceable, ephemeral, addressable).
    pub fn class(&self) -> KindClass {
        KindClass::of(self.kind)
    }

    /// First value of the first tag named `name`.
    pub fn tag_value(&self, name: &str) -> Option<&str> {
        self.tags
            .iter()
            .find(|t| t.first().map(String::as_str) == Some(name))
            .and_then(|t| t.get(1))
            .map(String::as_str)
    }

    /// All first values of tags named `name`, in tag order.
    pub fn tag_values<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.tags
            .iter()
            .filter(move |t| t.first().map(String::as_str) == Some(name))
            .filter_map(|t| t.get(1))
            .map(String::as_str)
    }

    /// The `d` tag value of an addressable event (empty when absent, per NIP-01).
    pub fn d_tag(&self) -> Option<String> {
        match self.class() {
            KindClass::Addressable => Some(self.tag_value("d").unwrap_or("").to_owned()),
            _ => None,
        }
    }

    /// The key under which only the newest version is kept, for replaceable and
    /// addressable kinds: `kind:pubkey` or `kind:pubkey:d`.
    pub fn replace_key(&self) -> Option<String> {
        match self.class() {
            KindClass::Replaceable => Some(format!("{}:{}", self.kind, self.pubkey)),
            KindClass::Addressable => Some(format!(
                "{}:{}:{}",
                self.kind,
                self.pubkey,
                self.tag_value("d").unwrap_or("")
            )),
            _ => None,
        }
    }

    /// NIP-40: when this event expires (unix seconds), from its first `expiration` tag.
    /// A tag whose value is not a timestamp is refused (`invalid:`), never ignored.
    pub fn expiration(&self) -> Result<Option<i64>, crate::error::Refusal> {
        let Some(tag) = self
            .tags
            .iter()
            .find(|t| t.first().map(String::as_str) == Some("expiration"))
        else {
            return Ok(None);
        };
        tag.get(1)
            .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|v| v.parse::<i64>().ok())
            .map(Some)
            .ok_or_else(|| {
                crate::error::Refusal::invalid(
                    "the expiration tag must hold a unix timestamp in seconds (NIP-40)",
                )
            })
    }

    /// The channel this event is scoped to: the value of its single `h` tag.
    /// `None` when it has no `h` tag; the ingest pipeline rejects more than one.
    pub fn channel_id(&self) -> Option<&str> {
        self.tag_value("h")
    }

    /// Serialize to the wire form.
    pub fn to_json(&self) -> String {
        // Serializing a struct of strings and integers cannot fail.
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// NIP-01 id of the given fields (see [`Event::compute_id`]).
pub fn compute_id(
    pubkey: &str,
    created_at: i64,
    kind: u32,
    tags: &[Vec<String>],
    content: &str,
) -> [u8; 32] {
    let canonical =
        serde_json::to_vec(&(0, pubkey, created_at, kind, tags, content)).unwrap_or_default();
    Sha256::digest(&canonical).into()
}
