//! Secp256k1 key pairs: the relay's own signing key, and the signing helper that tests,
//! examples and benchmarks use to act as clients. Where the relay keeps its key on disk
//! is the relay's business (`buzz_core::relay_key`).

use crate::event::{compute_id, Event};
use anyhow::Context;
use secp256k1::{Keypair, SecretKey, SECP256K1};

/// A key pair that signs events.
#[derive(Clone)]
pub struct Keys {
    keypair: Keypair,
    pubkey_hex: String,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the secret.
        f.debug_struct("Keys")
            .field("pubkey", &self.pubkey_hex)
            .finish()
    }
}

impl Keys {
    /// A fresh random key.
    pub fn generate() -> Self {
        Self::from_secret(SecretKey::new(&mut rand::rng()))
    }

    /// Parse a 64-character hex secret key.
    pub fn from_hex(secret: &str) -> anyhow::Result<Self> {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(secret.trim(), &mut bytes)
            .context("relay private key must be 64 hex characters")?;
        let secret = SecretKey::from_byte_array(bytes).context("invalid secp256k1 secret key")?;
        Ok(Self::from_secret(secret))
    }

    fn from_secret(secret: SecretKey) -> Self {
        let keypair = Keypair::from_secret_key(SECP256K1, &secret);
        let (xonly, _) = keypair.x_only_public_key();
        Keys {
            keypair,
            pubkey_hex: hex::encode(xonly.serialize()),
        }
    }

    /// A 32-byte secret for one purpose (`label`), derived from this key: SHA-256 over
    /// the label's length, the label and the secret key. Every relay process holding the
    /// same key derives the same value (tokens one process issues, another verifies),
    /// and no derived value reveals the key or another label's value.
    pub fn derive_secret(&self, label: &str) -> [u8; 32] {
        use sha2::{Digest, Sha256};
        let mut hasher = Sha256::new();
        hasher.update((label.len() as u64).to_be_bytes());
        hasher.update(label.as_bytes());
        hasher.update(self.keypair.secret_bytes());
        hasher.finalize().into()
    }

    /// The x-only public key as 64 lowercase hex characters.
    pub fn pubkey(&self) -> &str {
        &self.pubkey_hex
    }

    /// The secret key as hex (for persisting only).
    pub fn secret_hex(&self) -> String {
        hex::encode(self.keypair.secret_bytes())
    }

    /// Build and sign an event.
    pub fn sign(&self, kind: u32, tags: Vec<Vec<String>>, content: &str, created_at: i64) -> Event {
        let id = compute_id(&self.pubkey_hex, created_at, kind, &tags, content);
        let sig = SECP256K1.sign_schnorr(&id, &self.keypair);
        Event {
            id: hex::encode(id),
            pubkey: self.pubkey_hex.clone(),
            created_at,
            kind,
            tags,
            content: content.to_owned(),
            sig: hex::encode(sig.to_byte_array()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::EventLimits;

    #[test]
    fn signed_events_verify_and_tampering_is_caught() {
        let keys = Keys::generate();
        let now = 1_700_000_000;
        let ev = keys.sign(
            1,
            vec![vec!["t".into(), "x".into()]],
            "hello \"world\"\n",
            now,
        );
        let limits = EventLimits::default();
        assert!(limits.check(&ev, now).is_ok());

        let mut tampered = ev.clone();
        tampered.content.push('!');
        let err = limits
            .check(&tampered, now)
            .expect_err("must be refused")
            .to_string();
        assert!(err.starts_with("invalid: event id"), "{err}");

        let mut bad_sig = ev.clone();
        bad_sig.sig = keys.sign(1, vec![], "other", now).sig;
        let err = limits
            .check(&bad_sig, now)
            .expect_err("must be refused")
            .to_string();
        assert!(err.starts_with("invalid: signature"), "{err}");

        let err = limits
            .check(&ev, now + 16 * 60)
            .expect_err("must be refused")
            .to_string();
        assert!(err.contains("created_at"), "{err}");
    }
}
