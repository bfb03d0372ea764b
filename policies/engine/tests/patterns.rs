//! The sandbox's pattern functions (Rust, stoppable) against Lua 5.4's own (C): the same Lua
//! code runs a table of cases and a few thousand random ones in a plain mlua state with the
//! real string library and in a policy (through `can_write`, which returns the results as a
//! deny message). Results must be identical; where Lua raises an error the sandbox must raise
//! one with the same message.

mod common;

use std::time::Duration;

use buzz_policy::{PolicyLimits, Verdict};
use common::message_request;

/// Defines `run_cases()`, returning one line per case: `OK <values>` or `ERR <message>`.
const RUNNER: &str = r#"
local function C(...) return table.pack(...) end

local CASES = {
  C("find", "hello world", "o w"), C("find", "hello world", "o", 6), C("find", "hello", "l", -2),
  C("find", "hello", "", 10), C("find", "hello", "", 6), C("find", "hello", "", -100),
  C("find", "hello", "xyz", 1, true), C("find", "a.b", ".", 1, true), C("find", "a+b", "+", 1, true),
  C("find", "a+b", "a+", 1, false), C("find", "hello", "(l)(l)"), C("find", "hello", "()ll()"),
  C("find", "  key = value  ", "^%s*(%w+)%s*=%s*(%w+)"), C("find", "abc", "^b"), C("find", "abc", "c$"),
  C("find", 12345, 3), C("find", "abc", "b", 2.0), C("find", "abc", "b", "2"), C("find", "", ""),
  C("find", "aaa", "a-", 2), C("find", "a\0b", "\0"), C("find", "a\0b", "%z"), C("find", "ab", "b", 3),
  C("find", "abab", "ab", 2, true), C("find", ("ab"):rep(50), ("ab"):rep(20) .. "x", 1, true),
  C("match", "2024-01-15", "(%d+)-(%d+)-(%d+)"), C("match", "hello", ".-"), C("match", "hello", "l+"),
  C("match", "hello", "l*"), C("match", "hello", "x?h"), C("match", "THE (quick) fox", "%((%a+)%)"),
  C("match", "f(a(b)c)d", "%b()"), C("match", "f(a(b c)d", "%b()"), C("match", "THE (quick) fox", "%f[%a]%a+"),
  C("match", "hello world from lua", "%f[%w]%w+$"), C("match", "abcabc", "(abc)%1"), C("match", "abc", "((a)(b))"),
  C("match", "abc", "$"), C("match", "a$b", "a$b"), C("match", "hello", "^(h)(e)"), C("match", "[test]", "%[(.-)%]"),
  C("match", "abc]", "[]]"), C("match", "a-b", "[a%-]+"), C("match", "a-z", "[%a-]+"), C("match", "az-", "[a-]+"),
  C("match", "^caret", "[%^c]+"), C("match", "x^y", "[^%^]+"), C("match", "\0abc", "%z"), C("match", "a\0b", "a%zb"),
  C("match", "a\0b", "[\0]"), C("match", "\v\t\n x", "%s+"), C("match", "\v", "%S"), C("match", "é", "%a"),
  C("match", "é!", "[\128-\255]+"), C("match", "hello", "(h)(e)(l)(l)(o)"), C("match", "key=", "(%w+)=(%w*)"),
  C("match", "x = 10", "()=()"), C("match", "THE END", "%u+"), C("match", "abc123", "%l+%d+"),
  C("match", "0x1F", "0[xX](%x+)"), C("match", "a.b,c", "%p"), C("match", "\1\2a", "%c+"), C("match", " !~", "%g+"),
  C("match", "abc", "%w%W"), C("match", "a1 b2", "%a%d"), C("match", "abc", "[b-]"), C("match", "abc", "[%]]"),
  C("match", "ab", "[a-]"), C("match", "abc", "()a()b()"), C("match", "abc", "a(%f[%w])"),
  C("match", "THE", "%f[%l]"), C("match", "abc", "%f[%z]"), C("match", "aaab", "a-b"), C("match", "aaab", "a*b"),
  C("match", "aaab", "a+b"), C("match", "ab", "a?b?c?"), C("match", "xyz", "x(y?)z"), C("match", "ab", "(a)(%1?)"),
  C("match", "aa", "(a)%1"), C("match", "hello", "", 3), C("match", "hello", "l", -1), C("match", "hello", "h", 10),
  C("match", "ab", "(", 1), C("match", "abc", "[a"), C("match", "abc", "[^"), C("match", "abc", "%"),
  C("match", "abc", "(a"), C("match", "abc", "a)"), C("match", "abc", "%1"), C("match", "abc", "(a)%2"),
  C("match", "abc", "%0"), C("match", "abc", "%f"), C("match", "abc", "%fa"), C("match", "abc", "%b"),
  C("match", "abc", "%ba"), C("match", "abc", "[%"), C("match", ("a"):rep(40), ("(a)"):rep(33)),
  C("match", ("a"):rep(300), ("a?"):rep(250)), C("match", "abc", "()%1"), C("match", "a", "[a-%]"),
  C("gmatch", "one two three", "%a+"), C("gmatch", "k1=v1, k2=v2", "(%w+)=(%w+)"), C("gmatch", "abc", ""),
  C("gmatch", "abc", "()"), C("gmatch", "a,b,,c", "([^,]*)"), C("gmatch", "hello", "l", 4),
  C("gmatch", "^a^a", "^a"), C("gmatch", "abc", "x*"), C("gmatch", "hello", ".", -2), C("gmatch", "ab", "", 10),
  C("gmatch", "abc", "(a"),
  C("gsub", "hello world", "o", "0"), C("gsub", "hello world", "(o)", "[%1]"), C("gsub", "hello", "", "-"),
  C("gsub", "hello world", "%w+", "%0 %0", 1), C("gsub", "abc", "%w", "%%"), C("gsub", "abc", "(b)", "%2"),
  C("gsub", "abc", "b", "%x"), C("gsub", "abc", "b", "x%"), C("gsub", "abc", "()b", "%1"),
  C("gsub", "abc", "b", "%1"), C("gsub", "hello world", "%w+", { hello = "HI", world = false }),
  C("gsub", "hello world", "%w+", function(w) return w:upper() end),
  C("gsub", "hello world", "%w+", function(w) if w == "hello" then return nil end return 1.5 end),
  C("gsub", "hello world", "(%w+) (%w+)", function(a, b) return b .. " " .. a end),
  C("gsub", "abc", "%w", function() return {} end), C("gsub", "abc", "%w", 42), C("gsub", "abc", "%w", 4.5),
  C("gsub", "abc", "^a", "x"), C("gsub", "aaa", "^a", "x"), C("gsub", "abc", "x*", "-"),
  C("gsub", "a b c", " ", "", 0), C("gsub", "a b c", " ", "", -1), C("gsub", "a b c", " ", "", 1.0),
  C("gsub", "abc", "b", true), C("gsub", "abc", "b", nil), C("gsub", "abc", "(", "x"),
  C("gsub", "a\0b", "%z", "0"), C("gsub", "abc", "", "%0"), C("gsub", "x = 1, y = 2", "(%w+) = (%w+)", "%2 = %1"),
  C("gsub", "abc", ".", { a = 1, b = true }),
}

