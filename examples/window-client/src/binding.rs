//! The thread-window request binding, recomputed from the spec text (NIP-CW "Thread
//! Bounds"): `tw:1:` + SHA-256 of the compact JSON
//! `["tw",1,"older",host,reader,channel,root,limit,depth,kinds,cursor,include_aux]`.

use crate::checks::Cursor;
use sha2::{Digest, Sha256};

/// One request, as the client sent it.
#[derive(Debug, Clone)]
pub struct ThreadRequest<'a> {
    /// The relay's normalized authority (`host[:port]`), as the relay resolves it.
    pub host: &'a str,
    /// The authenticated reader.
    pub reader: &'a str,
    pub channel: &'a str,
    pub root: &'a str,
    pub limit: u64,
    pub depth_limit: u64,
    /// Sorted and distinct, as the relay normalizes them.
    pub kinds: &'a [u32],
    pub cursor: Option<&'a Cursor>,
    pub include_aux: bool,
}

/// A JSON string literal (quotes and escapes as JSON requires).
fn string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

impl ThreadRequest<'_> {
    /// The expected `39007` `d` tag.
    pub fn binding_d(&self) -> String {
        let kinds: Vec<String> = self.kinds.iter().map(u32::to_string).collect();
        let cursor = self.cursor.map_or_else(
            || "null".to_owned(),
            |c| format!("[{},{}]", c.created_at, string(&c.id)),
        );
        let text = format!(
            "[\"tw\",1,\"older\",{},{},{},{},{},{},[{}],{},{}]",
            string(self.host),
            string(&self.reader.to_ascii_lowercase()),
            string(self.channel),
            string(&self.root.to_ascii_lowercase()),
            self.limit,
            self.depth_limit,
            kinds.join(","),
            cursor,
            self.include_aux
        );
        format!("tw:1:{}", hex::encode(Sha256::digest(text.as_bytes())))
    }
}
