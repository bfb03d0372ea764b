//! `req.event.tags` is built the first time a script reads it, from the request being
//! checked: a script that never reads tags pays nothing for them (an event may carry
//! 2,000), one that does sees exactly its own event's, and a `req` kept from an earlier
//! call can never show another event's tags.

mod common;

use buzz_policy::{DenyKind, Verdict};
use common::{budget_limits, engine_with_access_limits, message_request};

/// Answers with what it read of the tags: their count, the first one, and a `p` count.
const READS_TAGS: &str = r#"
function can_write(req)
  local tags = req.event.tags
  local p = 0
  for _, tag in ipairs(tags) do
    if tag[1] == "p" then p = p + 1 end
  end
  local again = req.event.tags
  return buzz.deny("invalid", #tags .. " tags, first " .. tags[1][1] .. "=" .. tags[1][2]
    .. ", " .. p .. " p, same table: " .. tostring(again == tags)
    .. ", has h: " .. tostring(buzz.has_tag(req.event, "h", "c1")))
end
"#;

/// Keeps each `req` and, on the next call, tries to read the kept one's tags.
const KEEPS_REQ: &str = r#"
local kept = {}
function can_write(req)
  local previous = kept[1]
  kept[1] = req
  if previous == nil then
    return buzz.allow()
  end
  local ok, err = pcall(function() return #previous.event.tags end)
  if ok then
    return buzz.deny("invalid", "read a kept request's tags")
  end
  return buzz.deny("restricted", "own: " .. req.event.tags[1][2])
end
"#;

fn denied(verdict: Verdict) -> (DenyKind, String) {
    match verdict {
        Verdict::Deny { kind, message } => (kind, message),
        other => panic!("expected a deny, got {other:?}"),
    }
}

#[test]
fn a_script_that_reads_tags_sees_its_own_event_s() {
    let (_scripts, engine) = engine_with_access_limits(READS_TAGS, budget_limits());
    let mut request = message_request();
    for i in 0..2_000 {
        request
            .event
            .tags
            .push(vec!["p".into(), format!("{i:064x}"), "wss://r".into()]);
    }
    for _ in 0..3 {
        let (kind, message) = denied(engine.check_write(&request).expect("check runs"));
        assert_eq!(kind, DenyKind::Invalid);
        assert_eq!(
            message,
            "2001 tags, first h=c1, 2000 p, same table: true, has h: true"
        );
    }
    // Another event in the same state: its own tags, not the first one's.
    let (_, message) = denied(engine.check_write(&message_request()).expect("check runs"));
    assert_eq!(
        message,
        "1 tags, first h=c1, 0 p, same table: true, has h: true"
    );
}

#[test]
fn a_kept_request_cannot_read_tags_after_its_call() {
    let (_scripts, engine) = engine_with_access_limits(KEEPS_REQ, budget_limits());
    let first = message_request();
    assert_eq!(
        engine.check_write(&first).expect("check runs"),
        Verdict::Allow
    );
    let mut second = message_request();
    second.event.tags = vec![vec!["h".into(), "second".into()]];
    let (kind, message) = denied(engine.check_write(&second).expect("check runs"));
    assert_eq!(
        (kind, message.as_str()),
        (DenyKind::Restricted, "own: second"),
        "the kept request's tags are unreadable, the current one's are its own"
    );
}
