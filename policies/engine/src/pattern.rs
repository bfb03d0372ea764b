//! Lua 5.4 pattern matching, written in Rust so that it can be stopped.
//!
//! Lua's own matcher (`lstrlib.c`) backtracks: `("a"):rep(200):find(".-.-.-.-.-b")` needs
//! about 200^5 steps, and a C function cannot be interrupted by the instruction hook. This
//! matcher follows the same algorithm and the same semantics (classes, sets, anchors,
//! captures and position captures, `%b`, `%f`, the quantifiers `* + - ?`, back-references,
//! the recursion limit of 200), but counts its steps and reports them to a [`Meter`] every
//! [`CHECK_EVERY`] steps; the meter can stop the match. `strlib.rs` binds it to Lua.
//!
//! Where the C code reads the terminating NUL of the pattern or the subject (one past the
//! end), this code reads a 0 byte too ([`Matcher::pat`], [`Matcher::src`]), so edge cases
//! such as a trailing `(`, `%f` at the end of the subject or embedded zeros behave the same.

/// Maximum number of captures in one pattern (Lua's `LUA_MAXCAPTURES`).
pub(crate) const MAX_CAPTURES: usize = 32;
/// Maximum recursion depth of the matcher (Lua's `MAXCCALLS`).
const MAX_DEPTH: u32 = 200;
/// Steps between two calls of the meter: the meter reads the clock, a step is cheap.
pub(crate) const CHECK_EVERY: u64 = 1024;

const ESC: u8 = b'%';
const SPECIALS: &[u8] = b"^$*+?.([%-";

/// Decides whether a match may go on; gets the steps taken since its last call.
pub(crate) trait Meter {
    /// `false` stops the match with [`MatchError::Stopped`].
    fn charge(&mut self, steps: u64) -> bool;
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MatchError {
    /// A malformed pattern or capture use; the text is Lua's error message.
    Pattern(String),
    /// The meter refused to let the match continue.
    Stopped,
}

fn pattern_error<T>(message: impl Into<String>) -> Result<T, MatchError> {
    Err(MatchError::Pattern(message.into()))
}

/// One capture: `len` is a length, or [`UNFINISHED`] / [`POSITION`].
#[derive(Debug, Clone, Copy, Default)]
struct Slot {
    start: usize,
    len: isize,
}

const UNFINISHED: isize = -1;
const POSITION: isize = -2;

/// What a capture (or the whole match, when there are no captures) produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Captured {
    /// Bytes `start..end` of the subject.
    Text(usize, usize),
    /// A position capture `()`: a 1-based position.
    Position(usize),
}

/// The state of matching one pattern against one subject.
pub(crate) struct Matcher<'a, M: Meter> {
    src: &'a [u8],
    pat: &'a [u8],
    depth: u32,
    level: usize,
    captures: [Slot; MAX_CAPTURES],
    /// Steps not yet reported to the meter.
    pending: u64,
    meter: &'a mut M,
}

