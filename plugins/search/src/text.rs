//! The one tokenizer: what a word is, for indexing (both backends) and for matching live
//! events in process, so the three always agree.
//!
//! A token is a run of letters, digits and combining marks, NFKC-normalized and lower
//! cased (Unicode rules: `Straße` → `straße`, `ＡＢＣ` → `abc`). Ideographic and kana
//! characters, which are written without spaces, are one token each, so a word of them
//! is found as a phrase of its characters. Tokens longer than [`MAX_TOKEN_BYTES`] are
//! not indexed (hashes, pasted blobs); a document keeps its first [`MAX_DOC_TOKENS`]
//! tokens (PostgreSQL's last tsvector position).

use buzz_nostr::event::Event;
use unicode_normalization::char::is_combining_mark;
use unicode_normalization::UnicodeNormalization;

/// Longest token indexed or searched for (UTF-8 bytes).
pub const MAX_TOKEN_BYTES: usize = 100;
/// Most tokens one document indexes.
pub const MAX_DOC_TOKENS: usize = 16_383;
/// An artifact revision: its title tag and content are indexed.
pub(crate) const ARTIFACT_KIND: u32 = 45_010;

/// The tokens of `text`, in order.
pub fn tokens(text: &str) -> Vec<String> {
    tokenize(text).0
}

/// The tokens of `text` and how many were left out for their length.
pub(crate) fn tokenize(text: &str) -> (Vec<String>, usize) {
    let mut out = Vec::new();
    let mut dropped = 0;
    let mut word = String::new();
    let mut flush = |word: &mut String, out: &mut Vec<String>| {
        if !word.is_empty() {
            dropped += push_normalized(word, out);
            word.clear();
        }
    };
    for c in text.chars() {
        if out.len() >= MAX_DOC_TOKENS {
            break;
        }
        if is_ideographic(c) {
            flush(&mut word, &mut out);
            word.push(c);
            flush(&mut word, &mut out);
        } else if c.is_alphanumeric() || (is_combining_mark(c) && !word.is_empty()) {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
        }
    }
    flush(&mut word, &mut out);
    out.truncate(MAX_DOC_TOKENS);
    (out, dropped)
}

/// Normalize one raw word; NFKC may split it (a ligature of punctuation, say), so the
/// result is tokenized again by the same character rules. Returns how many tokens were
/// too long to keep.
fn push_normalized(word: &str, out: &mut Vec<String>) -> usize {
    // A word of ASCII letters and digits is its own NFKC form: only its case changes.
    // Most words are, and this runs on the storage writer for every indexed message.
    if word.is_ascii() {
        return keep(word.to_ascii_lowercase(), out);
    }
    let mut dropped = 0;
    let normal: String = word.nfkc().collect::<String>().to_lowercase();
    let mut part = String::new();
    for c in normal.chars() {
        if c.is_alphanumeric() || is_combining_mark(c) {
            part.push(c);
        } else if !part.is_empty() {
            dropped += keep(std::mem::take(&mut part), out);
        }
    }
    if !part.is_empty() {
        dropped += keep(part, out);
    }
    dropped
}

fn keep(token: String, out: &mut Vec<String>) -> usize {
    if token.len() <= MAX_TOKEN_BYTES {
        out.push(token);
        0
    } else {
        1
    }
}

/// Han, kana and other scripts written without spaces between words.
fn is_ideographic(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF       // hiragana, katakana
        | 0x3400..=0x4DBF     // CJK extension A
        | 0x4E00..=0x9FFF     // CJK unified ideographs
        | 0xF900..=0xFAFF     // CJK compatibility ideographs
        | 0x20000..=0x3FFFF) // CJK extensions B and later
}

/// The text of `event` that search finds: an artifact revision's title and content,
/// any other kind's content.
pub fn document(event: &Event) -> Vec<String> {
    if event.kind == ARTIFACT_KIND {
        let title = event.tag_values("title").next().unwrap_or("");
        let mut all = tokens(title);
        all.extend(tokens(&event.content));
        all.truncate(MAX_DOC_TOKENS);
        return all;
    }
    tokens(&event.content)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_case_and_scripts() {
        assert_eq!(
            tokens("Hello, WORLD! it's 2026"),
            ["hello", "world", "it", "s", "2026"]
        );
        assert_eq!(tokens("Straße ÜBER Ｆｕｌｌ"), ["straße", "über", "full"]);
        assert_eq!(tokens("Привет мир"), ["привет", "мир"]);
        assert_eq!(tokens("東京タワー"), ["東", "京", "タ", "ワ", "ー"]);
        assert_eq!(tokens("हिन्दी भाषा"), ["हिन्दी", "भाषा"]);
        assert_eq!(tokens("\"*:()^-+"), Vec::<String>::new());
        assert!(tokens(&"a".repeat(MAX_TOKEN_BYTES + 1)).is_empty());
        assert_eq!(
            tokens(&"x ".repeat(MAX_DOC_TOKENS + 10)).len(),
            MAX_DOC_TOKENS
        );
    }
}
