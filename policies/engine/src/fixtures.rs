//! `buzz-relay policy test FIXTURES`: data-driven policy tests.
//!
//! A fixture file is JSON:
//!
//! ```json
//! {
//!   "description": "optional text",
//!   "scripts": {
//!     "default": { "access": "../access.lua", "moderation": "../moderation.lua" }
//!   },
//!   "defaults": { "action": "message", "actor": { "pubkey": "aa..", "community_member": true } },
//!   "cases": [
//!     { "name": "member posts in an open channel", "request": { "channel": { "exists": true } },
//!       "expect": "allow" },
//!     { "name": "guest may not post", "request": { "actor": { "channel_role": "guest" } },
//!       "expect": { "deny": "restricted", "message": "read-only" } }
//!   ]
//! }
//! ```
//!
//! * `scripts`: named script sets; paths are relative to the fixture file. A case uses
//!   `"scripts": "<name>"`, default `"default"`. [`FixtureOptions`] can supply or override
//!   the `default` set.
//! * `defaults`: request facts merged under every case's `request` (objects merge key by
//!   key, recursively; anything else, `null` included, replaces).
//! * A case: `name`, optional `note`, `check` (`"write"`, the default, or `"read"`),
//!   `request` (the fields of [`WriteRequest`] / [`ReadRequest`]; a read ignores `action`
//!   and `event`), `times` (evaluate the request this many times, default 1; every answer
//!   must match) and `expect`: `"allow"`, `"error"` (a [`PolicyError`]) or
//!   `{"deny": kind, "message": "substring", "message_is": "exact text"}` (both message
//!   fields optional).
//! * Cases run in order; each script set has one [`MemoryRateLimiter`] for the whole file,
//!   so `buzz.rate_limit` counts carry over from case to case.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;

use crate::engine::PolicyEngine;
use crate::error::PolicyError;
use crate::facts::{ReadRequest, WriteRequest};
use crate::limits::PolicyLimits;
use crate::rate_limit::MemoryRateLimiter;
use crate::verdict::{DenyKind, Verdict};

/// How to run a fixture file.
#[derive(Debug, Clone, Default)]
pub struct FixtureOptions {
    /// Overrides the `default` set's access script (e.g. the configured one).
    pub access: Option<PathBuf>,
    /// Overrides the `default` set's moderation script.
    pub moderation: Option<PathBuf>,
    pub limits: PolicyLimits,
}

/// The outcome of a fixture file.
#[derive(Debug, Clone)]
pub struct FixtureReport {
    pub path: PathBuf,
    pub cases: Vec<CaseResult>,
}

/// One case's outcome; `expected`/`actual` are human-readable (`allow`,
/// `restricted: channel is private`, `error: ...`).
#[derive(Debug, Clone)]
pub struct CaseResult {
    pub name: String,
    pub passed: bool,
    pub expected: String,
    pub actual: String,
}

impl FixtureReport {
    pub fn passed(&self) -> usize {
        self.cases.iter().filter(|c| c.passed).count()
    }

    pub fn failed(&self) -> usize {
        self.cases.len() - self.passed()
    }

    pub fn is_success(&self) -> bool {
        self.failed() == 0
    }

    pub fn failures(&self) -> impl Iterator<Item = &CaseResult> {
        self.cases.iter().filter(|c| !c.passed)
    }
}

impl fmt::Display for FixtureReport {
    /// One line per case (`ok` / `FAIL` with expected and actual), then a summary line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for case in &self.cases {
            if case.passed {
                writeln!(f, "ok   {}", case.name)?;
            } else {
                writeln!(f, "FAIL {}", case.name)?;
                writeln!(f, "       expected: {}", case.expected)?;
                writeln!(f, "       actual:   {}", case.actual)?;
            }
        }
        write!(
            f,
            "{}: {} passed, {} failed",
            self.path.display(),
            self.passed(),
            self.failed()
        )
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FixtureFile {
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    #[serde(default)]
    scripts: BTreeMap<String, ScriptPaths>,
    #[serde(default)]
    defaults: Value,
    cases: Vec<CaseSpec>,
}

