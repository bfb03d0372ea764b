//! NIP-50 search strings: the grammar this relay answers, and what a parsed query means
//! on each backend and for a live event.
//!
//! - words, all of which must be present: `deploy friday`;
//! - `"quoted phrases"`: the words in that order, adjacent;
//! - a prefix: `deplo*` (at least [`MIN_PREFIX_CHARS`] characters; after a phrase, its
//!   last word: `"release cand"*`);
//! - `key:value` tokens are NIP-50 extensions (`include:spam`, `language:en`, ...):
//!   none is supported, each is ignored as NIP-50 asks;
//! - a word is what [`crate::text::tokens`] makes of it: punctuation separates, so
//!   `foo-bar` is the phrase `"foo bar"`, and a run of ideographs is a phrase of them.
//!
//! Refused with `invalid:` (never passed on to the database): an empty query or one with
//! no words, one over `max_search_bytes`, more than `max_terms` words, an unterminated
//! quote, a word over the indexed length, a too-short prefix. The database only ever
//! sees the expression built here, every word quoted.

use crate::scope::Places;
use crate::text::{tokenize, MAX_TOKEN_BYTES};
use buzz_core::error::Reason;

/// Shortest prefix (characters): shorter ones match most of the vocabulary.
pub(crate) const MIN_PREFIX_CHARS: usize = 2;

/// One condition: a phrase of one or more tokens, the last maybe a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub tokens: Vec<String>,
    pub prefix: bool,
}

impl Term {
    /// The term's tokens as the community-wide walk reads them (more places than a walk
    /// names, or a prefix term): each token's scoped form at any place, the last one's
    /// as a prefix when the term is one. Both backends' expressions start from these.
    fn in_community<'a>(&'a self, places: &'a Places) -> impl Iterator<Item = String> + 'a {
        let last = self.tokens.len().saturating_sub(1);
        self.tokens.iter().enumerate().map(move |(i, tok)| {
            if self.prefix && i == last {
                places.starting(tok)
            } else {
                places.anywhere(tok)
            }
        })
    }
}

/// A parsed search: every term must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Search {
    pub terms: Vec<Term>,
}

/// Bounds on a search string.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub max_bytes: usize,
    pub max_terms: usize,
}

impl Search {
    /// Parse a NIP-50 search string.
    pub fn parse(text: &str, bounds: Bounds) -> Result<Search, Reason> {
        if text.len() > bounds.max_bytes {
            return Err(Reason::invalid(format!(
                "search is {} bytes; at most {} (max_search_bytes)",
                text.len(),
                bounds.max_bytes
            )));
        }
        let mut terms = Vec::new();
        let mut rest = text.trim_start();
        while !rest.is_empty() {
            let (item, after) = next_item(rest)?;
            rest = after.trim_start();
            let Item {
                body,
                quoted,
                prefix,
            } = item;
            if !quoted && is_extension(body) {
                continue;
            }
            let (tokens, dropped) = tokenize(body);
            if dropped > 0 {
                return Err(Reason::invalid(format!(
                    "a search word is longer than {MAX_TOKEN_BYTES} bytes"
                )));
            }
            if tokens.is_empty() {
                continue;
            }
            if prefix {
                let last = tokens.last().map_or(0, |t| t.chars().count());
                if last < MIN_PREFIX_CHARS || !body.ends_with(char::is_alphanumeric) {
                    return Err(Reason::invalid(format!(
                        "a search prefix needs at least {MIN_PREFIX_CHARS} letters before `*`"
                    )));
                }
            }
            terms.push(Term { tokens, prefix });
        }
        let words: usize = terms.iter().map(|t| t.tokens.len()).sum();
        if words == 0 {
            return Err(Reason::invalid("search has no words to look for"));
        }
        if words > bounds.max_terms {
            return Err(Reason::invalid(format!(
                "search has {words} words; at most {} (max_terms)",
                bounds.max_terms
            )));
        }
        Ok(Search { terms })
    }

    /// Does a document with these tokens match? The same meaning as the index's.
    pub fn matches(&self, doc: &[String]) -> bool {
        self.terms.iter().all(|t| t.occurrences(doc) > 0)
    }

