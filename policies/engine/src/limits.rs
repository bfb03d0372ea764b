//! Per-check resource limits, enforced like Redis scripting enforces its deadline.

/// Limits applied to every policy Lua state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicyLimits {
    /// Lua VM instructions one check may execute (`moderate` + `can_write` together, or
    /// `can_read`; also each script's main chunk at load). Counted by an instruction hook;
    /// once spent, every further instruction raises an error, so `pcall` cannot swallow it.
    /// Time spent inside one C library call (e.g. a single `string.find`) is not counted.
    pub instruction_budget: u64,
    /// Bytes one Lua state may allocate (both scripts, the libraries and the request).
    pub memory_bytes: usize,
}

impl PolicyLimits {
    pub const DEFAULT_INSTRUCTION_BUDGET: u64 = 1_000_000;
    pub const DEFAULT_MEMORY_BYTES: usize = 8 * 1024 * 1024;
}

impl Default for PolicyLimits {
    fn default() -> PolicyLimits {
        PolicyLimits {
            instruction_budget: PolicyLimits::DEFAULT_INSTRUCTION_BUDGET,
            memory_bytes: PolicyLimits::DEFAULT_MEMORY_BYTES,
        }
    }
}