impl<'a, M: Meter> Matcher<'a, M> {
    pub(crate) fn new(src: &'a [u8], pat: &'a [u8], meter: &'a mut M) -> Matcher<'a, M> {
        Matcher {
            src,
            pat,
            depth: MAX_DEPTH,
            level: 0,
            captures: [Slot::default(); MAX_CAPTURES],
            pending: 0,
            meter,
        }
    }

    /// Reports the remaining steps (call once the caller is done matching).
    pub(crate) fn finish(&mut self) -> Result<(), MatchError> {
        let steps = std::mem::take(&mut self.pending);
        if steps > 0 && !self.meter.charge(steps) {
            return Err(MatchError::Stopped);
        }
        Ok(())
    }

    #[inline]
    fn tick(&mut self, steps: u64) -> Result<(), MatchError> {
        self.pending += steps;
        if self.pending >= CHECK_EVERY {
            self.finish()?;
        }
        Ok(())
    }

    /// Pattern byte `i`, or 0 past the end (the C code's terminating NUL).
    #[inline]
    fn pat(&self, i: usize) -> u8 {
        self.pat.get(i).copied().unwrap_or(0)
    }

    /// Subject byte `i`, or 0 past the end.
    #[inline]
    fn src(&self, i: usize) -> u8 {
        self.src.get(i).copied().unwrap_or(0)
    }

    /// Tries to match the pattern from byte `p` on at subject position `s`, with no captures
    /// yet (the start of one attempt). Returns the end of the match.
    pub(crate) fn attempt(&mut self, s: usize, p: usize) -> Result<Option<usize>, MatchError> {
        self.depth = MAX_DEPTH;
        self.level = 0;
        self.do_match(s, p)
    }

    /// The number of values a successful match produces (at least 1 when `whole` is set).
    pub(crate) fn capture_count(&self, whole: bool) -> usize {
        if self.level == 0 && whole {
            1
        } else {
            self.level
        }
    }

    /// Capture `i` of the last match `s..e` (capture 0 is the whole match when the pattern
    /// has no captures).
    pub(crate) fn capture(&self, i: usize, s: usize, e: usize) -> Result<Captured, MatchError> {
        if i >= self.level {
            if i != 0 {
                return pattern_error(format!("invalid capture index %{}", i + 1));
            }
            return Ok(Captured::Text(s, e));
        }
        let slot = self.captures[i];
        match slot.len {
            UNFINISHED => pattern_error("unfinished capture"),
            POSITION => Ok(Captured::Position(slot.start + 1)),
            len => Ok(Captured::Text(slot.start, slot.start + len.unsigned_abs())),
        }
    }

    fn do_match(&mut self, s: usize, p: usize) -> Result<Option<usize>, MatchError> {
        if self.depth == 0 {
            return pattern_error("pattern too complex");
        }
        self.depth -= 1;
        let result = self.match_loop(s, p);
        self.depth += 1;
        result
    }

    /// The body of Lua's `match`; the C `goto init` is the loop.
    fn match_loop(&mut self, mut s: usize, mut p: usize) -> Result<Option<usize>, MatchError> {
        loop {
            self.tick(1)?;
            if p == self.pat.len() {
                return Ok(Some(s));
            }
            match self.pat(p) {
                b'(' => {
                    return if self.pat(p + 1) == b')' {
                        self.start_capture(s, p + 2, POSITION)
                    } else {
                        self.start_capture(s, p + 1, UNFINISHED)
                    };
                }
                b')' => return self.end_capture(s, p + 1),
                b'$' if p + 1 == self.pat.len() => {
                    return Ok((s == self.src.len()).then_some(s));
                }
                ESC if self.pat(p + 1) == b'b' => match self.match_balance(s, p + 2)? {
                    Some(end) => {
                        s = end;
                        p += 4;
                        continue;
                    }
                    None => return Ok(None),
                },
                ESC if self.pat(p + 1) == b'f' => {
                    p += 2;
                    if self.pat(p) != b'[' {
                        return pattern_error("missing '[' after '%f' in pattern");
                    }
                    let ep = self.class_end(p)?;
                    let previous = if s == 0 { 0 } else { self.src(s - 1) };
                    let current = self.src(s);
                    if !self.match_bracket_class(previous, p, ep - 1)
                        && self.match_bracket_class(current, p, ep - 1)
                    {
                        p = ep;
                        continue;
                    }
                    return Ok(None);
                }
                ESC if self.pat(p + 1).is_ascii_digit() => {
                    match self.match_capture(s, self.pat(p + 1))? {
                        Some(end) => {
                            s = end;
                            p += 2;
                            continue;
                        }
                        None => return Ok(None),
                    }
                }
                _ => {
                    let ep = self.class_end(p)?;
                    let suffix = self.pat(ep);
                    if !self.single_match(s, p, ep) {
                        if matches!(suffix, b'*' | b'?' | b'-') {
                            p = ep + 1;
                            continue;
                        }
                        return Ok(None);
                    }
                    match suffix {
                        b'?' => {
                            if let Some(end) = self.do_match(s + 1, ep + 1)? {
                                return Ok(Some(end));
                            }
                            p = ep + 1;
                            continue;
                        }
                        b'+' => return self.max_expand(s + 1, p, ep),
                        b'*' => return self.max_expand(s, p, ep),
                        b'-' => return self.min_expand(s, p, ep),
                        _ => {
                            s += 1;
                            p = ep;
                            continue;
                        }
                    }
                }
            }
        }
    }

    /// The end of the single-character class starting at `p` (before any quantifier).
    fn class_end(&self, mut p: usize) -> Result<usize, MatchError> {
        let c = self.pat(p);
        p += 1;
        match c {
            ESC => {
                if p >= self.pat.len() {
                    return pattern_error("malformed pattern (ends with '%')");
                }
                Ok(p + 1)
            }
            b'[' => {
                if self.pat(p) == b'^' {
                    p += 1;
                }
                // Look for the closing ']'; the first character of the set is never it.
                loop {
                    if p >= self.pat.len() {
                        return pattern_error("malformed pattern (missing ']')");
                    }
                    let c = self.pat(p);
                    p += 1;
                    if c == ESC && p < self.pat.len() {
                        p += 1; // skip escapes such as `%]`
                    }
                    if self.pat(p) == b']' {
                        return Ok(p + 1);
                    }
                }
            }
            _ => Ok(p),
        }
    }

    /// Does subject position `s` match the class `p..ep`? (Never at the end of the subject.)
    fn single_match(&self, s: usize, p: usize, ep: usize) -> bool {
        let Some(&c) = self.src.get(s) else {
            return false;
        };
        match self.pat(p) {
            b'.' => true,
            ESC => match_class(c, self.pat(p + 1)),
            b'[' => self.match_bracket_class(c, p, ep - 1),
            other => other == c,
        }
    }

    /// `c` against the set `[...]` from `p` (the `[`) to `ec` (the `]`).
    fn match_bracket_class(&self, c: u8, mut p: usize, ec: usize) -> bool {
        let mut found = true;
        if self.pat(p + 1) == b'^' {
            found = false;
            p += 1;
        }
        loop {
            p += 1;
            if p >= ec {
                return !found;
            }
            let pc = self.pat(p);
            if pc == ESC {
                p += 1;
                if match_class(c, self.pat(p)) {
                    return found;
                }
            } else if self.pat(p + 1) == b'-' && p + 2 < ec {
                p += 2;
                if pc <= c && c <= self.pat(p) {
                    return found;
                }
            } else if pc == c {
                return found;
            }
        }
    }

    fn match_balance(&mut self, s: usize, p: usize) -> Result<Option<usize>, MatchError> {
        if p + 1 >= self.pat.len() {
            return pattern_error("malformed pattern (missing arguments to '%b')");
        }
        let (open, close) = (self.pat(p), self.pat(p + 1));
        if self.src(s) != open {
            return Ok(None);
        }
        let mut depth = 1u64;
        let mut i = s + 1;
        while i < self.src.len() {
            self.tick(1)?;
            let c = self.src[i];
            if c == close {
                depth -= 1;
                if depth == 0 {
                    return Ok(Some(i + 1));
                }
            } else if c == open {
                depth += 1;
            }
            i += 1;
        }
        Ok(None)
    }

    /// Greedy repetition: as many as possible, then give back one at a time.
    fn max_expand(&mut self, s: usize, p: usize, ep: usize) -> Result<Option<usize>, MatchError> {
        let mut count = 0;
        while self.single_match(s + count, p, ep) {
            count += 1;
            self.tick(1)?;
        }
        loop {
            if let Some(end) = self.do_match(s + count, ep + 1)? {
                return Ok(Some(end));
            }
            if count == 0 {
                return Ok(None);
            }
            count -= 1;
        }
    }

    /// Lazy repetition: as few as possible, then take one more at a time.
    fn min_expand(
        &mut self,
        mut s: usize,
        p: usize,
        ep: usize,
    ) -> Result<Option<usize>, MatchError> {
        loop {
            if let Some(end) = self.do_match(s, ep + 1)? {
                return Ok(Some(end));
            }
            if !self.single_match(s, p, ep) {
                return Ok(None);
            }
            s += 1;
        }
    }

    fn start_capture(
        &mut self,
        s: usize,
        p: usize,
        what: isize,
    ) -> Result<Option<usize>, MatchError> {
        if self.level >= MAX_CAPTURES {
            return pattern_error("too many captures");
        }
        self.captures[self.level] = Slot {
            start: s,
            len: what,
        };
        self.level += 1;
        let result = self.do_match(s, p)?;
        if result.is_none() {
            self.level -= 1;
        }
        Ok(result)
    }

    fn end_capture(&mut self, s: usize, p: usize) -> Result<Option<usize>, MatchError> {
        let Some(l) = (0..self.level)
            .rev()
            .find(|&l| self.captures[l].len == UNFINISHED)
        else {
            return pattern_error("invalid pattern capture");
        };
        self.captures[l].len = isize::try_from(s - self.captures[l].start).unwrap_or(isize::MAX);
        let result = self.do_match(s, p)?;
        if result.is_none() {
            self.captures[l].len = UNFINISHED;
        }
        Ok(result)
    }

    /// A back-reference `%1`..`%9` (`digit` is the ASCII digit).
    fn match_capture(&mut self, s: usize, digit: u8) -> Result<Option<usize>, MatchError> {
        let l = usize::from(digit).wrapping_sub(usize::from(b'1'));
        if l >= self.level || self.captures[l].len == UNFINISHED {
            return pattern_error(format!(
                "invalid capture index %{}",
                i32::from(digit) - i32::from(b'0')
            ));
        }
        let slot = self.captures[l];
        // A position capture has no text; Lua compares with a huge length, which fails.
        let Ok(len) = usize::try_from(slot.len) else {
            return Ok(None);
        };
        self.tick(1 + (len as u64 >> 5))?;
        let wanted = &self.src[slot.start..slot.start + len];
        Ok(self
            .src
            .get(s..s + len)
            .filter(|found| *found == wanted)
            .map(|_| s + len))
    }
}

/// `c` against a class letter (`%a`, `%D`, ...) or, for any other byte, that byte itself.
/// ASCII only, as Lua's `isalpha` & co. in the "C" locale.
fn match_class(c: u8, class: u8) -> bool {
    let result = match class.to_ascii_lowercase() {
        b'a' => c.is_ascii_alphabetic(),
        b'c' => c.is_ascii_control(),
        b'd' => c.is_ascii_digit(),
        b'g' => c.is_ascii_graphic(),
        b'l' => c.is_ascii_lowercase(),
        b'p' => c.is_ascii_punctuation(),
        // C's isspace also counts the vertical tab, which `is_ascii_whitespace` does not.
        b's' => c == b' ' || (b'\t'..=b'\r').contains(&c),
        b'u' => c.is_ascii_uppercase(),
        b'w' => c.is_ascii_alphanumeric(),
        b'x' => c.is_ascii_hexdigit(),
        b'z' => c == 0,
        _ => return class == c,
    };
    if class.is_ascii_lowercase() {
        result
    } else {
        !result
    }
}

/// Does the pattern have no magic characters (so `find` may search for it plainly)?
pub(crate) fn has_no_specials(pat: &[u8]) -> bool {
    // Lua stops at each embedded zero (strpbrk) and goes on after it: the same as looking
    // at every byte.
    !pat.iter().any(|c| SPECIALS.contains(c))
}

/// Plain substring search from `init`, charging the meter for the bytes it looks at.
pub(crate) fn find_plain<M: Meter>(
    src: &[u8],
    needle: &[u8],
    init: usize,
    meter: &mut M,
) -> Result<Option<usize>, MatchError> {
    if needle.is_empty() {
        return Ok(Some(init));
    }
    let Some(last_start) = src.len().checked_sub(needle.len()) else {
        return Ok(None);
    };
    let first = needle[0];
    let compare_cost = 1 + (needle.len() as u64 >> 5);
    let mut pending = 0u64;
    let mut at = init;
    let result = loop {
        if at > last_start {
            break None;
        }
        // Skipping to the next candidate is a fast byte scan: charge it by the 64 bytes.
        let Some(offset) = src[at..=last_start].iter().position(|&c| c == first) else {
            pending += (last_start + 1 - at) as u64 >> 6;
            break None;
        };
        pending += (offset as u64 >> 6) + compare_cost;
        at += offset;
        if src[at..at + needle.len()] == *needle {
            break Some(at);
        }
        at += 1;
        if pending >= CHECK_EVERY {
            if !meter.charge(pending) {
                return Err(MatchError::Stopped);
            }
            pending = 0;
        }
    };
    if pending > 0 && !meter.charge(pending) {
        return Err(MatchError::Stopped);
    }
    Ok(result)
}
