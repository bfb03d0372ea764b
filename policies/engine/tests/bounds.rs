//! Issue 9: every policy call and every script load ends within a wall-clock bound (also
//! inside pattern matching and `__close` handlers), fails closed when over it, leaves a
//! healthy state for the next call, and `req` and the libraries are really read-only.
//! One test per defect of the issue, with the scripts.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use buzz_policy::{
    script_entry_points, ActorFacts, DenyKind, MemoryRateLimiter, PolicyError, PolicyLimits,
    Verdict, WriteRequest,
};
use common::{
    engine_with_access, is_stopped, message_request, Scripts, ALLOW_ALL_ACCESS,
    ALLOW_ALL_MODERATION,
};

/// The bounds are 50 ms per call and 1 s per load; this leaves room for an unoptimized build
/// on a busy two-core machine without letting a hang (minutes) pass.
const CALL_BOUND: Duration = Duration::from_secs(2);
const LOAD_BOUND: Duration = Duration::from_secs(5);

fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let started = Instant::now();
    let value = f();
    (value, started.elapsed())
}

/// Runs `body` as `can_write`; the run must be stopped within the bound, and a normal request
/// right after must get its answer.
fn assert_bounded_body(name: &str, body: &str) {
    let access = format!(
        "function can_write(req)\n\
           if req.event.content ~= 'attack' then return buzz.deny('invalid', 'normal answer') end\n\
           {body}\n\
           return buzz.allow()\n\
         end\n"
    );
    let (_scripts, engine) = engine_with_access(&access);
    let mut attack = message_request();
    attack.event.content = "attack".into();
    for round in 0..2 {
        let (result, took) = timed(|| engine.check_write(&attack));
        assert!(is_stopped(&result), "{name} #{round}: {result:?}");
        assert!(took < CALL_BOUND, "{name} #{round}: took {took:?}");
        let verdict = engine.check_write(&message_request());
        assert_eq!(
            verdict.map(|v| v.to_string()).ok().as_deref(),
            Some("invalid: normal answer"),
            "{name} #{round}: no healthy state afterwards"
        );
    }
}

/// An anonymous write whose content is `content`.
fn anonymous_post(content: String) -> WriteRequest {
    let mut request = message_request();
    request.actor = ActorFacts::default();
    request.event.pubkey = "anon".into();
    request.event.content = content;
    request
}

const EXE_RULE: &str = "function moderate(req)\n\
       if req.event.content:find(\"https?://[^%s]-%.exe\") then\n\
         return buzz.deny('blocked', 'no executables')\n\
       end\n\
       return buzz.allow()\n\
     end\n";

/// 259 KB without spaces, full of URL starts and no `.exe`: Lua's matcher backtracks over
/// the rest of the content from every `http://` (minutes per event).
fn exe_attack() -> String {
    "http://".repeat(259 * 1024 / 7)
}

#[test]
fn defect_1_url_rule_on_259_kb_anonymous_events_is_bounded() {
    let scripts = Scripts::new(ALLOW_ALL_ACCESS, EXE_RULE);
    let engine = scripts.load().expect("load");
    for event in 0..2 {
        let (result, took) = timed(|| engine.check_write(&anonymous_post(exe_attack())));
        assert!(is_stopped(&result), "event {event}: {result:?}");
        assert!(took < CALL_BOUND, "event {event}: took {took:?}");
    }
    // The rule still works and the engine answers at once.
    let verdict = engine.check_write(&anonymous_post("get http://x.example/setup.exe now".into()));
    assert_eq!(
        verdict.ok(),
        Some(Verdict::deny(DenyKind::Blocked, "no executables"))
    );
    assert_eq!(
        engine.check_write(&anonymous_post("hello".into())).ok(),
        Some(Verdict::Allow)
    );
}

#[test]
fn defect_1_exponential_pattern_is_bounded() {
    assert_bounded_body(
        "lazy quantifiers",
        "local r = (\"a\"):rep(200):find(\".-.-.-.-.-b\")",
    );
}

#[test]
fn defect_1_many_scans_of_1_mib_are_bounded() {
    assert_bounded_body(
        "1000 scans",
        "local s = (\"x\"):rep(1 << 20) for i = 1, 1000 do s:find(\"%d\") end",
    );
}

