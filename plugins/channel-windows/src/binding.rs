//! The thread-window request binding (NIP-CW "Thread Bounds: kind:39007").
//!
//! A `39007` names the exact request it answers: its `d` tag is `tw:1:` plus the
//! SHA-256 of the compact JSON array
//! `["tw",1,"older",host,reader,channel,root,limit,depth,kinds,cursor,include_aux]`.
//! Binding the reader and host means a bounds event can never be replayed as the answer
//! to another reader's, another relay's or another cursor's request.

use crate::cursor::Cursor;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// Everything a thread-window page is bound to.
#[derive(Debug, Clone, Copy)]
pub struct ThreadBinding<'a> {
    /// Server-resolved normalized authority (`host[:port]`).
    pub host: &'a str,
    /// Authenticated reader, lowercase hex.
    pub reader: &'a str,
    pub channel: &'a str,
    /// Lowercase root id.
    pub root: &'a str,
    pub limit: u64,
    pub depth_limit: u64,
    /// Sorted, distinct.
    pub kinds: &'a [u32],
    /// The request cursor; `None` for the head page.
    pub cursor: Option<&'a Cursor>,
    pub include_aux: bool,
}

impl ThreadBinding<'_> {
    /// The array that is hashed, exactly as specified.
    pub fn array(&self) -> Value {
        let cursor = self
            .cursor
            .map_or(Value::Null, |c| json!([c.created_at, c.id]));
        json!([
            "tw",
            1,
            "older",
            self.host,
            self.reader.to_ascii_lowercase(),
            self.channel,
            self.root.to_ascii_lowercase(),
            self.limit,
            self.depth_limit,
            self.kinds,
            cursor,
            self.include_aux
        ])
    }

    /// Lowercase hex SHA-256 of the compact UTF-8 JSON of [`Self::array`].
    pub fn hash(&self) -> String {
        // `Value`'s Display is compact JSON (no whitespace), strings escaped as JSON
        // requires.
        hex::encode(Sha256::digest(self.array().to_string().as_bytes()))
    }

    /// The `39007` `d` tag value: `tw:1:<hash>`.
    pub fn d_tag(&self) -> String {
        format!("tw:1:{}", self.hash())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn array_is_the_specified_compact_json() {
        let cursor = Cursor::new(1_751_500_000, "ab".repeat(32));
        let binding = ThreadBinding {
            host: "relay.example:8443",
            reader: &"CD".repeat(32),
            channel: "c0ffee00-0000-4000-8000-000000000000",
            root: &"ef".repeat(32),
            limit: 50,
            depth_limit: 100,
            kinds: &[9, 40002],
            cursor: Some(&cursor),
            include_aux: true,
        };
        let expected = format!(
            r#"["tw",1,"older","relay.example:8443","{}","c0ffee00-0000-4000-8000-000000000000","{}",50,100,[9,40002],[1751500000,"{}"],true]"#,
            "cd".repeat(32),
            "ef".repeat(32),
            "ab".repeat(32)
        );
        assert_eq!(binding.array().to_string(), expected);
        assert_eq!(
            binding.hash(),
            hex::encode(Sha256::digest(expected.as_bytes()))
        );
        let head = ThreadBinding {
            cursor: None,
            ..binding
        };
        assert!(head.array().to_string().contains(",null,true]"));
        assert!(head.d_tag().starts_with("tw:1:") && head.d_tag().len() == 5 + 64);
    }
}
