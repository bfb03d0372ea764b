//! How channel events spell privacy and roles, read in one place so that the check
//! before storage and the change of the rows never disagree; and how they name what they
//! act on (a channel by lowercase UUID, a target by its last `e`, a member by its first
//! `p`), which the relay's checks, its access rules and plugins read alike.
//!
//! Ours: a 9007/9002 flag tag `["private"]` (a 9002 also `["open"]`) and a 9000
//! `["p", pubkey, role]`. Clients of the design this relay follows also send
//! `["visibility", "private" | "public"]` and `["role", role]` beside a bare
//! `["p", pubkey]`. Both spellings are read; an unknown value or two tags that disagree
//! are refused, since guessing would make a public channel when privacy was asked for,
//! or a plain member when a role was.

use crate::error::Refusal;
use crate::event::Event;
use crate::kinds::ROLES;

/// A lowercase hyphenated UUID (`8-4-4-4-12` hex digits).
pub fn is_lowercase_uuid(v: &str) -> bool {
    let groups: Vec<&str> = v.split('-').collect();
    groups.len() == 5
        && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, n)| {
            g.len() == n
                && g.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        })
}

/// The event a reaction, edit, diff or moderator removal targets: its last `e` tag
/// (NIP-25 convention).
pub fn target_id(event: &Event) -> Option<&str> {
    event.tag_values("e").last()
}

/// The member a membership or moderation event names: its first `p` tag.
pub fn member_of(event: &Event) -> Option<&str> {
    event.tag_value("p")
}

/// What a refused privacy tag is told: the tags this relay reads.
const PRIVACY_SPELLINGS: &str = "privacy is a [\"private\"] or [\"open\"] tag, or \
     [\"visibility\", \"private\" | \"public\"]";

/// What a refused role is told.
const ROLE_SPELLINGS: &str = "role must be owner, admin, member or guest, given as \
     [\"p\", pubkey, role] or [\"role\", role]";

fn named<'a>(event: &'a Event, name: &'a str) -> impl Iterator<Item = &'a Vec<String>> + 'a {
    event
        .tags
        .iter()
        .filter(move |t| t.first().map(String::as_str) == Some(name))
}

/// The privacy a 9007 or 9002 asks for: `Some(true)` private, `Some(false)` open,
/// `None` when it says nothing.
pub fn requested_privacy(event: &Event) -> Result<Option<bool>, Refusal> {
    let mut asked = None;
    for tag in &event.tags {
        let private = match tag.first().map(String::as_str) {
            Some("private") => true,
            Some("open") => false,
            Some("visibility") => match tag.get(1).map(String::as_str) {
                Some("private") => true,
                Some("public" | "open") => false,
                _ => return Err(Refusal::invalid(PRIVACY_SPELLINGS)),
            },
            _ => continue,
        };
        if asked.is_some_and(|a| a != private) {
            return Err(Refusal::invalid(format!(
                "the event asks for a private and an open channel at once; {PRIVACY_SPELLINGS}"
            )));
        }
        asked = Some(private);
    }
    Ok(asked)
}

/// The role a 9000 gives the member its first `p` tag names, `None` when it names none
/// (the member keeps their role, or becomes a member).
pub fn requested_role(event: &Event) -> Result<Option<&str>, Refusal> {
    let in_p = named(event, "p")
        .next()
        .and_then(|t| t.get(2))
        .map(String::as_str)
        .filter(|r| !r.is_empty());
    let mut asked = in_p;
    for tag in named(event, "role") {
        let role = tag.get(1).map(String::as_str).unwrap_or_default();
        if asked.is_some_and(|a| a != role) {
            return Err(Refusal::invalid(format!(
                "the event names two roles; {ROLE_SPELLINGS}"
            )));
        }
        asked = Some(role);
    }
    match asked {
        Some(role) if !ROLES.contains(&role) => Err(Refusal::invalid(ROLE_SPELLINGS)),
        asked => Ok(asked),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::Keys;

    fn ev(tags: &[&[&str]]) -> Event {
        let tags = tags
            .iter()
            .map(|t| t.iter().map(|s| s.to_string()).collect())
            .collect();
        Keys::generate().sign(9007, tags, "", 1)
    }

    #[test]
    fn privacy_in_either_spelling() {
        assert_eq!(requested_privacy(&ev(&[&["h", "x"]])), Ok(None));
        assert_eq!(requested_privacy(&ev(&[&["private"]])), Ok(Some(true)));
        assert_eq!(
            requested_privacy(&ev(&[&["visibility", "private"]])),
            Ok(Some(true))
        );
        assert_eq!(
            requested_privacy(&ev(&[&["visibility", "public"]])),
            Ok(Some(false))
        );
        assert_eq!(requested_privacy(&ev(&[&["open"]])), Ok(Some(false)));
        for bad in [
            ev(&[&["visibility", "secret"]]),
            ev(&[&["visibility"]]),
            ev(&[&["private"], &["visibility", "public"]]),
            ev(&[&["private"], &["open"]]),
        ] {
            assert!(requested_privacy(&bad).is_err(), "{:?}", bad.tags);
        }
    }

    #[test]
    fn roles_in_either_spelling() {
        let pk = "a".repeat(64);
        assert_eq!(requested_role(&ev(&[&["p", &pk]])), Ok(None));
        assert_eq!(requested_role(&ev(&[&["p", &pk, ""]])), Ok(None));
        assert_eq!(
            requested_role(&ev(&[&["p", &pk, "admin"]])),
            Ok(Some("admin"))
        );
        assert_eq!(
            requested_role(&ev(&[&["p", &pk], &["role", "guest"]])),
            Ok(Some("guest"))
        );
        assert_eq!(
            requested_role(&ev(&[&["p", &pk, "owner"], &["role", "owner"]])),
            Ok(Some("owner"))
        );
        for bad in [
            ev(&[&["p", &pk, "king"]]),
            ev(&[&["p", &pk], &["role", "king"]]),
            ev(&[&["p", &pk], &["role"]]),
            ev(&[&["p", &pk, "member"], &["role", "admin"]]),
        ] {
            assert!(requested_role(&bad).is_err(), "{:?}", bad.tags);
        }
    }
}