local function show(v)
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "number" then return math.type(v) .. ":" .. tostring(v) end
  return type(v) .. ":" .. tostring(v)
end

local function call(name, args)
  if name == "gmatch" then
    local iter = string.gmatch(table.unpack(args, 2, args.n))
    local all, rounds = {}, 0
    while rounds < 50 do
      local r = table.pack(iter())
      if r[1] == nil then break end
      for i = 1, r.n do all[#all + 1] = r[i] end
      all[#all + 1] = "|"
      rounds = rounds + 1
    end
    return table.unpack(all)
  end
  return string[name](table.unpack(args, 2, args.n))
end

local function line(name, args)
  local r = table.pack(pcall(call, name, args))
  if not r[1] then
    local message = tostring(r[2])
    return "ERR " .. (message:gsub("\n", " "))
  end
  local parts = {}
  for i = 2, r.n do parts[#parts + 1] = show(r[i]) end
  return "OK " .. table.concat(parts, " ")
end

-- Random patterns over a small alphabet, so that the cases hit the corners together.
local SUBJECT = { "a", "b", "(", ")", ".", " ", "%", "-", "ab", "ba", "\0" }
local PIECES = { "a", "b", ".", "%a", "%s", "%S", "[ab]", "[^a]", "[a-b]", "(", ")", "()", "*", "+", "-", "?",
  "^", "$", "%b()", "%f[a]", "%f[%s]", "%1", "%.", "%(", "[%a(]", "%", "[" }

local function random_string(pool, n)
  local parts = {}
  for i = 1, math.random(0, n) do parts[i] = pool[math.random(#pool)] end
  return table.concat(parts)
end

function run_cases()
  local out = {}
  for i, case in ipairs(CASES) do
    out[#out + 1] = i .. " " .. line(case[1], case)
  end
  math.randomseed(42)
  for i = 1, 3000 do
    local s, p = random_string(SUBJECT, 12), random_string(PIECES, 6)
    local init = math.random(-3, 8)
    out[#out + 1] = "r" .. i .. " find " .. line("find", C("find", s, p, init))
    out[#out + 1] = "r" .. i .. " match " .. line("match", C("match", s, p))
    out[#out + 1] = "r" .. i .. " gmatch " .. line("gmatch", C("gmatch", s, p))
    out[#out + 1] = "r" .. i .. " gsub " .. line("gsub", C("gsub", s, p, "<%0>"))
  end
  return table.concat(out, "\n")
end
"#;

fn real_lua_results() -> String {
    let lua = mlua::Lua::new();
    lua.load(RUNNER).exec().expect("runner loads in plain Lua");
    let run: mlua::Function = lua.globals().get("run_cases").expect("run_cases");
    run.call::<String>(()).expect("run_cases in plain Lua")
}

fn sandbox_results() -> String {
    // The runner defines a global (allowed in the main chunk) and runs far more than one
    // normal check: lift the budget and the time limit for it.
    let access =
        format!("{RUNNER}\nfunction can_write(req) return buzz.deny('invalid', run_cases()) end\n");
    let limits = PolicyLimits {
        instruction_budget: u64::MAX / 2,
        call_timeout: Duration::from_secs(600),
        load_timeout: Duration::from_secs(600),
        memory_bytes: 256 << 20,
    };
    let (_scripts, engine) = common::engine_with_access_limits(&access, limits);
    match engine.check_write(&message_request()) {
        Ok(Verdict::Deny { message, .. }) => message,
        other => panic!("the runner failed in the sandbox: {other:?}"),
    }
}

/// Lua prefixes some errors with `chunk:line:`; the message proper follows.
fn without_position(message: &str) -> &str {
    let mut rest = message.trim();
    while let Some((head, tail)) = rest.split_once(": ") {
        if head.contains(':') && head.ends_with(|c: char| c.is_ascii_digit()) {
            rest = tail;
        } else {
            break;
        }
    }
    rest
}

#[test]
fn pattern_functions_match_lua() {
    let real = real_lua_results();
    let ours = sandbox_results();
    let (real, ours): (Vec<&str>, Vec<&str>) = (real.lines().collect(), ours.lines().collect());
    assert_eq!(real.len(), ours.len(), "different numbers of lines");
    let mut differences = Vec::new();
    for (real, ours) in real.iter().zip(&ours) {
        let same = match (real.split_once(" ERR "), ours.split_once(" ERR ")) {
            // Errors: ours must carry Lua's message (it may add context around it).
            (Some((case, message)), Some((our_case, our_message))) => {
                // Called through `string[name]`, Lua cannot name the function in its message.
                let message = without_position(message).replace("to '?'", "to 'gsub'");
                case == our_case && our_message.contains(&message)
            }
            _ => real == ours,
        };
        if !same {
            let shorten = |line: &str| line.chars().take(300).collect::<String>();
            differences.push(format!("lua:  {}\nours: {}", shorten(real), shorten(ours)));
        }
    }
    assert!(
        differences.is_empty(),
        "{} differences, the first ones:\n{}",
        differences.len(),
        differences
            .iter()
            .take(15)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The comparison covered errors and successes of every function.
    for needle in [" find OK ", " gmatch OK ", " gsub OK ", " match ERR "] {
        assert!(
            real.iter().any(|l| l.contains(needle)),
            "no {needle:?} line"
        );
    }
}
