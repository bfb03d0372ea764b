//! `string.find`, `string.match`, `string.gmatch` and `string.gsub` on top of the stoppable
//! matcher in `pattern.rs`, replacing Lua's C versions in the sandbox's string library (and
//! so also in the string methods, `s:find(...)`).
//!
//! Why: Lua's matcher is C code that backtracks; one call can run for minutes and the
//! instruction hook never fires inside it. These versions charge every matcher step to the
//! run's [`CallCtx`] (one step = one instruction) and check its wall-clock deadline, so a
//! pattern call stops with the same uncatchable deadline error as a runaway loop.
//!
//! The results, argument handling and error texts follow Lua 5.4's `lstrlib.c`; the tests in
//! `tests/patterns.rs` compare both on a table of cases. Differences: errors are raised as
//! host errors (a `pcall` sees an error object whose `tostring` is the message), and
//! `gsub` refuses to build a result larger than the state's memory limit (Lua's buffer would
//! hit the same limit).

use std::sync::Arc;

use mlua::{Function, Lua, LuaString, MultiValue, Table, Value};

use crate::budget::{deadline_error, CallCtx};
use crate::pattern::{find_plain, has_no_specials, Captured, MatchError, Matcher, Meter};

/// Charges matcher steps to the current run.
struct CtxMeter<'a> {
    ctx: &'a Arc<CallCtx>,
    lua: &'a Lua,
}

impl Meter for CtxMeter<'_> {
    fn charge(&mut self, steps: u64) -> bool {
        self.ctx.charge(self.lua, steps)
    }
}

fn lua_error(err: MatchError) -> mlua::Error {
    match err {
        MatchError::Pattern(message) => mlua::Error::RuntimeError(message),
        MatchError::Stopped => deadline_error(),
    }
}

/// Replaces the four pattern functions in `string` (the real library table, which is also
/// the `__index` of the string metatable).
pub(crate) fn install(
    lua: &Lua,
    string: &Table,
    ctx: &Arc<CallCtx>,
    memory_limit: usize,
) -> mlua::Result<()> {
    let find_ctx = Arc::clone(ctx);
    let find = lua.create_function(
        move |lua, (s, p, init, plain): (LuaString, LuaString, Option<i64>, Value)| {
            let plain = !matches!(plain, Value::Nil | Value::Boolean(false));
            find_aux(lua, &find_ctx, &s, &p, init, Mode::Find { plain })
        },
    )?;
    let match_ctx = Arc::clone(ctx);
    let match_fn = lua.create_function(
        move |lua, (s, p, init): (LuaString, LuaString, Option<i64>)| {
            find_aux(lua, &match_ctx, &s, &p, init, Mode::Match)
        },
    )?;
    let gmatch_ctx = Arc::clone(ctx);
    let gmatch = lua.create_function(
        move |lua, (s, p, init): (LuaString, LuaString, Option<i64>)| {
            gmatch(lua, &gmatch_ctx, s, p, init)
        },
    )?;
    let gsub_ctx = Arc::clone(ctx);
    let gsub = lua.create_function(
        move |lua, (s, p, repl, max): (LuaString, LuaString, Value, Option<i64>)| {
            gsub(lua, &gsub_ctx, &s, &p, repl, max, memory_limit)
        },
    )?;
    string.raw_set("find", find)?;
    string.raw_set("match", match_fn)?;
    string.raw_set("gmatch", gmatch)?;
    string.raw_set("gsub", gsub)
}

/// Lua's `posrelatI`: a 1-based, possibly negative position → a 0-based start (may be past
/// the end, which the callers check).
fn start_index(init: Option<i64>, len: usize) -> usize {
    let len_i = i64::try_from(len).unwrap_or(i64::MAX);
    let pos = match init.unwrap_or(1) {
        pos if pos > 0 => pos,
        0 => 1,
        pos if pos < -len_i => 1,
        pos => len_i + pos + 1,
    };
    usize::try_from(pos - 1).unwrap_or(usize::MAX)
}

fn position(i: usize) -> Value {
    Value::Integer(i64::try_from(i).unwrap_or(i64::MAX))
}

fn capture_value(lua: &Lua, src: &[u8], captured: Captured) -> mlua::Result<Value> {
    Ok(match captured {
        Captured::Text(start, end) => Value::String(lua.create_string(&src[start..end])?),
        Captured::Position(pos) => position(pos),
    })
}