    /// Relevance of a matching document from the document alone (no corpus statistics,
    /// so nothing the reader may not read moves a rank): each term's occurrences,
    /// saturating, over the document's length (BM25's shape without its IDF).
    pub fn score(&self, doc: &[String]) -> f64 {
        const K1: f64 = 1.2;
        const B: f64 = 0.75;
        // A typical chat message's length in tokens.
        const AVERAGE: f64 = 24.0;
        let norm = K1 * (1.0 - B + B * doc.len() as f64 / AVERAGE);
        self.terms
            .iter()
            .map(|t| {
                let tf = t.occurrences(doc) as f64;
                tf * (K1 + 1.0) / (tf + norm)
            })
            .sum()
    }

    /// The FTS5 MATCH expression of this search within `places` (`scope.rs`): every
    /// term a quoted string of scoped tokens (tokens never hold `"`), a whole term at
    /// each place read, or one term over the community.
    pub(crate) fn fts5(&self, places: &Places) -> String {
        let parts: Vec<String> = self
            .terms
            .iter()
            .map(|t| match (&places.exact, t.prefix) {
                (Some(list), false) => {
                    let each: Vec<String> = list
                        .iter()
                        .map(|place| {
                            let tokens: Vec<String> =
                                t.tokens.iter().map(|tok| places.at(tok, place)).collect();
                            format!("\"{}\"", tokens.join(" "))
                        })
                        .collect();
                    format!("({})", each.join(" OR "))
                }
                _ => {
                    let tokens: Vec<String> = t
                        .in_community(places)
                        .map(|start| format!("\"{start}\" *"))
                        .collect();
                    format!("({})", tokens.join(" + "))
                }
            })
            .collect();
        parts.join(" AND ")
    }

    /// The PostgreSQL `tsquery` text of this search within `places` (cast with
    /// `::tsquery`, never given to a parser that normalizes): quoted scoped lexemes,
    /// `<->` within a phrase, `|` between places, `&` between terms.
    pub(crate) fn tsquery(&self, places: &Places) -> String {
        let parts: Vec<String> = self
            .terms
            .iter()
            .map(|t| match (&places.exact, t.prefix) {
                (Some(list), false) => {
                    let each: Vec<String> = list
                        .iter()
                        .map(|place| {
                            let lexemes: Vec<String> = t
                                .tokens
                                .iter()
                                .map(|tok| quote_lexeme(&places.at(tok, place)))
                                .collect();
                            format!("({})", lexemes.join(" <-> "))
                        })
                        .collect();
                    format!("({})", each.join(" | "))
                }
                _ => {
                    let lexemes: Vec<String> = t
                        .in_community(places)
                        .map(|start| format!("{}:*", quote_lexeme(&start)))
                        .collect();
                    format!("({})", lexemes.join(" <-> "))
                }
            })
            .collect();
        parts.join(" & ")
    }
}

impl Term {
    /// Times this term occurs in `doc`.
    fn occurrences(&self, doc: &[String]) -> usize {
        let n = self.tokens.len();
        if n == 0 || doc.len() < n {
            return 0;
        }
        (0..=doc.len() - n)
            .filter(|&at| {
                self.tokens.iter().enumerate().all(|(i, want)| {
                    let got = &doc[at + i];
                    if self.prefix && i == n - 1 {
                        got.starts_with(want.as_str())
                    } else {
                        got == want
                    }
                })
            })
            .count()
    }
}

/// A lexeme as a `tsvector` / `tsquery` literal.
pub(crate) fn quote_lexeme(token: &str) -> String {
    let escaped = token.replace('\\', "\\\\").replace('\'', "''");
    format!("'{escaped}'")
}

/// One item of a search string: its text, whether it was quoted, whether a `*` ends it.
struct Item<'a> {
    body: &'a str,
    quoted: bool,
    prefix: bool,
}

/// The next item of a search string and the rest: a quoted phrase (with a `*` right
/// after its closing quote, if any) or a run of non-space characters.
fn next_item(text: &str) -> Result<(Item<'_>, &str), Reason> {
    if let Some(inner) = text.strip_prefix('"') {
        let Some(end) = inner.find('"') else {
            return Err(Reason::invalid("search has an unterminated quote"));
        };
        let body = &inner[..end];
        let after = &inner[end + 1..];
        let (prefix, rest) = match after.strip_prefix('*') {
            Some(rest) => (true, rest),
            None => (false, after),
        };
        return Ok((
            Item {
                body,
                quoted: true,
                prefix,
            },
            rest,
        ));
    }
    // A quote inside a bare word starts nothing: it separates, like punctuation.
    let end = text.find(char::is_whitespace).unwrap_or(text.len());
    let word = &text[..end];
    let (body, prefix) = match word.strip_suffix('*') {
        Some(body) => (body, true),
        None => (word, false),
    };
    Ok((
        Item {
            body,
            quoted: false,
            prefix,
        },
        &text[end..],
    ))
}

