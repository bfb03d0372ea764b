//! The instruction deadline and the memory limit: every runaway script becomes an `Err`
//! quickly, `pcall` cannot swallow the deadline, and the engine keeps answering afterwards.

mod common;

use std::time::{Duration, Instant};

use buzz_policy::{PolicyError, PolicyLimits, Verdict};
use common::{engine_with_access, message_request, read_request, Scripts, ALLOW_ALL_MODERATION};

/// Well under a second even for an unoptimized build; the default budget takes milliseconds.
const FAST: Duration = Duration::from_millis(900);

/// Scripts that never finish on their own, each written a different way.
const RUNAWAYS: &[(&str, &str)] = &[
    ("empty loop", "while true do end"),
    ("numeric for", "for i = 1, math.huge do end"),
    ("recursion in a loop", "local function f(n) return n + 1 end while true do f(1) end"),
    (
        "pcall around the loop",
        "while true do pcall(function() while true do end end) end",
    ),
    (
        "pcall around pcall",
        "while true do pcall(pcall, function() while true do end end) end",
    ),
    (
        "xpcall whose handler loops",
        "while true do xpcall(function() while true do end end, function() while true do end end) end",
    ),
    (
        "pcall of error in a loop",
        "while true do pcall(error, 'again') end",
    ),
    (
        "catch and retry, returning allow once caught",
        "for i = 1, 1000 do local ok = pcall(function() while true do end end) if not ok then return buzz.allow() end end",
    ),
    (
        "looping __close handler",
        "while true do local x <close> = setmetatable({}, { __close = function() while true do end end }) end",
    ),
    (
        "error object whose __tostring loops",
        "error(setmetatable({}, { __tostring = function() while true do end end }))",
    ),
    (
        "looping __index metamethod",
        "return setmetatable({}, { __index = function() while true do end end }).x",
    ),
    (
        "looping table.sort comparator",
        "table.sort({ 3, 2, 1 }, function(a, b) while true do end end)",
    ),
    (
        "looping string.gsub callback",
        "string.gsub('abc', '%w', function(c) while true do end end)",
    ),
    (
        "tail call of pcall after the budget is spent",
        "return pcall(function() while true do end end)",
    ),
    (
        "string work in a loop",
        "local s = '' while true do s = string.sub(s .. 'x', -10) end",
    ),
];

#[test]
fn runaway_scripts_hit_the_deadline_quickly() {
    for (name, body) in RUNAWAYS {
        let access = format!("function can_write(req)\n{body}\nend\n");
        let (_scripts, engine) = engine_with_access(&access);
        let started = Instant::now();
        let result = engine.check_write(&message_request());
        let elapsed = started.elapsed();
        // Whichever limit comes first: in an unoptimized build the 50 ms time limit may.
        assert!(
            common::is_stopped(&result),
            "{name}: expected a stopped run, got {result:?}"
        );
        assert!(elapsed < FAST, "{name}: took {elapsed:?}");
    }
}

#[test]
fn deadline_error_names_script_entry_and_budget() {
    let (_scripts, engine) = common::engine_with_access_limits(
        "function can_read(req) while true do end end",
        common::budget_limits(),
    );
    let err = engine.check_read(&read_request()).expect_err("deadline");
    let text = err.to_string();
    assert!(text.contains("access.lua"), "{text}");
    assert!(text.contains("can_read"), "{text}");
    assert!(text.contains("1000000"), "{text}");
}

#[test]
fn deadline_in_moderate_stops_the_check() {
    let scripts = Scripts::new(
        common::ALLOW_ALL_ACCESS,
        "function moderate(req) while true do end end",
    );
    let engine = scripts
        .load_with(
            common::budget_limits(),
            std::sync::Arc::new(buzz_policy::MemoryRateLimiter::new()),
        )
        .expect("load");
    let result = engine.check_write(&message_request());
    assert!(
        matches!(
            result,
            Err(PolicyError::DeadlineExceeded {
                entry: "moderate",
                ..
            })
        ),
        "{result:?}"
    );
}