/// The captures of the match `s..e` (the whole match if there are none and `whole`).
fn captures<M: Meter>(
    lua: &Lua,
    src: &[u8],
    matcher: &Matcher<'_, M>,
    s: usize,
    e: usize,
    whole: bool,
) -> mlua::Result<Vec<Value>> {
    (0..matcher.capture_count(whole))
        .map(|i| {
            let captured = matcher.capture(i, s, e).map_err(lua_error)?;
            capture_value(lua, src, captured)
        })
        .collect()
}

#[derive(Clone, Copy)]
enum Mode {
    Find { plain: bool },
    Match,
}

fn find_aux(
    lua: &Lua,
    ctx: &Arc<CallCtx>,
    s: &LuaString,
    p: &LuaString,
    init: Option<i64>,
    mode: Mode,
) -> mlua::Result<MultiValue> {
    let (src, pat) = (s.as_bytes(), p.as_bytes());
    let (src, pat): (&[u8], &[u8]) = (&src, &pat);
    let start = start_index(init, src.len());
    if start > src.len() {
        return Ok(MultiValue::from_vec(vec![Value::Nil]));
    }
    let mut meter = CtxMeter { ctx, lua };
    if let Mode::Find { plain } = mode {
        if plain || has_no_specials(pat) {
            let found = find_plain(src, pat, start, &mut meter).map_err(lua_error)?;
            return Ok(MultiValue::from_vec(match found {
                Some(at) => vec![position(at + 1), position(at + pat.len())],
                None => vec![Value::Nil],
            }));
        }
    }
    let anchor = pat.first() == Some(&b'^');
    let body = usize::from(anchor);
    let mut matcher = Matcher::new(src, &pat[body..], &mut meter);
    let mut s1 = start;
    let found = loop {
        if let Some(end) = matcher.attempt(s1, 0).map_err(lua_error)? {
            break Some((s1, end));
        }
        s1 += 1;
        if s1 > src.len() || anchor {
            break None;
        }
    };
    matcher.finish().map_err(lua_error)?;
    let Some((s1, end)) = found else {
        return Ok(MultiValue::from_vec(vec![Value::Nil]));
    };
    Ok(MultiValue::from_vec(match mode {
        Mode::Find { .. } => {
            let mut values = vec![position(s1 + 1), position(end)];
            values.extend(captures(lua, src, &matcher, s1, end, false)?);
            values
        }
        Mode::Match => captures(lua, src, &matcher, s1, end, true)?,
    }))
}

/// `string.gmatch`: an iterator that keeps its subject, pattern and position.
fn gmatch(
    lua: &Lua,
    ctx: &Arc<CallCtx>,
    s: LuaString,
    p: LuaString,
    init: Option<i64>,
) -> mlua::Result<Function> {
    let len = s.as_bytes().len();
    let mut next = start_index(init, len).min(len + 1);
    let mut last_match: Option<usize> = None;
    let ctx = Arc::clone(ctx);
    lua.create_function_mut(move |lua, ()| {
        let (src, pat) = (s.as_bytes(), p.as_bytes());
        let (src, pat): (&[u8], &[u8]) = (&src, &pat);
        let mut meter = CtxMeter { ctx: &ctx, lua };
        let mut matcher = Matcher::new(src, pat, &mut meter);
        let mut found = None;
        let mut at = next;
        while at <= src.len() {
            if let Some(end) = matcher.attempt(at, 0).map_err(lua_error)? {
                if Some(end) != last_match {
                    found = Some((at, end));
                    break;
                }
            }
            at += 1;
        }
        matcher.finish().map_err(lua_error)?;
        let Some((start, end)) = found else {
            next = src.len() + 1;
            return Ok(MultiValue::new());
        };
        next = end;
        last_match = Some(end);
        Ok(MultiValue::from_vec(captures(
            lua, src, &matcher, start, end, true,
        )?))
    })
}

/// What replaces each match in `gsub`.
enum Replacement {
    Text(LuaString),
    Call(Function),
    Index(Table),
}