#[derive(Deserialize, Clone)]
#[serde(deny_unknown_fields)]
struct ScriptPaths {
    access: PathBuf,
    moderation: PathBuf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseSpec {
    name: String,
    #[serde(default)]
    #[allow(dead_code)]
    note: Option<String>,
    #[serde(default = "default_set")]
    scripts: String,
    #[serde(default)]
    check: CheckKind,
    #[serde(default = "one")]
    times: u32,
    #[serde(default)]
    request: Value,
    expect: Expect,
}

fn default_set() -> String {
    "default".to_owned()
}

fn one() -> u32 {
    1
}

#[derive(Deserialize, Default, Clone, Copy)]
#[serde(rename_all = "lowercase")]
enum CheckKind {
    #[default]
    Write,
    Read,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Expect {
    Word(ExpectWord),
    Deny(ExpectDeny),
}

#[derive(Deserialize)]
#[serde(rename_all = "lowercase")]
enum ExpectWord {
    Allow,
    Error,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectDeny {
    deny: DenyKind,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    message_is: Option<String>,
}

impl Expect {
    fn matches(&self, actual: &Result<Verdict, PolicyError>) -> bool {
        match (self, actual) {
            (Expect::Word(ExpectWord::Allow), Ok(Verdict::Allow)) => true,
            (Expect::Word(ExpectWord::Error), Err(_)) => true,
            (Expect::Deny(want), Ok(Verdict::Deny { kind, message })) => {
                want.deny == *kind
                    && want.message.as_deref().is_none_or(|m| message.contains(m))
                    && want.message_is.as_deref().is_none_or(|m| message == m)
            }
            _ => false,
        }
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::Word(ExpectWord::Allow) => f.write_str("allow"),
            Expect::Word(ExpectWord::Error) => f.write_str("error: (any policy failure)"),
            Expect::Deny(d) => {
                write!(f, "{}", d.deny)?;
                if let Some(m) = &d.message_is {
                    write!(f, ": {m:?}")?;
                }
                if let Some(m) = &d.message {
                    write!(f, " (message containing {m:?})")?;
                }
                Ok(())
            }
        }
    }
}

fn describe(actual: &Result<Verdict, PolicyError>) -> String {
    match actual {
        Ok(verdict) => verdict.to_string(),
        Err(err) => format!("error: {err}"),
    }
}

/// Runs every case of the fixture file at `path`. `Err` means the file or a script set could
/// not be loaded; failing cases are reported in the [`FixtureReport`].
pub fn run_fixtures(path: &Path, options: &FixtureOptions) -> Result<FixtureReport, PolicyError> {
    let fixture_error = |message: String| PolicyError::Fixture {
        path: path.to_owned(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fixture_error(e.to_string()))?;
    let file: FixtureFile =
        serde_json::from_str(&text).map_err(|e| fixture_error(e.to_string()))?;
    let base_dir = path.parent().unwrap_or_else(|| Path::new("."));

    let mut sets: HashMap<String, ScriptPaths> = file
        .scripts
        .into_iter()
        .map(|(name, paths)| {
            let resolved = ScriptPaths {
                access: base_dir.join(paths.access),
                moderation: base_dir.join(paths.moderation),
            };
            (name, resolved)
        })
        .collect();
    apply_overrides(&mut sets, options).map_err(fixture_error)?;

    let mut engines: HashMap<String, PolicyEngine> = HashMap::new();
    let mut results = Vec::with_capacity(file.cases.len());
    for case in &file.cases {
        if !engines.contains_key(&case.scripts) {
            let paths = sets.get(&case.scripts).ok_or_else(|| {
                fixture_error(format!(
                    "case {:?} uses the script set {:?}, which is not defined",
                    case.name, case.scripts
                ))
            })?;
            let engine = PolicyEngine::load(
                &paths.access,
                &paths.moderation,
                options.limits,
                Arc::new(MemoryRateLimiter::new()),
            )?;
            engines.insert(case.scripts.clone(), engine);
        }
        let Some(engine) = engines.get(&case.scripts) else {
            continue;
        };
        let mut request = file.defaults.clone();
        merge(&mut request, &case.request);
        let request = if request.is_null() {
            Value::Object(serde_json::Map::new())
        } else {
            request
        };
        results.push(run_case(engine, case, request));
    }
    Ok(FixtureReport {
        path: path.to_owned(),
        cases: results,
    })
}

fn apply_overrides(
    sets: &mut HashMap<String, ScriptPaths>,
    options: &FixtureOptions,
) -> Result<(), String> {
    if options.access.is_none() && options.moderation.is_none() {
        return Ok(());
    }
    let existing = sets.get("default").cloned();
    let access = options
        .access
        .clone()
        .or_else(|| existing.as_ref().map(|s| s.access.clone()));
    let moderation = options
        .moderation
        .clone()
        .or_else(|| existing.as_ref().map(|s| s.moderation.clone()));
    match (access, moderation) {
        (Some(access), Some(moderation)) => {
            sets.insert("default".to_owned(), ScriptPaths { access, moderation });
            Ok(())
        }
        _ => Err("the default script set needs both an access and a moderation script".to_owned()),
    }
}

fn run_case(engine: &PolicyEngine, case: &CaseSpec, request: Value) -> CaseResult {
    let result = |passed: bool, actual: String| CaseResult {
        name: case.name.clone(),
        passed,
        expected: case.expect.to_string(),
        actual,
    };
    let check: Box<dyn Fn() -> Result<Verdict, PolicyError>> = match case.check {
        CheckKind::Write => match serde_json::from_value::<WriteRequest>(request) {
            Ok(req) => Box::new(move || engine.check_write(&req)),
            Err(e) => return result(false, format!("bad request facts: {e}")),
        },
        CheckKind::Read => {
            let mut request = request;
            if let Value::Object(map) = &mut request {
                map.remove("action");
                map.remove("event");
            }
            match serde_json::from_value::<ReadRequest>(request) {
                Ok(req) => Box::new(move || engine.check_read(&req)),
                Err(e) => return result(false, format!("bad request facts: {e}")),
            }
        }
    };
    let times = case.times.max(1);
    for i in 1..=times {
        let actual = check();
        if !case.expect.matches(&actual) {
            let mut text = describe(&actual);
            if times > 1 {
                text = format!("{text} (evaluation {i} of {times})");
            }
            return result(false, text);
        }
        if i == times {
            return result(true, describe(&actual));
        }
    }
    result(false, "not evaluated".to_owned())
}

/// Merges `overlay` into `base`: objects key by key (recursively), anything else replaces.
fn merge(base: &mut Value, overlay: &Value) {
    match (base, overlay) {
        (Value::Object(base), Value::Object(overlay)) => {
            for (key, value) in overlay {
                match base.get_mut(key) {
                    Some(slot) if slot.is_object() && value.is_object() => merge(slot, value),
                    _ => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (base, Value::Null) if base.is_object() => {}
        (base, overlay) => *base = overlay.clone(),
    }
}
