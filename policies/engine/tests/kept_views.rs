//! Each Lua state keeps the actor, channel and community views it built and hands them to
//! later requests with the same facts. Reuse must never show a request someone else's
//! facts, never let one request change what the next sees, and never cost a script its
//! memory limit.

mod common;

use buzz_policy::{DenyKind, PolicyLimits, Verdict, WriteRequest};
use common::{budget_limits, engine_with_access, engine_with_access_limits, message_request};

/// Tries to write through every view it is handed, then answers from the facts.
const ANSWERS_FROM_FACTS: &str = r#"
function can_write(req)
  pcall(function() req.actor.banned = true end)
  pcall(function() req.community.open = false end)
  pcall(function() req.channel.archived = true end)
  if req.actor.banned then return buzz.deny("blocked", "banned: " .. tostring(req.actor.ban_reason)) end
  if not req.community.open then return buzz.deny("restricted", "closed " .. req.community.host) end
  if req.channel.archived then return buzz.deny("invalid", "archived " .. req.channel.id) end
  return buzz.allow()
end
"#;

fn deny(kind: DenyKind, message: &str) -> Verdict {
    Verdict::Deny {
        kind,
        message: message.to_owned(),
    }
}

fn banned(reason: &str) -> WriteRequest {
    let mut request = message_request();
    request.actor.banned = true;
    request.actor.ban_reason = Some(reason.to_owned());
    request
}

#[test]
fn every_request_sees_its_own_facts() {
    let (_scripts, engine) = engine_with_access(ANSWERS_FROM_FACTS);
    let closed = {
        let mut request = message_request();
        request.community.open = false;
        request
    };
    let archived = {
        let mut request = message_request();
        request.channel.as_mut().expect("a channel").archived = true;
        request
    };
    let sequence = [
        (message_request(), Verdict::Allow),
        (banned("spam"), deny(DenyKind::Blocked, "banned: spam")),
        (message_request(), Verdict::Allow),
        (banned("abuse"), deny(DenyKind::Blocked, "banned: abuse")),
        (closed, deny(DenyKind::Restricted, "closed localhost")),
        (archived, deny(DenyKind::Invalid, "archived c1")),
        (message_request(), Verdict::Allow),
    ];
    // Twice over: the second round meets only views kept from the first.
    for round in 0..2 {
        for (i, (request, want)) in sequence.iter().enumerate() {
            let got = engine.check_write(request).expect("check runs");
            assert_eq!(&got, want, "round {round}, request {i}");
        }
    }
}

#[test]
fn more_actors_than_are_kept_still_get_their_own_views() {
    let (_scripts, engine) = engine_with_access(ANSWERS_FROM_FACTS);
    for round in 0..2 {
        for i in 0..1_000 {
            let mut request = message_request();
            request.actor.pubkey = Some(format!("reader-{i}"));
            let want = if i % 3 == 0 {
                request.actor.banned = true;
                request.actor.ban_reason = Some(format!("reason {i}"));
                deny(DenyKind::Blocked, &format!("banned: reason {i}"))
            } else {
                Verdict::Allow
            };
            let got = engine.check_write(&request).expect("check runs");
            assert_eq!(got, want, "round {round}, actor {i}");
        }
    }
}

#[test]
fn kept_views_give_way_to_the_memory_limit() {
    // Each actor carries a 32 KiB ban reason; a few dozen kept views would fill the 1 MiB
    // state on their own. They are dropped before any request is refused for memory.
    let limits = PolicyLimits {
        memory_bytes: 1024 * 1024,
        ..budget_limits()
    };
    let (_scripts, engine) = engine_with_access_limits(ANSWERS_FROM_FACTS, limits);
    let long_reason = "r".repeat(32 * 1024);
    for i in 0..300 {
        let mut request = banned(&long_reason);
        request.actor.pubkey = Some(format!("reader-{i}"));
        match engine.check_write(&request) {
            Ok(Verdict::Deny { kind, message }) => {
                assert_eq!(kind, DenyKind::Blocked, "actor {i}");
                assert_eq!(message.len(), "banned: ".len() + long_reason.len());
            }
            other => panic!("actor {i}: {other:?}"),
        }
    }
}