fn gsub(
    lua: &Lua,
    ctx: &Arc<CallCtx>,
    s: &LuaString,
    p: &LuaString,
    repl: Value,
    max: Option<i64>,
    memory_limit: usize,
) -> mlua::Result<(Value, i64)> {
    let repl = match repl {
        Value::Function(f) => Replacement::Call(f),
        Value::Table(t) => Replacement::Index(t),
        value @ (Value::String(_) | Value::Integer(_) | Value::Number(_)) => {
            match lua.coerce_string(value)? {
                Some(text) => Replacement::Text(text),
                None => return Err(bad_replacement_type("number")),
            }
        }
        other => return Err(bad_replacement_type(other.type_name())),
    };
    let (src, pat) = (s.as_bytes(), p.as_bytes());
    let (src, pat): (&[u8], &[u8]) = (&src, &pat);
    let max = max.unwrap_or_else(|| {
        i64::try_from(src.len())
            .unwrap_or(i64::MAX)
            .saturating_add(1)
    });
    let anchor = pat.first() == Some(&b'^');
    let body = usize::from(anchor);
    let mut meter = CtxMeter { ctx, lua };
    let mut matcher = Matcher::new(src, &pat[body..], &mut meter);
    let mut out: Vec<u8> = Vec::new();
    let mut at = 0;
    let mut last_match: Option<usize> = None;
    let mut count: i64 = 0;
    let mut changed = false;
    while count < max {
        let found = matcher.attempt(at, 0).map_err(lua_error)?;
        match found {
            Some(end) if Some(end) != last_match => {
                count += 1;
                changed |= add_value(lua, src, &matcher, at, end, &repl, &mut out)?;
                at = end;
                last_match = Some(end);
            }
            _ if at < src.len() => {
                out.push(src[at]);
                at += 1;
            }
            _ => break,
        }
        if out.len() > memory_limit {
            return Err(mlua::Error::MemoryError(
                "string.gsub: result larger than the policy memory limit".to_owned(),
            ));
        }
        if anchor {
            break;
        }
    }
    matcher.finish().map_err(lua_error)?;
    let result = if changed {
        out.extend_from_slice(&src[at..]);
        // Copying the result is linear work the matcher did not count.
        if !ctx.charge(lua, out.len() as u64 >> 6) {
            return Err(deadline_error());
        }
        Value::String(lua.create_string(&out)?)
    } else {
        Value::String(s.clone())
    };
    Ok((result, count))
}

fn bad_replacement_type(found: &str) -> mlua::Error {
    mlua::Error::RuntimeError(format!(
        "bad argument #3 to 'gsub' (string/function/table expected, got {found})"
    ))
}

/// Appends the replacement of the match `s..e` to `out`; `false` if the match was kept as
/// it was (a function or table gave nil or false).
fn add_value<M: Meter>(
    lua: &Lua,
    src: &[u8],
    matcher: &Matcher<'_, M>,
    s: usize,
    e: usize,
    repl: &Replacement,
    out: &mut Vec<u8>,
) -> mlua::Result<bool> {
    let value: Value = match repl {
        Replacement::Text(text) => {
            add_text(src, matcher, s, e, &text.as_bytes(), out)?;
            return Ok(true);
        }
        Replacement::Call(f) => {
            let args = captures(lua, src, matcher, s, e, true)?;
            f.call(MultiValue::from_vec(args))?
        }
        Replacement::Index(t) => {
            let key = matcher.capture(0, s, e).map_err(lua_error)?;
            t.get(capture_value(lua, src, key)?)?
        }
    };
    match value {
        Value::Nil | Value::Boolean(false) => {
            out.extend_from_slice(&src[s..e]);
            Ok(false)
        }
        value @ (Value::String(_) | Value::Integer(_) | Value::Number(_)) => {
            if let Some(text) = lua.coerce_string(value)? {
                out.extend_from_slice(&text.as_bytes());
            }
            Ok(true)
        }
        other => Err(mlua::Error::RuntimeError(format!(
            "invalid replacement value (a {})",
            other.type_name()
        ))),
    }
}

/// A replacement string: `%0`..`%9` are captures, `%%` is a percent sign.
fn add_text<M: Meter>(
    src: &[u8],
    matcher: &Matcher<'_, M>,
    s: usize,
    e: usize,
    text: &[u8],
    out: &mut Vec<u8>,
) -> mlua::Result<()> {
    let mut i = 0;
    while i < text.len() {
        let c = text[i];
        i += 1;
        if c != b'%' {
            out.push(c);
            continue;
        }
        let next = text.get(i).copied().unwrap_or(0);
        i += 1;
        match next {
            b'%' => out.push(b'%'),
            b'0' => out.extend_from_slice(&src[s..e]),
            b'1'..=b'9' => {
                match matcher
                    .capture(usize::from(next - b'1'), s, e)
                    .map_err(lua_error)?
                {
                    Captured::Text(a, b) => out.extend_from_slice(&src[a..b]),
                    Captured::Position(pos) => out.extend_from_slice(pos.to_string().as_bytes()),
                }
            }
            _ => {
                return Err(mlua::Error::RuntimeError(
                    "invalid use of '%' in replacement string".to_owned(),
                ))
            }
        }
    }
    Ok(())
}
