//! One sandboxed Lua state: the library allow-list, frozen globals, the `buzz` host table,
//! the instruction and memory limits, and calling an entry point into a [`Verdict`].
//!
//! Layout of a script's globals: the chunk runs with its own environment table `env`. While
//! the main chunk runs, writes land in `env`; afterwards everything it defined is moved into
//! a private `globals` table, `env` is emptied and given a protected metatable that reads
//! through to `globals` and raises an error on any write. `_G` is `env`, so `_G.x = 1` is
//! refused too, and nothing can reach the real global table of the state.

use std::sync::Arc;

use mlua::chunk::ChunkMode;
use mlua::state::{GcGenParams, GcMode};
use mlua::{Function, Lua, LuaOptions, MultiValue, StdLib, Table, Value};

use crate::budget::{CallCtx, Stop};
use crate::error::PolicyError;
use crate::facts::{ReadRequest, WriteRequest};
use crate::limits::PolicyLimits;
use crate::rate_limit::RateLimiter;
use crate::req;
use crate::strlib;
use crate::verdict::{DenyKind, Verdict};

const PRELUDE: &str = include_str!("prelude.lua");

/// Name used in errors for the main chunk of a script.
pub(crate) const MAIN_CHUNK: &str = "main chunk";
/// Script and entry names used in errors while building `req` (e.g. out of memory).
const REQUEST: &str = "(request)";
const BUILDING_REQ: &str = "building req";

/// Field order matters: Lua values are dropped before the state that owns them (`lua`).
pub(crate) struct Sandbox {
    ctx: Arc<CallCtx>,
    limits: PolicyLimits,
    /// Allow-listed globals each script's `globals` starts from.
    base: Table,
    /// `make_buzz(log, now, rate_limit)` from the prelude.
    make_buzz: Function,
    now_fn: Function,
    rate_limit_fn: Function,
    /// The prelude's `req` constructors and the views kept for reuse.
    views: req::RequestViews,
    frozen_global_error: Function,
    /// What `buzz.allow()` returns (one shared read-only table): a verdict that is this
    /// table needs no field reads.
    allow: Table,
    lua: Lua,
}

/// A script loaded into a [`Sandbox`].
pub(crate) struct LoadedScript {
    pub(crate) label: String,
    /// What the script defined, plus the allow-listed globals.
    globals: Table,
}

impl Sandbox {
    pub(crate) fn new(
        limits: PolicyLimits,
        limiter: Arc<dyn RateLimiter>,
    ) -> Result<Sandbox, PolicyError> {
        Sandbox::build(limits, limiter).map_err(|e| PolicyError::Sandbox {
            source: Box::new(e),
        })
    }

    fn build(limits: PolicyLimits, limiter: Arc<dyn RateLimiter>) -> mlua::Result<Sandbox> {
        let lua = Lua::new_with(
            StdLib::STRING | StdLib::TABLE | StdLib::MATH | StdLib::UTF8,
            LuaOptions::default(),
        )?;
        let ctx = CallCtx::new(limits.instruction_budget);
        let prelude: Table = lua
            .load(PRELUDE)
            .set_name("=buzz-prelude")
            .set_mode(ChunkMode::Text)
            .eval()?;

        let now_ctx = Arc::clone(&ctx);
        let now_fn = lua.create_function(move |_, ()| Ok(now_ctx.now()))?;

        let limit_ctx = Arc::clone(&ctx);
        let rate_limit_fn =
            lua.create_function(move |_, (key, limit, window): (String, u64, u64)| {
                if window == 0 {
                    return Err(mlua::Error::RuntimeError(
                        "buzz.rate_limit: window_secs must be at least 1".to_owned(),
                    ));
                }
                match limiter.hit(&key, limit, window) {
                    Ok(within) => Ok(within),
                    Err(message) => {
                        limit_ctx.set_limiter_error(message.clone());
                        Err(mlua::Error::RuntimeError(format!(
                            "buzz.rate_limit: {message}"
                        )))
                    }
                }
            })?;

        // `#view` and `pairs(view)` of the read-only request tables. The iterator takes the
        // view, not its backing table, as its state: the backing table is writable and must
        // never reach a script.
        let view_len = lua.create_function(|_, view: Table| Ok(backing_of(&view)?.raw_len()))?;
        let next: Function = lua.globals().raw_get("next")?;
        let view_next = lua.create_function(move |_, (view, key): (Table, Value)| {
            next.call::<MultiValue>((backing_of(&view)?, key))
        })?;
        let view_pairs =
            lua.create_function(move |_, view: Table| Ok((view_next.clone(), view, Value::Nil)))?;
        let stopped_ctx = Arc::clone(&ctx);
        let stopped = lua.create_function(move |_, ()| Ok(stopped_ctx.stopped().is_some()))?;
        prelude
            .raw_get::<Function>("set_host_functions")?
            .call::<()>((view_len, view_pairs, stopped))?;
        // The pattern functions, also behind the string methods (`s:find`): the string
        // metatable's `__index` is this table.
        let string: Table = lua.globals().raw_get("string")?;
        strlib::install(&lua, &string, &ctx, limits.memory_bytes)?;

        let sandbox = Sandbox {
            base: prelude.raw_get("base")?,
            make_buzz: prelude.raw_get("make_buzz")?,
            views: req::RequestViews::from_prelude(&prelude)?,
            frozen_global_error: prelude.raw_get("frozen_global_error")?,
            allow: prelude.raw_get("allow")?,
            now_fn,
            rate_limit_fn,
            ctx,
            limits,
            lua,
        };
        // Each check makes a handful of short-lived tables: the young generation is cheap.
        sandbox
            .lua
            .gc_set_mode(GcMode::Generational(GcGenParams::default()));
        sandbox.lua.set_memory_limit(limits.memory_bytes)?;
        Ok(sandbox)
    }

