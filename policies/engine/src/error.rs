//! Every way a policy check can fail. Core turns any of these into the wire text
//! `error: policy failure` (fail closed) and logs the Display form, which carries the cause.

use std::path::PathBuf;

/// A policy failure. Never a verdict: a check that fails is neither allowed nor denied by
/// a rule, and the caller must refuse the request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// A script file could not be read.
    #[error("cannot read policy script {script}: {cause}")]
    Read {
        script: String,
        /// In the message, not a `#[source]`: a cause chain would print it twice.
        cause: std::io::Error,
    },

    /// A script did not compile, or its main chunk raised an error.
    #[error("cannot load policy script {script}: {source}")]
    Load {
        script: String,
        #[source]
        source: Box<mlua::Error>,
    },

    /// `check_script` found none of `can_read`, `can_write`, `moderate`.
    #[error("policy script {script} defines no entry point (expected at least one of can_read, can_write, moderate)")]
    NoEntryPoint { script: String },

    /// An access script (the file that decides reads) with neither `can_read` nor
    /// `can_write`: every private channel would be open to everyone, so it is refused.
    #[error("policy script {script} is in the access slot but defines neither can_read nor can_write (a moderation script belongs in the moderation slot; to allow everything, say so: function can_read(req) return buzz.allow() end)")]
    AccessWithoutRules { script: String },

    /// A reload whose file defines none of its entry points while the file in force does.
    #[error("policy reload refused: {script} no longer defines any entry point (a file caught half-written looks like this; restart the relay to run it without rules)")]
    ReloadDropsAllRules { script: String },

    /// An entry point name is bound to something that is not a function.
    #[error("policy script {script}: `{name}` must be a function, found a {found}")]
    BadEntryPoint {
        script: String,
        name: String,
        found: String,
    },

    /// An entry point (or the main chunk) raised a Lua error.
    #[error("policy script {script}: {entry} failed: {source}")]
    Runtime {
        script: String,
        entry: &'static str,
        #[source]
        source: Box<mlua::Error>,
    },

    /// The instruction budget ran out (an endless or too expensive script).
    #[error(
        "policy script {script}: {entry} exceeded the instruction budget of {budget} instructions"
    )]
    DeadlineExceeded {
        script: String,
        entry: &'static str,
        budget: u64,
    },

    /// The wall-clock limit of one check (`PolicyLimits::call_timeout`) or of running a
    /// script's main chunk (`PolicyLimits::load_timeout`) ran out. Like the instruction
    /// budget, `pcall` cannot catch it; it also covers time spent in pattern matching.
    #[error("policy script {script}: {entry} exceeded its time limit of {limit:?}")]
    TimeLimitExceeded {
        script: String,
        entry: &'static str,
        limit: std::time::Duration,
    },

    /// The Lua state's memory limit was hit and the script did not recover.
    #[error(
        "policy script {script}: {entry} exceeded the memory limit of {limit} bytes: {source}"
    )]
    MemoryExceeded {
        script: String,
        entry: &'static str,
        limit: usize,
        #[source]
        source: Box<mlua::Error>,
    },

    /// The entry point returned something other than `buzz.allow()` / `buzz.deny(..)`.
    #[error("policy script {script}: {entry} returned {found}; expected buzz.allow() or buzz.deny(kind, message)")]
    BadReturn {
        script: String,
        entry: &'static str,
        found: String,
    },

    /// `buzz.rate_limit` could not reach its backend. Reported even if the script caught
    /// the Lua error with `pcall`: a rate limit that cannot be checked fails closed.
    #[error("policy script {script}: {entry}: rate limiter failed: {message}")]
    RateLimiter {
        script: String,
        entry: &'static str,
        message: String,
    },

    /// The Lua state itself could not be set up.
    #[error("cannot set up the Lua sandbox: {source}")]
    Sandbox {
        #[source]
        source: Box<mlua::Error>,
    },

    /// A worker thread (shadow mode) could not be started.
    #[error("cannot start a policy thread: {0}")]
    Thread(std::io::Error),

    /// A fixture file could not be read or parsed.
    #[error("fixture file {}: {message}", path.display())]
    Fixture { path: PathBuf, message: String },
}