/// A NIP-50 extension token: `key:value`, the key a plain name.
fn is_extension(word: &str) -> bool {
    let Some((key, value)) = word.split_once(':') else {
        return false;
    };
    !key.is_empty()
        && !value.is_empty()
        && key.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: Bounds = Bounds {
        max_bytes: 256,
        max_terms: 8,
    };

    fn parse(text: &str) -> Result<Search, String> {
        Search::parse(text, BOUNDS).map_err(|r| r.wire_text())
    }

    fn term(tokens: &[&str], prefix: bool) -> Term {
        Term {
            tokens: tokens.iter().map(|t| t.to_string()).collect(),
            prefix,
        }
    }

    #[test]
    fn grammar() {
        let s = parse(r#"Deploy "release candidate" sta* include:spam foo-bar "two wo"*"#)
            .expect("valid");
        assert_eq!(
            s.terms,
            vec![
                term(&["deploy"], false),
                term(&["release", "candidate"], false),
                term(&["sta"], true),
                term(&["foo", "bar"], false),
                term(&["two", "wo"], true),
            ]
        );
        let one = Places {
            community_id: 3,
            exact: Some(vec![String::new(), "ab12".into()]),
        };
        assert_eq!(
            s.fts5(&one),
            "(\"3¦deploy¦\" OR \"3¦deploy¦ab12\") \
             AND (\"3¦release¦ 3¦candidate¦\" OR \"3¦release¦ab12 3¦candidate¦ab12\") \
             AND (\"3¦sta\" *) AND (\"3¦foo¦ 3¦bar¦\" OR \"3¦foo¦ab12 3¦bar¦ab12\") \
             AND (\"3¦two¦\" * + \"3¦wo\" *)"
        );
        assert_eq!(
            s.tsquery(&one),
            "(('3¦deploy¦') | ('3¦deploy¦ab12')) \
             & (('3¦release¦' <-> '3¦candidate¦') | ('3¦release¦ab12' <-> '3¦candidate¦ab12')) \
             & ('3¦sta':*) & (('3¦foo¦' <-> '3¦bar¦') | ('3¦foo¦ab12' <-> '3¦bar¦ab12')) \
             & ('3¦two¦':* <-> '3¦wo':*)"
        );
        let all = Places {
            community_id: 3,
            exact: None,
        };
        assert_eq!(
            parse("deploy \"foo bar\"").expect("valid").fts5(&all),
            "(\"3¦deploy¦\" *) AND (\"3¦foo¦\" * + \"3¦bar¦\" *)"
        );
    }

    #[test]
    fn refusals() {
        for bad in [
            "",
            "   ",
            "\"open",
            "a*",
            "*",
            "include:spam",
            "\"\"",
            "-- ; ()",
        ] {
            let err = parse(bad).expect_err(bad);
            assert!(err.starts_with("invalid: "), "{bad}: {err}");
        }
        assert!(parse(&"x".repeat(257)).is_err());
        assert!(parse(&"y".repeat(101)).is_err());
        assert!(parse("a b c d e f g h i").is_err());
        // FTS and tsquery syntax is only ever text to tokenize.
        let s = parse(r#"NEAR(a b) OR 'q' & !z | (w) ^c"#).expect("words");
        let all = Places {
            community_id: 1,
            exact: None,
        };
        assert!(s.fts5(&all).chars().filter(|c| *c == '"').count() % 2 == 0);
    }

    #[test]
    fn matching_follows_the_index_meaning() {
        let doc: Vec<String> = crate::text::tokens("The release candidate is staged; release now");
        let yes = |q: &str| parse(q).expect(q).matches(&doc);
        assert!(yes("release"));
        assert!(yes("\"release candidate\""));
        assert!(yes("stag*"));
        assert!(yes("now release"));
        assert!(!yes("\"candidate release\""));
        assert!(!yes("releases"));
        assert!(!yes("release missing"));
        let s = parse("release").expect("q");
        let short: Vec<String> = crate::text::tokens("release");
        assert!(
            s.score(&doc) > 0.0
                && s.score(&short)
                    > s.score(&crate::text::tokens(
                        "release and a lot of other words that make this long and less about it"
                    ))
        );
    }
}