/// With an instruction budget too large to matter, the wall-clock limit alone stops pattern
/// matching, also when the script catches the error.
#[test]
fn defect_1_the_time_limit_alone_stops_pattern_matching() {
    let access = "function can_write(req)\n\
                    while true do pcall(string.find, (\"a\"):rep(200), \".-.-.-.-.-b\") end\n\
                  end\n";
    let limits = PolicyLimits {
        instruction_budget: u64::MAX / 2,
        call_timeout: Duration::from_millis(50),
        ..PolicyLimits::default()
    };
    let (_scripts, engine) = common::engine_with_access_limits(access, limits);
    let (result, took) = timed(|| engine.check_write(&message_request()));
    assert!(
        matches!(result, Err(PolicyError::TimeLimitExceeded { .. })),
        "{result:?}"
    );
    assert!(took < CALL_BOUND, "took {took:?}");
}

/// Single instructions that work on megabytes (no pattern involved) are bounded by the clock.
#[test]
fn expensive_single_instructions_are_bounded() {
    let limits = PolicyLimits {
        instruction_budget: u64::MAX / 2,
        ..PolicyLimits::default()
    };
    for (name, body) in [
        (
            "comparing long strings",
            "local a, b = ('x'):rep(2e6), ('x'):rep(2e6) while true do local _ = (a == b) end",
        ),
        (
            "utf8.len of a long string",
            "local s = ('x'):rep(3e6) while true do utf8.len(s) end",
        ),
        (
            "table.sort of a large table",
            "local t = { ('x'):rep(200000):byte(1, -1) } while true do table.sort(t) end",
        ),
    ] {
        let access = format!("function can_write(req)\n{body}\nend\n");
        let (_scripts, engine) = common::engine_with_access_limits(&access, limits);
        let (result, took) = timed(|| engine.check_write(&message_request()));
        assert!(is_stopped(&result), "{name}: {result:?}");
        assert!(took < CALL_BOUND, "{name}: took {took:?}");
    }
}

const CLOSE_TRAP: &str = "local x <close> = setmetatable({}, {__close=function() while true do end end}) while true do end";

#[test]
fn defect_2_looping_close_handler_during_the_deadline_unwind_is_bounded() {
    assert_bounded_body("issue script", CLOSE_TRAP);
    // The same trap through a generic `for`'s closing value, a `__close` added to the
    // metatable afterwards, and errors or pcall loops inside `__close`.
    assert_bounded_body(
        "for loop closing value",
        "for _ in next, {}, nil, setmetatable({}, {__close=function() while true do end end}) do end\n\
         for _ in function() return 1 end, nil, nil, setmetatable({}, {__close=function() while true do end end}) do end",
    );
    assert_bounded_body(
        "__close added later",
        "local mt = {__close = function() end} local t = setmetatable({}, mt)\n\
         mt.__close = function() while true do end end\n\
         local x <close> = t while true do end",
    );
    assert_bounded_body(
        "error inside __close",
        "pcall(function() local x <close> = setmetatable({}, {__close=function() error('boom') end}) while true do end end) while true do end",
    );
    assert_bounded_body(
        "pcall loop inside __close",
        "local x <close> = setmetatable({}, {__close=function() while true do pcall(error, 'again') end end}) while true do end",
    );
    assert_bounded_body(
        "nested close variables",
        "local a <close> = setmetatable({}, {__close=function() local b <close> = setmetatable({}, {__close=function() while true do end end}) while true do end end}) while true do end",
    );
}

#[test]
fn close_handlers_still_work_normally() {
    let access = "function can_write(req)\n\
                    local log = {}\n\
                    do local x <close> = setmetatable({}, {__close = function(_, e) log[#log + 1] = e == nil end}) end\n\
                    local ok = pcall(function() local y <close> = setmetatable({}, {__close = function(_, e) log[#log + 1] = e ~= nil end}) error('x') end)\n\
                    local mt = {} local t = setmetatable({}, mt)\n\
                    if #log == 2 and log[1] and log[2] and not ok and getmetatable(t) == mt then return buzz.allow() end\n\
                    return buzz.deny('invalid', 'close handlers misbehave')\n\
                  end\n";
    let (_scripts, engine) = engine_with_access(access);
    assert_eq!(
        engine.check_write(&message_request()).ok(),
        Some(Verdict::Allow)
    );
}

