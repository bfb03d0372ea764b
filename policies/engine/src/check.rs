//! `buzz-relay policy check FILE`: load one script in the sandbox and list its entry points.

use std::path::Path;
use std::sync::Arc;

use crate::engine::ScriptOrigin;
use crate::error::PolicyError;
use crate::limits::PolicyLimits;
use crate::rate_limit::MemoryRateLimiter;
use crate::sandbox::Sandbox;

/// The entry points a script may define.
pub const ENTRY_POINTS: [&str; 3] = ["can_read", "can_write", "moderate"];

/// Loads `path` in the sandbox (default limits) and verifies it defines at least one of
/// [`ENTRY_POINTS`] as a function.
pub fn check_script(path: &Path) -> Result<(), PolicyError> {
    script_entry_points(path).map(|_| ())
}

/// Like [`check_script`], returning the entry points the script defines.
pub fn script_entry_points(path: &Path) -> Result<Vec<&'static str>, PolicyError> {
    origin_entry_points(&ScriptOrigin::File(path.to_owned()))
}

/// The entry points of a script from a file or compiled in (`buzz-admin` shows both).
pub fn origin_entry_points(origin: &ScriptOrigin) -> Result<Vec<&'static str>, PolicyError> {
    let source = origin.source()?;
    let (label, text) = (source.label, source.text);
    let sandbox = Sandbox::new(PolicyLimits::default(), Arc::new(MemoryRateLimiter::new()))?;
    let script = sandbox.load(&label, &text)?;
    let mut found = Vec::new();
    for name in ENTRY_POINTS {
        if sandbox.entry(&script, name)?.is_some() {
            found.push(name);
        }
    }
    if found.is_empty() {
        return Err(PolicyError::NoEntryPoint { script: label });
    }
    Ok(found)
}