    /// Compiles and runs a script's main chunk (under the limits), then freezes its globals.
    pub(crate) fn load(&self, label: &str, source: &str) -> Result<LoadedScript, PolicyError> {
        let load_error = |source| PolicyError::Load {
            script: label.to_owned(),
            source: Box::new(source),
        };
        self.ctx
            .begin(&self.lua, 0, self.limits.load_timeout)
            .map_err(load_error)?;
        let (globals, env) = self.script_tables(label).map_err(load_error)?;
        let run = self
            .lua
            .load(source)
            .set_name(format!("@{label}"))
            .set_mode(ChunkMode::Text)
            .set_environment(env.clone())
            .exec();
        if let Err(err) = run {
            return Err(match self.failure(label, MAIN_CHUNK, err) {
                PolicyError::Runtime { source, .. } => PolicyError::Load {
                    script: label.to_owned(),
                    source,
                },
                other => other,
            });
        }
        self.freeze_globals(&globals, &env).map_err(load_error)?;
        Ok(LoadedScript {
            label: label.to_owned(),
            globals,
        })
    }

    fn script_tables(&self, label: &str) -> mlua::Result<(Table, Table)> {
        let globals = self.lua.create_table()?;
        self.base
            .for_each(|k: Value, v: Value| globals.raw_set(k, v))?;
        let log = self.log_fn(label)?;
        let buzz: Table =
            self.make_buzz
                .call((log, self.now_fn.clone(), self.rate_limit_fn.clone()))?;
        globals.raw_set("buzz", buzz)?;
        let env = self.lua.create_table()?;
        let load_meta = self.lua.create_table()?;
        load_meta.raw_set("__index", &globals)?;
        // Protected already while loading, so the chunk cannot grab `globals` through it.
        load_meta.raw_set("__metatable", false)?;
        env.set_metatable(Some(load_meta))?;
        globals.raw_set("_G", &env)?;
        Ok((globals, env))
    }

    fn freeze_globals(&self, globals: &Table, env: &Table) -> mlua::Result<()> {
        let mut defined = Vec::new();
        env.for_each(|k: Value, v: Value| {
            defined.push((k, v));
            Ok(())
        })?;
        for (k, v) in defined {
            globals.raw_set(k, v)?;
        }
        env.clear()?;
        let meta = self.lua.create_table_with_capacity(0, 3)?;
        meta.raw_set("__index", globals)?;
        meta.raw_set("__newindex", &self.frozen_global_error)?;
        meta.raw_set("__metatable", false)?;
        env.set_metatable(Some(meta))
    }

    fn log_fn(&self, label: &str) -> mlua::Result<Function> {
        let script = label.to_owned();
        self.lua
            .create_function(move |_, (level, message): (String, String)| {
                match level.as_str() {
                    "error" => tracing::error!(target: "buzz_policy::script", script = %script, "{message}"),
                    "warn" => tracing::warn!(target: "buzz_policy::script", script = %script, "{message}"),
                    "info" => tracing::info!(target: "buzz_policy::script", script = %script, "{message}"),
                    "debug" => tracing::debug!(target: "buzz_policy::script", script = %script, "{message}"),
                    "trace" => tracing::trace!(target: "buzz_policy::script", script = %script, "{message}"),
                    other => {
                        return Err(mlua::Error::RuntimeError(format!(
                            "buzz.log: unknown level {other:?} (expected error, warn, info, debug or trace)"
                        )))
                    }
                }
                Ok(())
            })
    }