#[test]
fn defect_2_policy_test_with_the_close_trap_ends() {
    let scripts = Scripts::new(
        &format!("function can_write(req)\n{CLOSE_TRAP}\nend\n"),
        ALLOW_ALL_MODERATION,
    );
    // The default fixture file's defaults, one case, our scripts.
    let defaults =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/default.json");
    let text = std::fs::read_to_string(defaults).expect("read default.json");
    let mut file: serde_json::Value = serde_json::from_str(&text).expect("parse default.json");
    file["scripts"] = serde_json::json!({
        "default": { "access": "access.lua", "moderation": "moderation.lua" }
    });
    file["cases"] = serde_json::json!([{ "name": "close trap", "expect": "allow" }]);
    let fixture = scripts.dir.path().join("fixture.json");
    std::fs::write(&fixture, file.to_string()).expect("write fixture");
    let options = buzz_policy::FixtureOptions {
        access: None,
        moderation: None,
        limits: PolicyLimits::default(),
    };
    let (result, took) = timed(|| buzz_policy::run_fixtures(&fixture, &options));
    assert!(took < CALL_BOUND, "took {took:?}");
    let report = result.expect("fixture run");
    assert_eq!(report.cases.len(), 1);
    assert!(!report.cases[0].passed, "{report:?}");
}

/// The script as a main chunk.
const ENDLESS_MAIN: &str = CLOSE_TRAP;

#[test]
fn defect_3_endless_main_chunk_fails_load_check_and_reload_promptly() {
    let scripts = Scripts::new(ENDLESS_MAIN, ALLOW_ALL_MODERATION);
    let (result, took) = timed(|| scripts.load());
    assert!(is_stopped(&result), "load: {result:?}");
    assert!(took < LOAD_BOUND, "load took {took:?}");

    let (result, took) = timed(|| script_entry_points(&scripts.access));
    assert!(is_stopped(&result), "policy check: {result:?}");
    assert!(took < LOAD_BOUND, "policy check took {took:?}");

    let good = Scripts::new(ALLOW_ALL_ACCESS, ALLOW_ALL_MODERATION);
    let engine = good.load().expect("load");
    good.write_access(ENDLESS_MAIN);
    let (result, took) = timed(|| engine.reload());
    assert!(is_stopped(&result), "reload: {result:?}");
    assert!(took < LOAD_BOUND, "reload took {took:?}");
    assert_eq!(engine.generation(), 1);
    assert_eq!(
        engine.check_write(&message_request()).ok(),
        Some(Verdict::Allow)
    );
}

/// The time limit alone (budget out of the way) stops a load.
#[test]
fn defect_3_load_time_limit() {
    let scripts = Scripts::new(ENDLESS_MAIN, ALLOW_ALL_MODERATION);
    let limits = PolicyLimits {
        instruction_budget: u64::MAX / 2,
        load_timeout: Duration::from_millis(200),
        ..PolicyLimits::default()
    };
    let (result, took) = timed(|| scripts.load_with(limits, Arc::new(MemoryRateLimiter::new())));
    assert!(
        matches!(result, Err(PolicyError::TimeLimitExceeded { .. })),
        "{result:?}"
    );
    assert!(took < LOAD_BOUND, "took {took:?}");
}

#[test]
fn defect_3_watcher_skips_an_endless_edit_and_loads_the_next_good_one() {
    let scripts = Scripts::new(ALLOW_ALL_ACCESS, ALLOW_ALL_MODERATION);
    let engine = Arc::new(scripts.load().expect("load"));
    let _watcher = engine.watch(Duration::from_millis(20));
    scripts.write_access(ENDLESS_MAIN);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(engine.generation(), 1);
    // A manual reload is not blocked by the watcher.
    let (_, took) = timed(|| engine.reload());
    assert!(took < LOAD_BOUND, "reload took {took:?}");
    scripts.write_access("function can_write(req) return buzz.deny('restricted', 'new rules') end");
    let started = Instant::now();
    while engine.generation() == 1 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the good edit was never loaded"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        engine.check_write(&message_request()).ok(),
        Some(Verdict::deny(DenyKind::Restricted, "new rules"))
    );
}

