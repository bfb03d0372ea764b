//! Buzz policy engine: sandboxed Lua rulebooks that decide who may read and write.
//!
//! Core computes read-only facts in Rust ([`WriteRequest`], [`ReadRequest`]) and asks the
//! [`PolicyEngine`] for a [`Verdict`]. The verdict comes from two scripts:
//! `moderation.lua` (`moderate(req)`, runs first on every write) and `access.lua`
//! (`can_write(req)`, `can_read(req)`). Any failure — a script error, a bad return value,
//! the instruction budget, the time limit or the memory limit, an unreachable rate limiter — is an
//! `Err(`[`PolicyError`]`)`, never an allow; core answers `error: policy failure`.
//!
//! The script API is modelled on Redis scripting: only the `string`, `table`, `math` and
//! `utf8` libraries, globals frozen after load, one host table `buzz`, an instruction-count
//! deadline `pcall` cannot catch. On top of that, every check and every script load is
//! bounded in wall-clock time ([`PolicyLimits::call_timeout`], [`PolicyLimits::load_timeout`]),
//! including pattern matching, which runs in a stoppable Rust matcher instead of Lua's C one.
//! See `policies/README.md` for the script author's view.
//!
//! Layout (one concern per file):
//! - `facts.rs` — the request structs; `verdict.rs` — [`Verdict`], [`DenyKind`];
//!   `error.rs` — [`PolicyError`]; `limits.rs` — [`PolicyLimits`].
//! - `sandbox.rs` (+ `prelude.lua`) — one Lua state: allow-list, frozen globals, `buzz.*`,
//!   calling an entry point; `budget.rs` — the instruction hook, budget and wall-clock
//!   deadline; `req.rs` — facts → `req`.
//! - `pattern.rs` — Lua 5.4 pattern matching in Rust, metered and stoppable; `strlib.rs` —
//!   `string.find/match/gmatch/gsub` built on it, replacing Lua's C versions.
//! - `rulebook.rs` — both scripts loaded into one sandbox; `engine.rs` — [`PolicyEngine`]:
//!   per-thread rulebooks, reload, watcher.
//! - `rate_limit.rs` / `redis_limiter.rs` — [`RateLimiter`] and its two implementations.
//! - `check.rs` / `fixtures.rs` — `buzz-relay policy check|test`.
//!
//! **Architecture Invariant:** this crate knows nothing of core (core depends on it), of
//! storage or of the wire; scripts see only the facts they are handed and `buzz.*`.

mod budget;
mod check;
mod engine;
mod error;
mod facts;
mod fixtures;
mod limits;
mod pattern;
mod rate_limit;
mod redis_limiter;
mod req;
mod rulebook;
mod sandbox;
mod shadow;
mod strlib;
mod verdict;

pub use check::{check_script, origin_entry_points, script_entry_points, ENTRY_POINTS};
pub use engine::{PolicyEngine, ScriptOrigin};
pub use error::PolicyError;
pub use facts::{
    Action, ActorFacts, ChannelFacts, CommunityFacts, EventFacts, ReadRequest, WriteRequest,
};
pub use fixtures::{run_fixtures, CaseResult, FixtureOptions, FixtureReport};
pub use limits::PolicyLimits;
pub use rate_limit::{MemoryRateLimiter, RateLimiter};
pub use redis_limiter::RedisRateLimiter;
pub use shadow::ShadowCounts;
pub use verdict::{DenyKind, UnknownDenyKind, Verdict};