    /// The entry point `name` of `script`, if defined. Anything but a function is an error.
    pub(crate) fn entry(
        &self,
        script: &LoadedScript,
        name: &str,
    ) -> Result<Option<Function>, PolicyError> {
        let value: Value = script
            .globals
            .raw_get(name)
            .map_err(|source| PolicyError::Load {
                script: script.label.clone(),
                source: Box::new(source),
            })?;
        match value {
            Value::Nil => Ok(None),
            Value::Function(f) => Ok(Some(f)),
            other => Err(PolicyError::BadEntryPoint {
                script: script.label.clone(),
                name: name.to_owned(),
                found: other.type_name().to_owned(),
            }),
        }
    }

    /// Starts one check: full instruction budget, a fresh deadline, the request's clock.
    pub(crate) fn begin(&self, now: i64) -> Result<(), PolicyError> {
        self.ctx
            .begin(&self.lua, now, self.limits.call_timeout)
            .map_err(|source| PolicyError::Sandbox {
                source: Box::new(source),
            })
    }

    /// Builds a request table. mlua runs every allocating API call in protected mode while a
    /// memory limit is set (a Lua `pcall` per field); host-built data is trusted, so the limit
    /// is lifted while building and the result is checked against it afterwards.
    pub(crate) fn write_req(
        &self,
        request: &WriteRequest,
        tags_of: &Function,
    ) -> Result<Table, PolicyError> {
        self.build_request(|| self.views.write_req(request, tags_of))
    }

    /// Run `check` with `tags_of`, the function that answers `request`'s tags to the
    /// prelude. It borrows the request, so it only lives for this check: a script that
    /// kept `req` and reads its tags in a later call gets an error, not another event's
    /// tags.
    pub(crate) fn with_tags<R>(
        &self,
        request: &WriteRequest,
        check: impl FnOnce(&Function) -> Result<R, PolicyError>,
    ) -> Result<R, PolicyError> {
        let scoped = self.lua.scope(|scope| {
            let tags_of = scope.create_function(|_, ()| Ok(req::tags_of(&request.event.tags)))?;
            Ok(check(&tags_of))
        });
        scoped.map_err(|source| PolicyError::Sandbox {
            source: Box::new(source),
        })?
    }

    pub(crate) fn read_req(&self, request: &ReadRequest) -> Result<Table, PolicyError> {
        self.build_request(|| self.views.read_req(request))
    }

    fn build_request(
        &self,
        build: impl FnOnce() -> mlua::Result<Table>,
    ) -> Result<Table, PolicyError> {
        let sandbox_error = |source| PolicyError::Sandbox {
            source: Box::new(source),
        };
        self.lua.set_memory_limit(0).map_err(sandbox_error)?;
        let built = build();
        self.lua
            .set_memory_limit(self.limits.memory_bytes)
            .map_err(sandbox_error)?;
        let table = built.map_err(|e| self.failure(REQUEST, BUILDING_REQ, e))?;
        // Views kept for reuse never take the scripts' room: past half the limit they go.
        if self.lua.used_memory() > self.limits.memory_bytes / 2 {
            self.views.forget();
        }
        if self.lua.used_memory() > self.limits.memory_bytes {
            // Part of it may be garbage of earlier checks: collect before refusing.
            let _ = self.lua.gc_collect();
        }
        if self.lua.used_memory() > self.limits.memory_bytes {
            return Err(PolicyError::MemoryExceeded {
                script: REQUEST.to_owned(),
                entry: BUILDING_REQ,
                limit: self.limits.memory_bytes,
                source: Box::new(mlua::Error::MemoryError(format!(
                    "the request needs {} bytes of Lua memory",
                    self.lua.used_memory()
                ))),
            });
        }
        // Building ran under the instruction hook; the scripts get the full budget.
        self.ctx.reset_budget();
        Ok(table)
    }