#[test]
fn endless_main_chunk_fails_to_load() {
    let scripts = Scripts::new("while true do end", ALLOW_ALL_MODERATION);
    let started = Instant::now();
    let result = scripts.load();
    // The instruction budget stops it; on a machine too busy to spend that budget within
    // the load's wall-clock bound (1 s), that bound does — either is the refusal.
    assert!(
        matches!(
            result,
            Err(PolicyError::DeadlineExceeded { .. } | PolicyError::TimeLimitExceeded { .. })
        ),
        "{result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn budget_is_per_check_not_cumulative() {
    // About half the budget per call: fine every time, because each check starts afresh.
    let access = "function can_write(req) local n = 0 for i = 1, 100000 do n = n + i end return buzz.allow() end";
    let (_scripts, engine) = common::engine_with_access_limits(access, common::budget_limits());
    for i in 0..50 {
        let verdict = engine.check_write(&message_request());
        assert_eq!(verdict.ok(), Some(Verdict::Allow), "call {i}");
    }
}

#[test]
fn engine_recovers_after_a_deadline() {
    let access = "function can_write(req)\n\
                    if req.event.content == 'spin' then while true do pcall(function() while true do end end) end end\n\
                    return buzz.deny('restricted', 'rule ran')\n\
                  end";
    let (_scripts, engine) = engine_with_access(access);
    let mut spin = message_request();
    spin.event.content = "spin".into();
    for _ in 0..3 {
        assert!(common::is_stopped(&engine.check_write(&spin)));
        let verdict = engine
            .check_write(&message_request())
            .expect("normal request");
        assert_eq!(verdict.to_string(), "restricted: rule ran");
    }
}

#[test]
fn small_budget_is_enforced() {
    let scripts = Scripts::new(
        "function can_write(req) local n = 0 for i = 1, 5000 do n = n + i end return buzz.allow() end",
        ALLOW_ALL_MODERATION,
    );
    let limits = PolicyLimits {
        instruction_budget: 1_000,
        ..common::budget_limits()
    };
    let engine = scripts
        .load_with(
            limits,
            std::sync::Arc::new(buzz_policy::MemoryRateLimiter::new()),
        )
        .expect("load");
    assert!(matches!(
        engine.check_write(&message_request()),
        Err(PolicyError::DeadlineExceeded { budget: 1_000, .. })
    ));
}

/// Memory bombs, each triggered only by content "bomb" so that the same engine can be asked a
/// normal question right after.
const BOMBS: &[(&str, &str)] = &[
    ("one huge string", "local s = string.rep('x', 1 << 30)"),
    (
        "doubling string",
        "local s = 'x' while true do s = s .. s end",
    ),
    (
        "growing table",
        "local t = {} local i = 0 while true do i = i + 1 t[i] = string.rep('y', 1024) .. i end",
    ),
    (
        "table of tables",
        "local t = {} for i = 1, 1e9 do t[i] = { i, i, i, i } end",
    ),
    (
        "table.concat of a large table",
        "local t = {} for i = 1, 300000 do t[i] = 'abcdefghij' end local s = table.concat(t) .. table.concat(t)",
    ),
];

#[test]
fn memory_bombs_fail_and_the_engine_still_answers() {
    for (name, bomb) in BOMBS {
        let access = format!(
            "function can_write(req)\n\
               if req.event.content == 'bomb' then {bomb} end\n\
               return buzz.deny('invalid', 'normal answer')\n\
             end\n"
        );
        let (_scripts, engine) =
            common::engine_with_access_limits(&access, common::budget_limits());
        let mut request = message_request();
        request.event.content = "bomb".into();
        let started = Instant::now();
        let result = engine.check_write(&request);
        assert!(
            matches!(result, Err(PolicyError::MemoryExceeded { .. })),
            "{name}: expected MemoryExceeded, got {result:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{name}: too slow"
        );
        for _ in 0..3 {
            let verdict = engine.check_write(&message_request());
            assert_eq!(
                verdict.map(|v| v.to_string()).ok().as_deref(),
                Some("invalid: normal answer"),
                "{name}: engine did not recover"
            );
        }
    }
}

#[test]
fn a_memory_error_caught_by_the_script_is_the_scripts_business() {
    let access = "function can_write(req)\n\
                    local ok = pcall(string.rep, 'x', 1 << 30)\n\
                    if ok then return buzz.deny('invalid', 'should not fit') end\n\
                    return buzz.allow()\n\
                  end";
    let (_scripts, engine) = engine_with_access(access);
    assert_eq!(
        engine.check_write(&message_request()).ok(),
        Some(Verdict::Allow)
    );
}

#[test]
fn oversized_request_is_a_memory_error_not_a_crash() {
    let (_scripts, engine) = engine_with_access(common::ALLOW_ALL_ACCESS);
    let mut request = message_request();
    request.event.content = "z".repeat(PolicyLimits::DEFAULT_MEMORY_BYTES + 1024);
    let result = engine.check_write(&request);
    assert!(
        matches!(result, Err(PolicyError::MemoryExceeded { .. })),
        "{result:?}"
    );
    assert_eq!(
        engine.check_write(&message_request()).ok(),
        Some(Verdict::Allow)
    );
}

#[test]
fn memory_bomb_at_load_fails_the_load() {
    let scripts = Scripts::new(
        "local s = string.rep('x', 1 << 30)\nfunction can_write(req) return buzz.allow() end",
        ALLOW_ALL_MODERATION,
    );
    let result = scripts.load();
    assert!(
        matches!(result, Err(PolicyError::MemoryExceeded { .. })),
        "{result:?}"
    );
}
