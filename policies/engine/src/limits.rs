//! Per-check resource limits, enforced like Redis scripting enforces its deadline.

use std::time::Duration;

/// Limits applied to every policy Lua state.
///
/// Construct with `..PolicyLimits::default()` for the fields you do not set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyLimits {
    /// Lua VM instructions one check may execute (`moderate` + `can_write` together, or
    /// `can_read`; also each script's main chunk at load). Counted by an instruction hook;
    /// once spent, every further instruction raises an error, so `pcall` cannot swallow it.
    /// Pattern matching (`string.find`, `match`, `gmatch`, `gsub`) counts one instruction
    /// per matcher step.
    pub instruction_budget: u64,
    /// Bytes one Lua state may allocate (both scripts, the libraries and the request).
    pub memory_bytes: usize,
    /// Wall-clock time one check may take (`moderate` + `can_write` together, or
    /// `can_read`). Checked by the same hook as the budget and inside pattern matching; a
    /// check over it fails with [`crate::PolicyError::TimeLimitExceeded`]. It bounds what
    /// the budget does not count (single instructions working on megabytes, a busy host),
    /// so the relay's worker threads are never held for long.
    pub call_timeout: Duration,
    /// Wall-clock time running one script's main chunk may take (at load, reload, on each
    /// thread's first check after a (re)load, and in `policy check`).
    pub load_timeout: Duration,
}

impl PolicyLimits {
    pub const DEFAULT_INSTRUCTION_BUDGET: u64 = 1_000_000;
    pub const DEFAULT_MEMORY_BYTES: usize = 8 * 1024 * 1024;
    /// 50 ms: thousands of times what the default scripts need (about 16 µs per write).
    pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_millis(50);
    /// 1 s: a main chunk normally only defines functions and constants.
    pub const DEFAULT_LOAD_TIMEOUT: Duration = Duration::from_secs(1);
}

impl Default for PolicyLimits {
    fn default() -> PolicyLimits {
        PolicyLimits {
            instruction_budget: PolicyLimits::DEFAULT_INSTRUCTION_BUDGET,
            memory_bytes: PolicyLimits::DEFAULT_MEMORY_BYTES,
            call_timeout: PolicyLimits::DEFAULT_CALL_TIMEOUT,
            load_timeout: PolicyLimits::DEFAULT_LOAD_TIMEOUT,
        }
    }
}