    /// Calls one entry point with `req` and turns its return value into a verdict.
    pub(crate) fn call(
        &self,
        script: &str,
        entry: &'static str,
        function: &Function,
        req: &Table,
    ) -> Result<Verdict, PolicyError> {
        let result = function.call::<Value>(req);
        if let Some(message) = self.ctx.take_limiter_error() {
            return Err(PolicyError::RateLimiter {
                script: script.to_owned(),
                entry,
                message,
            });
        }
        if let Some(stop) = self.ctx.stopped() {
            return Err(self.deadline(script, entry, stop));
        }
        match result {
            Ok(Value::Table(table)) if table == self.allow => Ok(Verdict::Allow),
            Ok(value) => parse_verdict(&value).map_err(|found| PolicyError::BadReturn {
                script: script.to_owned(),
                entry,
                found,
            }),
            Err(err) => Err(self.failure(script, entry, err)),
        }
    }

    /// Classifies a Lua error raised while running `entry` of `script`.
    pub(crate) fn failure(
        &self,
        script: &str,
        entry: &'static str,
        err: mlua::Error,
    ) -> PolicyError {
        if let Some(message) = self.ctx.take_limiter_error() {
            return PolicyError::RateLimiter {
                script: script.to_owned(),
                entry,
                message,
            };
        }
        if let Some(stop) = self.ctx.stopped() {
            return self.deadline(script, entry, stop);
        }
        if is_memory_error(&err) {
            return PolicyError::MemoryExceeded {
                script: script.to_owned(),
                entry,
                limit: self.limits.memory_bytes,
                source: Box::new(err),
            };
        }
        PolicyError::Runtime {
            script: script.to_owned(),
            entry,
            source: Box::new(err),
        }
    }

    fn deadline(&self, script: &str, entry: &'static str, stop: Stop) -> PolicyError {
        match stop {
            Stop::Budget => PolicyError::DeadlineExceeded {
                script: script.to_owned(),
                entry,
                budget: self.ctx.budget(),
            },
            Stop::Time => PolicyError::TimeLimitExceeded {
                script: script.to_owned(),
                entry,
                limit: self.ctx.timeout(),
            },
        }
    }
}

/// The table a read-only view (the prelude's `view`) reads from.
fn backing_of(view: &Table) -> mlua::Result<Table> {
    match view.metatable() {
        Some(meta) => meta.raw_get("__index"),
        None => Ok(view.clone()),
    }
}

fn is_memory_error(err: &mlua::Error) -> bool {
    match err {
        mlua::Error::MemoryError(_) => true,
        mlua::Error::CallbackError { cause, .. } | mlua::Error::WithContext { cause, .. } => {
            is_memory_error(cause)
        }
        _ => false,
    }
}

/// `buzz.allow()` → `{allow = true}`; `buzz.deny(kind, msg)` → `{deny = kind, message = msg}`.
/// Returns a description of anything else.
fn parse_verdict(value: &Value) -> Result<Verdict, String> {
    let Value::Table(table) = value else {
        return Err(describe(value));
    };
    let allow: Value = table
        .get("allow")
        .map_err(|e| format!("an unreadable table ({e})"))?;
    let deny: Value = table
        .get("deny")
        .map_err(|e| format!("an unreadable table ({e})"))?;
    match (allow, deny) {
        (Value::Boolean(true), Value::Nil) => Ok(Verdict::Allow),
        (Value::Nil | Value::Boolean(false), Value::String(kind)) => {
            let kind = kind
                .to_str()
                .map_err(|_| "a deny kind that is not UTF-8".to_owned())?;
            let kind: DenyKind = kind.parse().map_err(|e| format!("a table with {e}"))?;
            let message = match table.get::<Value>("message") {
                Ok(Value::Nil) => "denied by policy".to_owned(),
                Ok(Value::String(s)) => s.to_string_lossy(),
                Ok(other) => return Err(format!("a deny message of type {}", other.type_name())),
                Err(e) => return Err(format!("an unreadable table ({e})")),
            };
            Ok(Verdict::Deny { kind, message })
        }
        _ => Err(
            "a table that is neither {allow = true} nor {deny = kind, message = ...}".to_owned(),
        ),
    }
}

fn describe(value: &Value) -> String {
    match value {
        Value::Nil => "nothing (nil)".to_owned(),
        Value::String(s) => {
            let text = s.to_string_lossy();
            let short: String = text.chars().take(40).collect();
            format!("the string {short:?}")
        }
        Value::Boolean(b) => format!("the boolean {b}"),
        other => format!("a {}", other.type_name()),
    }
}
