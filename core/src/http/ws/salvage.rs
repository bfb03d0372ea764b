//! Reading the id of an EVENT whose JSON does not parse.
//!
//! A message with, say, a raw control character inside a string is not JSON, so the
//! strict parser learns nothing from it; a client still needs an `OK false` naming its
//! event to match the refusal. This scanner walks the text tolerantly (it only tracks
//! strings, escapes and nesting) and returns the event's top-level `"id"` when that is
//! a well-formed 64-character hex id. It never decides whether the event is accepted.

/// `["EVENT", {"id": "<64 hex>", ...}]` → the id, if it can be read.
pub(crate) fn event_id(text: &str) -> Option<String> {
    let mut tokens = Tokens::new(text);
    // `[` "EVENT" `,` `{`
    if tokens.next()? != Token::Open {
        return None;
    }
    if tokens.next()? != Token::Str("EVENT".into()) {
        return None;
    }
    let mut depth = 1;
    let mut previous: Option<Token> = None;
    while let Some(token) = tokens.next() {
        match &token {
            Token::Open => depth += 1,
            Token::Close => depth -= 1,
            Token::Colon if depth == 2 && previous == Some(Token::Str("id".into())) => {
                return match tokens.next()? {
                    Token::Str(id) if is_hex64(&id) => Some(id),
                    _ => None,
                };
            }
            _ => {}
        }
        if depth == 0 {
            return None;
        }
        previous = Some(token);
    }
    None
}

fn is_hex64(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

#[derive(Debug, PartialEq)]
enum Token {
    Open,
    Close,
    Colon,
    /// A string's raw text (escapes kept as written; ids contain none).
    Str(String),
    /// Anything else: commas, numbers, literals.
    Other,
}

struct Tokens<'a> {
    chars: std::str::Chars<'a>,
}

impl<'a> Tokens<'a> {
    fn new(text: &'a str) -> Self {
        Tokens {
            chars: text.chars(),
        }
    }

    fn next(&mut self) -> Option<Token> {
        loop {
            let c = self.chars.next()?;
            return Some(match c {
                '[' | '{' => Token::Open,
                ']' | '}' => Token::Close,
                ':' => Token::Colon,
                '"' => Token::Str(self.string()),
                c if c.is_whitespace() => continue,
                _ => Token::Other,
            });
        }
    }

    /// The rest of a string, whatever characters it holds.
    fn string(&mut self) -> String {
        let mut out = String::new();
        while let Some(c) = self.chars.next() {
            match c {
                '"' => break,
                '\\' => {
                    out.push(c);
                    if let Some(escaped) = self.chars.next() {
                        out.push(escaped);
                    }
                }
                c => out.push(c),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::event_id;

    #[test]
    fn reads_the_top_level_id_only() {
        let id = "a".repeat(64);
        let other = "b".repeat(64);
        let raw = format!(
            "[\"EVENT\", {{\"content\": \"x\u{1}\\\"id\\\":\\\"{other}\\\"\", \"tags\": [[\"id\", \"{other}\"]], \"id\": \"{id}\"}}]"
        );
        assert_eq!(event_id(&raw), Some(id));
        assert_eq!(event_id("[\"EVENT\", {\"id\": \"short\"}]"), None);
        assert_eq!(event_id("[\"REQ\", {\"id\": 1}]"), None);
        assert_eq!(event_id("not json"), None);
    }
}
