//! The sandbox, the host API and the return-value contract, as tables of
//! (script, expected outcome).

mod common;

use buzz_policy::{
    check_script, script_entry_points, DenyKind, PolicyError, Verdict, ENTRY_POINTS,
};
use common::{engine_with_access, message_request, read_request, Scripts, ALLOW_ALL_MODERATION};

/// What a check is expected to produce.
#[derive(Debug)]
enum Want {
    Allow,
    Deny(DenyKind, &'static str),
    /// An `Err` of this shape whose Display contains the text.
    Err(IsExpected, &'static str),
}

/// Does an error have the expected shape?
type IsExpected = fn(&PolicyError) -> bool;

fn runtime(e: &PolicyError) -> bool {
    matches!(e, PolicyError::Runtime { .. })
}

fn bad_return(e: &PolicyError) -> bool {
    matches!(e, PolicyError::BadReturn { .. })
}

fn check(name: &str, result: Result<Verdict, PolicyError>, want: &Want) {
    match (want, &result) {
        (Want::Allow, Ok(Verdict::Allow)) => {}
        (Want::Deny(kind, text), Ok(Verdict::Deny { kind: k, message })) if k == kind => {
            assert!(
                message.contains(text),
                "{name}: message {message:?} lacks {text:?}"
            );
        }
        (Want::Err(shape, text), Err(err)) if shape(err) => {
            let shown = err.to_string();
            assert!(
                shown.contains(text),
                "{name}: error {shown:?} lacks {text:?}"
            );
        }
        _ => panic!("{name}: expected {want:?}, got {result:?}"),
    }
}

/// Runs `body` as the body of `can_write(req)`.
fn run_body(name: &str, body: &str, want: Want) {
    let access = format!("function can_write(req)\n{body}\nend\n");
    let (_scripts, engine) = engine_with_access(&access);
    check(name, engine.check_write(&message_request()), &want);
}

#[test]
fn dangerous_globals_are_absent() {
    for global in [
        "io",
        "os",
        "require",
        "package",
        "load",
        "loadstring",
        "dofile",
        "loadfile",
        "debug",
        "collectgarbage",
        "print",
        "rawset",
        "coroutine",
        "module",
        "setfenv",
        "getfenv",
        "newproxy",
        "warn",
    ] {
        run_body(
            global,
            &format!("if {global} ~= nil then return buzz.deny('invalid', '{global} is reachable') end return buzz.allow()"),
            Want::Allow,
        );
    }
    // Not through _G or a library either.
    run_body(
        "via _G",
        "if _G.io or _G.os or _G.load or _G.debug or _G.require then return buzz.deny('invalid', 'leak') end return buzz.allow()",
        Want::Allow,
    );
}

#[test]
fn allowed_globals_are_present() {
    for global in [
        "string",
        "table",
        "math",
        "utf8",
        "assert",
        "error",
        "getmetatable",
        "ipairs",
        "next",
        "pairs",
        "pcall",
        "rawequal",
        "rawget",
        "rawlen",
        "select",
        "setmetatable",
        "tonumber",
        "tostring",
        "type",
        "xpcall",
        "_VERSION",
        "_G",
        "buzz",
    ] {
        run_body(
            global,
            &format!("if {global} == nil then return buzz.deny('invalid', '{global} missing') end return buzz.allow()"),
            Want::Allow,
        );
    }
}

#[test]
fn globals_and_shared_tables_are_frozen() {
    let frozen = Want::Err(runtime, "frozen");
    let read_only = Want::Err(runtime, "read-only");
    let cases: Vec<(&str, &str, Want)> = vec![
        ("new global", "x = 1 return buzz.allow()", frozen),
        ("global via _G", "_G.x = 1 return buzz.allow()", Want::Err(runtime, "frozen")),
        ("replace an entry point", "can_write = nil return buzz.allow()", Want::Err(runtime, "frozen")),
        ("replace a library", "string = {} return buzz.allow()", Want::Err(runtime, "frozen")),
        ("library field", "string.rep = nil return buzz.allow()", read_only),
        ("math field", "math.pi = 3 return buzz.allow()", Want::Err(runtime, "read-only")),
        ("table field", "table.insert = print return buzz.allow()", Want::Err(runtime, "read-only")),
        ("buzz field", "buzz.allow = function() end return buzz.allow()", Want::Err(runtime, "read-only")),
        ("unlock _G", "setmetatable(_G, {}) return buzz.allow()", Want::Err(runtime, "protected")),
        ("string metatable", "getmetatable('').__index = {} return buzz.allow()", Want::Err(runtime, "")),
        ("__gc finalizer", "setmetatable({}, { __gc = function() end }) return buzz.allow()", Want::Err(runtime, "__gc")),
        ("_G metatable hidden", "if getmetatable(_G) ~= false then return buzz.deny('invalid', 'exposed') end return buzz.allow()", Want::Allow),
        ("library metatable hidden", "if getmetatable(string) ~= false then return buzz.deny('invalid', 'exposed') end return buzz.allow()", Want::Allow),
        ("pcall sees the error", "local ok = pcall(function() y = 2 end) if ok then return buzz.deny('invalid', 'assigned') end return buzz.allow()", Want::Allow),
        ("own tables are fine", "local t = setmetatable({}, { __index = function() return 1 end }) t.a = 2 return t.b == 1 and buzz.allow() or buzz.deny('invalid', 'x')", Want::Allow),
        ("locals are fine", "local x = 1 x = x + 1 return buzz.allow()", Want::Allow),
    ];
    for (name, body, want) in cases {
        run_body(name, body, want);
    }
}

#[test]
fn the_main_chunk_cannot_keep_a_writable_handle_on_globals() {
    let access = "local ok, meta = pcall(getmetatable, _G)\n\
                  HANDLE = meta\n\
                  function can_write(req)\n\
                    if HANDLE ~= false then return buzz.deny('invalid', 'got a handle') end\n\
                    return buzz.allow()\n\
                  end\n";
    let (_scripts, engine) = engine_with_access(access);
    check(
        "handle",
        engine.check_write(&message_request()),
        &Want::Allow,
    );
    let scripts = Scripts::new("setmetatable(_G, {})", ALLOW_ALL_MODERATION);
    assert!(matches!(scripts.load(), Err(PolicyError::Load { .. })));
}

#[test]
fn globals_defined_at_load_are_frozen_too() {
    let access = "counter = 0\n\
                  function can_write(req) counter = counter + 1 return buzz.allow() end\n";
    let (_scripts, engine) = engine_with_access(access);
    check(
        "existing global",
        engine.check_write(&message_request()),
        &Want::Err(runtime, "frozen"),
    );
    // Reading it is fine.
    let access = "LIMIT = 5\nfunction can_write(req) return LIMIT == 5 and buzz.allow() or buzz.deny('invalid', 'x') end\n";
    let (_scripts, engine) = engine_with_access(access);
    check(
        "read a global",
        engine.check_write(&message_request()),
        &Want::Allow,
    );
}

#[test]
fn req_is_read_only_and_complete() {
    let read_only = || Want::Err(runtime, "read-only");
    let cases: Vec<(&str, &str, Want)> = vec![
        ("req field", "req.action = 'other' return buzz.allow()", read_only()),
        ("actor field", "req.actor.banned = true return buzz.allow()", read_only()),
        ("new actor field", "req.actor.extra = 1 return buzz.allow()", read_only()),
        ("tags", "req.event.tags[1] = nil return buzz.allow()", read_only()),
        ("one tag", "req.event.tags[1][2] = 'other' return buzz.allow()", read_only()),
        ("channel", "req.channel.private = true return buzz.allow()", read_only()),
        ("fields",
         "local a = req.actor local c = req.channel local e = req.event\n\
          local ok = req.action == 'message' and req.now == 1700000000 and a.pubkey == 'alice'\n\
            and a.community_member == true and a.community_owner == false and a.channel_role == 'member'\n\
            and a.channel_joined_at == 1700000000 - 86400 * 30 and a.banned == false and a.ban_reason == nil\n\
            and a.timeout_until == nil and c.id == 'c1' and c.exists and c.name == 'general'\n\
            and c.private == false and c.archived == false and c.channel_type == 'stream' and c.deleted == false\n\
            and req.community.host == 'localhost' and req.community.open == true\n\
            and e.id == 'e1' and e.pubkey == 'alice' and e.kind == 9 and e.created_at == 1700000000\n\
            and e.content == 'hello' and math.type(e.kind) == 'integer'\n\
          return ok and buzz.allow() or buzz.deny('invalid', 'wrong facts')",
         Want::Allow),
        ("length, ipairs, pairs, concat",
         "local n = 0 for _, t in ipairs(req.event.tags) do n = n + #t end\n\
          local keys = 0 for k in pairs(req.actor) do keys = keys + 1 end\n\
          local ok = #req.event.tags == 1 and n == 2 and keys >= 4 and table.concat(req.event.tags[1], '=') == 'h=c1'\n\
          return ok and buzz.allow() or buzz.deny('invalid', 'n=' .. n .. ' keys=' .. keys)",
         Want::Allow),
    ];
    for (name, body, want) in cases {
        run_body(name, body, want);
    }
}

#[test]
fn moderate_cannot_change_what_can_write_sees() {
    let scripts = Scripts::new(
        "function can_write(req) if req.actor.banned then return buzz.deny('blocked', 'changed') end return buzz.allow() end",
        "function moderate(req) pcall(function() req.actor.banned = true end) return buzz.allow() end",
    );
    let engine = scripts.load().expect("load");
    assert_eq!(
        engine.check_write(&message_request()).ok(),
        Some(Verdict::Allow)
    );
}

#[test]
fn return_values() {
    let bad = || Want::Err(bad_return, "expected buzz.allow()");
    let cases: Vec<(&str, &str, Want)> = vec![
        ("buzz.allow()", "return buzz.allow()", Want::Allow),
        (
            "literal allow table",
            "return { allow = true }",
            Want::Allow,
        ),
        (
            "buzz.deny",
            "return buzz.deny('rate-limited', 'slow down')",
            Want::Deny(DenyKind::RateLimited, "slow down"),
        ),
        (
            "literal deny table",
            "return { deny = 'auth-required', message = 'who?' }",
            Want::Deny(DenyKind::AuthRequired, "who?"),
        ),
        (
            "deny without message",
            "return buzz.deny('blocked')",
            Want::Deny(DenyKind::Blocked, "denied by policy"),
        ),
        (
            "every kind: invalid",
            "return buzz.deny('invalid', 'm')",
            Want::Deny(DenyKind::Invalid, "m"),
        ),
        (
            "every kind: restricted",
            "return buzz.deny('restricted', 'm')",
            Want::Deny(DenyKind::Restricted, "m"),
        ),
        ("nothing", "", Want::Err(bad_return, "nil")),
        ("nil", "return nil", bad()),
        ("true", "return true", Want::Err(bad_return, "boolean")),
        (
            "string",
            "return 'allow'",
            Want::Err(bad_return, "\"allow\""),
        ),
        ("number", "return 1", bad()),
        ("function", "return function() end", bad()),
        ("empty table", "return {}", bad()),
        ("allow = false", "return { allow = false }", bad()),
        ("allow = 1", "return { allow = 1 }", bad()),
        (
            "both",
            "return { allow = true, deny = 'restricted' }",
            bad(),
        ),
        (
            "unknown kind in table",
            "return { deny = 'nope', message = 'x' }",
            Want::Err(bad_return, "nope"),
        ),
        (
            "message not a string",
            "return { deny = 'restricted', message = 42 }",
            Want::Err(bad_return, "integer"),
        ),
        (
            "unknown kind via buzz.deny",
            "return buzz.deny('nope', 'x')",
            Want::Err(runtime, "unknown kind"),
        ),
        (
            "bad message via buzz.deny",
            "return buzz.deny('restricted', {})",
            Want::Err(runtime, "message must be a string"),
        ),
    ];
    for (name, body, want) in cases {
        run_body(name, body, want);
    }
}

#[test]
fn script_errors_are_errors() {
    let cases: Vec<(&str, &str, Want)> = vec![
        ("error()", "error('boom')", Want::Err(runtime, "boom")),
        ("error with a table", "error({ code = 1 })", Want::Err(runtime, "")),
        ("index nil", "local x = nil return x.y", Want::Err(runtime, "attempt to index")),
        ("call nil", "undefined_function()", Want::Err(runtime, "attempt to call")),
        ("arithmetic on nil", "return req.actor.timeout_until + 1", Want::Err(runtime, "arithmetic")),
        ("assert", "assert(false, 'assertion text')", Want::Err(runtime, "assertion text")),
        ("error names the script line", "\n\nerror('here')", Want::Err(runtime, "access.lua:4")),
        ("caught errors are fine", "local ok, err = pcall(error, 'x') return buzz.allow()", Want::Allow),
        ("xpcall handler sees the error", "local ok, v = xpcall(function() error('inner', 0) end, function(e) return 'handled ' .. e end) if v == 'handled inner' then return buzz.allow() end return buzz.deny('invalid', tostring(v))", Want::Allow),
        ("xpcall passes results", "local ok, a, b = xpcall(function(x, y) return x + y, 'b' end, print, 1, 2) return (ok and a == 3 and b == 'b') and buzz.allow() or buzz.deny('invalid', 'x')", Want::Allow),
    ];
    for (name, body, want) in cases {
        run_body(name, body, want);
    }
}

#[test]
fn load_errors() {
    let cases: Vec<(&str, &str, IsExpected)> = vec![
        (
            "syntax error",
            "function can_write(req) return buzz.allow( end",
            |e| matches!(e, PolicyError::Load { .. }),
        ),
        ("error in the main chunk", "error('at load')", |e| {
            matches!(e, PolicyError::Load { .. }) && e.to_string().contains("at load")
        }),
        ("entry point is not a function", "can_write = 5", |e| {
            matches!(e, PolicyError::BadEntryPoint { .. })
        }),
        ("binary chunk", "\x1bLua\x54\x00", |e| {
            matches!(e, PolicyError::Load { .. })
        }),
        ("sandbox applies at load", "io.write('x')", |e| {
            matches!(e, PolicyError::Load { .. })
        }),
    ];
    for (name, source, is_expected) in cases {
        let scripts = Scripts::new(source, ALLOW_ALL_MODERATION);
        match scripts.load() {
            Err(err) if is_expected(&err) => {}
            other => panic!("{name}: unexpected {other:?}"),
        }
    }
    let missing = Scripts::new(common::ALLOW_ALL_ACCESS, ALLOW_ALL_MODERATION);
    std::fs::remove_file(&missing.moderation).expect("remove");
    assert!(matches!(missing.load(), Err(PolicyError::Read { .. })));
}

#[test]
fn missing_entry_points_allow() {
    // An access file must define one of its entry points (`tests/examples.rs`); the one
    // it leaves out allows, and so does a moderation file without `moderate`.
    let scripts = Scripts::new(
        "function can_write(req) return buzz.allow() end\n",
        "-- nothing here\n",
    );
    let engine = scripts.load().expect("load");
    assert_eq!(
        engine.check_write(&message_request()).ok(),
        Some(Verdict::Allow)
    );
    assert_eq!(
        engine.check_read(&read_request()).ok(),
        Some(Verdict::Allow)
    );

    // Only moderate: it alone decides writes.
    let scripts = Scripts::new(
        "function can_read(req) return buzz.allow() end\n",
        "function moderate(req) return buzz.deny('blocked', 'nope') end",
    );
    let engine = scripts.load().expect("load");
    assert_eq!(
        engine.check_write(&message_request()).ok(),
        Some(Verdict::deny(DenyKind::Blocked, "nope"))
    );
    assert_eq!(
        engine.check_read(&read_request()).ok(),
        Some(Verdict::Allow)
    );
}

#[test]
fn moderate_runs_first_and_the_first_deny_wins() {
    let scripts = Scripts::new(
        "function can_write(req) return buzz.deny('restricted', 'access said no') end",
        "function moderate(req)\n\
           if req.event.content == 'spam' then return buzz.deny('blocked', 'moderation said no') end\n\
           return buzz.allow()\n\
         end",
    );
    let engine = scripts.load().expect("load");
    let mut spam = message_request();
    spam.event.content = "spam".into();
    assert_eq!(
        engine.check_write(&spam).ok(),
        Some(Verdict::deny(DenyKind::Blocked, "moderation said no"))
    );
    assert_eq!(
        engine.check_write(&message_request()).ok(),
        Some(Verdict::deny(DenyKind::Restricted, "access said no"))
    );
}

#[test]
fn host_helpers() {
    let cases: Vec<(&str, &str, Want)> = vec![
        ("buzz.now is req.now", "return buzz.now() == req.now and buzz.allow() or buzz.deny('invalid', 'clock')", Want::Allow),
        ("has_tag name", "return buzz.has_tag(req.event, 'h') and buzz.allow() or buzz.deny('invalid', 'x')", Want::Allow),
        ("has_tag name and value", "return buzz.has_tag(req.event, 'h', 'c1') and not buzz.has_tag(req.event, 'h', 'c2') and not buzz.has_tag(req.event, 'p') and buzz.allow() or buzz.deny('invalid', 'x')", Want::Allow),
        ("tag value", "return buzz.tag(req.event, 'h') == 'c1' and buzz.tag(req.event, 'p') == nil and buzz.allow() or buzz.deny('invalid', 'x')", Want::Allow),
        ("log levels", "for _, l in ipairs({ 'error', 'warn', 'info', 'debug', 'trace' }) do buzz.log(l, 'hello from a test ' .. l) end return buzz.allow()", Want::Allow),
        ("log a number", "buzz.log('info', 42) return buzz.allow()", Want::Allow),
        ("log unknown level", "buzz.log('loud', 'x') return buzz.allow()", Want::Err(runtime, "unknown level")),
        ("rate_limit window 0", "buzz.rate_limit('k', 1, 0) return buzz.allow()", Want::Err(runtime, "window_secs")),
        ("rate_limit negative limit", "buzz.rate_limit('k', -1, 10) return buzz.allow()", Want::Err(runtime, "")),
    ];
    for (name, body, want) in cases {
        run_body(name, body, want);
    }
}

#[test]
fn check_script_lists_entry_points() {
    let (access, moderation) = common::default_paths();
    check_script(&access).expect("default access.lua");
    check_script(&moderation).expect("default moderation.lua");
    assert_eq!(
        script_entry_points(&access).ok(),
        Some(vec!["can_read", "can_write"])
    );
    assert_eq!(
        script_entry_points(&moderation).ok(),
        Some(vec!["moderate"])
    );
    assert_eq!(ENTRY_POINTS, ["can_read", "can_write", "moderate"]);

    let dir = tempfile::tempdir().expect("temp dir");
    let cases: Vec<(&str, &str, IsExpected)> = vec![
        ("no entry point", "local x = 1", |e| {
            matches!(e, PolicyError::NoEntryPoint { .. })
        }),
        ("misspelt entry point", "function can_wirte(req) end", |e| {
            matches!(e, PolicyError::NoEntryPoint { .. })
        }),
        ("syntax error", "function moderate(", |e| {
            matches!(e, PolicyError::Load { .. })
        }),
        // The instruction budget, or on a very busy machine the load's wall-clock bound.
        ("endless main chunk", "while true do end", |e| {
            matches!(
                e,
                PolicyError::DeadlineExceeded { .. } | PolicyError::TimeLimitExceeded { .. }
            )
        }),
        ("bad entry point", "moderate = 'yes'", |e| {
            matches!(e, PolicyError::BadEntryPoint { .. })
        }),
    ];
    for (name, source, is_expected) in cases {
        let path = dir.path().join("script.lua");
        std::fs::write(&path, source).expect("write");
        match check_script(&path) {
            Err(err) if is_expected(&err) => {}
            other => panic!("{name}: unexpected {other:?}"),
        }
    }
    assert!(matches!(
        check_script(&dir.path().join("missing.lua")),
        Err(PolicyError::Read { .. })
    ));
}

#[test]
fn engine_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync + 'static>() {}
    assert_send_sync::<buzz_policy::PolicyEngine>();
    assert_send_sync::<PolicyError>();
    assert_send_sync::<buzz_policy::RedisRateLimiter>();
    assert_send_sync::<buzz_policy::MemoryRateLimiter>();
}
