//! Tokens and cursors: opaque, unforgeable names of a capture and of a page in it.
//!
//! A token is the capture's id (its generation: every capture gets a fresh one) with a
//! MAC over that id, the reader and the community; the capture's stored header binds
//! the query. So a token grants nothing by itself, and presented by another reader or
//! in another community it fails exactly as a made-up one does: nothing is disclosed,
//! not even that the capture exists. A cursor is a page number with a MAC over it and
//! the capture id. The MAC key is derived from the relay key, so every relay process
//! of one relay issues and accepts the same tokens (no session affinity).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use sha2::Sha256;
use uuid::Uuid;

type HmacSha256 = Hmac<Sha256>;

/// Bytes of MAC kept in a token or cursor.
const MAC_BYTES: usize = 16;

#[derive(Clone)]
pub(crate) struct Tokens {
    key: [u8; 32],
}

impl Tokens {
    pub(crate) fn new(key: [u8; 32]) -> Tokens {
        Tokens { key }
    }

    fn mac(&self, parts: &[&[u8]]) -> HmacSha256 {
        // A 32-byte key is always a valid HMAC key.
        let mut mac = <HmacSha256 as Mac>::new_from_slice(&self.key)
            .unwrap_or_else(|_| unreachable!("HMAC takes keys of any length"));
        for part in parts {
            mac.update(&(part.len() as u64).to_be_bytes());
            mac.update(part);
        }
        mac
    }

    fn token_mac(&self, capture: &Uuid, reader: &str, community: i64) -> HmacSha256 {
        self.mac(&[
            b"snapshot token v1",
            capture.as_bytes(),
            reader.as_bytes(),
            &community.to_be_bytes(),
        ])
    }

    fn cursor_mac(&self, capture: &Uuid, page: u32) -> HmacSha256 {
        self.mac(&[
            b"snapshot cursor v1",
            capture.as_bytes(),
            &page.to_be_bytes(),
        ])
    }

    /// The token of `capture`, for `reader` in `community`.
    pub(crate) fn token(&self, capture: &Uuid, reader: &str, community: i64) -> String {
        let tag = self
            .token_mac(capture, reader, community)
            .finalize()
            .into_bytes();
        let mut bytes = capture.as_bytes().to_vec();
        bytes.extend_from_slice(&tag[..MAC_BYTES]);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The capture `token` names, if it was issued to `reader` in `community`.
    pub(crate) fn open_token(&self, token: &str, reader: &str, community: i64) -> Option<Uuid> {
        let bytes = URL_SAFE_NO_PAD.decode(token).ok()?;
        if bytes.len() != 16 + MAC_BYTES {
            return None;
        }
        let capture = Uuid::from_slice(&bytes[..16]).ok()?;
        self.token_mac(&capture, reader, community)
            .verify_truncated_left(&bytes[16..])
            .ok()?;
        Some(capture)
    }

    /// The cursor of page `page` of `capture`.
    pub(crate) fn cursor(&self, capture: &Uuid, page: u32) -> String {
        let tag = self.cursor_mac(capture, page).finalize().into_bytes();
        let mut bytes = page.to_be_bytes().to_vec();
        bytes.extend_from_slice(&tag[..MAC_BYTES]);
        URL_SAFE_NO_PAD.encode(bytes)
    }

    /// The page `cursor` names in `capture`, if it was issued for it.
    pub(crate) fn open_cursor(&self, capture: &Uuid, cursor: &str) -> Option<u32> {
        let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
        if bytes.len() != 4 + MAC_BYTES {
            return None;
        }
        let page = u32::from_be_bytes(bytes[..4].try_into().ok()?);
        self.cursor_mac(capture, page)
            .verify_truncated_left(&bytes[4..])
            .ok()?;
        Some(page)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_open_only_for_their_reader_and_community() {
        let tokens = Tokens::new([7; 32]);
        let capture = Uuid::new_v4();
        let token = tokens.token(&capture, "alice", 1);
        assert_eq!(tokens.open_token(&token, "alice", 1), Some(capture));
        assert_eq!(tokens.open_token(&token, "bob", 1), None);
        assert_eq!(tokens.open_token(&token, "alice", 2), None);
        assert_eq!(Tokens::new([8; 32]).open_token(&token, "alice", 1), None);
        let mut forged = token.into_bytes();
        forged[3] ^= 1;
        let forged = String::from_utf8(forged).unwrap_or_default();
        assert_eq!(tokens.open_token(&forged, "alice", 1), None);
        assert_eq!(tokens.open_token("not a token", "alice", 1), None);
    }

    #[test]
    fn cursors_open_only_in_their_capture() {
        let tokens = Tokens::new([7; 32]);
        let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
        let cursor = tokens.cursor(&a, 3);
        assert_eq!(tokens.open_cursor(&a, &cursor), Some(3));
        assert_eq!(tokens.open_cursor(&b, &cursor), None);
        assert_eq!(tokens.open_cursor(&a, "AAAA"), None);
    }
}