#[test]
fn defect_4_pairs_over_req_does_not_hand_out_writable_tables() {
    let access = "function can_write(req)\n\
                    if req.actor.channel_role == 'guest' then return buzz.deny('restricted', 'moderate changed req') end\n\
                    if req.event.tags[1][1] ~= 'h' then return buzz.deny('restricted', 'tags changed') end\n\
                    return buzz.allow()\n\
                  end\n";
    // The script: the write must not succeed, and must not change what can_write sees.
    let scripts = Scripts::new(
        access,
        "function moderate(req) local _,b = pairs(req.actor); b.channel_role = \"guest\" return buzz.allow() end",
    );
    let engine = scripts.load().expect("load");
    let result = engine.check_write(&message_request());
    assert!(
        matches!(&result, Err(PolicyError::Runtime { source, .. }) if source.to_string().contains("read-only")),
        "{result:?}"
    );

    // Caught, and through every table reachable by pairs: can_write sees the facts.
    let scripts = Scripts::new(
        access,
        "local function scribble(t, depth)\n\
           if depth > 4 then return end\n\
           local f, state = pairs(t)\n\
           for _, target in ipairs({ t, state }) do\n\
             if type(target) == 'table' then\n\
               pcall(function() target.channel_role = 'guest' end)\n\
               pcall(function() target[1] = 'x' end)\n\
             end\n\
           end\n\
           for _, v in pairs(t) do if type(v) == 'table' then scribble(v, depth + 1) end end\n\
         end\n\
         function moderate(req) scribble(req, 0) return buzz.allow() end",
    );
    let engine = scripts.load().expect("load");
    for _ in 0..2 {
        assert_eq!(
            engine.check_write(&message_request()).ok(),
            Some(Verdict::Allow)
        );
    }
}

#[test]
fn defect_4_libraries_cannot_be_patched() {
    // One call tries every way in; the next call (and can_write) must see intact libraries.
    let moderation = "function moderate(req)\n\
        for _, lib in ipairs({ string, table, math, utf8, buzz }) do\n\
          local _, state = pairs(lib)\n\
          for _, target in ipairs({ lib, state }) do\n\
            pcall(function() target.rep = function() return 'patched' end end)\n\
            pcall(function() target.insert = function() return 'patched' end end)\n\
            pcall(function() target.floor = function() return 'patched' end end)\n\
            pcall(function() target.allow = function() return 'patched' end end)\n\
          end\n\
          for k, v in pairs(lib) do\n\
            if type(v) == 'table' then pcall(function() v.x = 1 end) end\n\
          end\n\
        end\n\
        pcall(function() getmetatable('').__index.rep = function() return 'patched' end end)\n\
        pcall(function() setmetatable(string, {}) end)\n\
        return buzz.allow()\n\
      end\n";
    let access = "function can_write(req)\n\
        local n = 0 for _ in pairs(string) do n = n + 1 end\n\
        local ok = ('ab'):rep(2) == 'abab' and string.rep('a', 2) == 'aa'\n\
          and math.floor(1.5) == 1 and getmetatable('') == false and n > 10\n\
          and buzz.allow().allow == true\n\
        local t = {} table.insert(t, 1) ok = ok and t[1] == 1\n\
        return ok and buzz.allow() or buzz.deny('invalid', 'a library was patched')\n\
      end\n";
    let scripts = Scripts::new(access, moderation);
    let engine = scripts.load().expect("load");
    for _ in 0..3 {
        assert_eq!(
            engine.check_write(&message_request()).ok(),
            Some(Verdict::Allow)
        );
    }
}

/// Per-thread states: while one thread feeds attack events to the engine, other threads keep
/// getting their answers promptly.
#[test]
fn other_threads_answer_promptly_while_an_attack_runs() {
    let scripts = Scripts::new(ALLOW_ALL_ACCESS, EXE_RULE);
    let engine = Arc::new(scripts.load().expect("load"));
    let attacker = {
        let engine = Arc::clone(&engine);
        std::thread::spawn(move || {
            let attack = anonymous_post(exe_attack());
            for i in 0..10 {
                let (result, took) = timed(|| engine.check_write(&attack));
                assert!(is_stopped(&result), "attack {i}: {result:?}");
                assert!(took < CALL_BOUND, "attack {i} took {took:?}");
            }
        })
    };
    let workers: Vec<_> = (0..3)
        .map(|t| {
            let engine = Arc::clone(&engine);
            std::thread::spawn(move || {
                let mut slowest = Duration::ZERO;
                for i in 0..300 {
                    let (verdict, took) = timed(|| engine.check_write(&message_request()));
                    assert!(
                        matches!(verdict, Ok(Verdict::Allow)),
                        "thread {t}, check {i}: {verdict:?}"
                    );
                    slowest = slowest.max(took);
                }
                slowest
            })
        })
        .collect();
    attacker.join().expect("attacker");
    for worker in workers {
        let slowest = worker.join().expect("worker");
        assert!(slowest < CALL_BOUND, "a normal check took {slowest:?}");
    }
}
