//! The per-state call context: the instruction budget (deadline), the request clock seen by
//! `buzz.now()`, and failures that must fail the check even if the script caught them.
//!
//! The deadline follows Redis scripting: a count hook fires every `step` VM instructions and
//! subtracts `step` from the budget. Once the budget is spent the hook is switched to fire on
//! *every* instruction and errors each time, so a script that catches the error with `pcall`
//! cannot execute a single further instruction: the error climbs out of every `pcall` until it
//! reaches the host.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use mlua::{HookTriggers, Lua, VmState};

/// Shared between the sandbox and the Rust closures installed in its Lua state. Only ever
/// touched by the thread that owns the state; atomics make it `Send` for mlua's `send`
/// feature, at the cost of an uncontended atomic op per hook.
#[derive(Debug)]
pub(crate) struct CallCtx {
    budget: u64,
    /// Instructions between two hook calls while the budget lasts.
    step: u32,
    remaining: AtomicI64,
    /// The budget ran out during the current check.
    exhausted: AtomicBool,
    /// The hook counts every `step` instructions (false after exhaustion switched it to
    /// every instruction; `begin` switches it back).
    stepping: AtomicBool,
    /// `req.now` of the current check, returned by `buzz.now()`.
    now: AtomicI64,
    /// Set by `buzz.rate_limit` when the limiter failed (fail closed even if caught).
    limiter_error: Mutex<Option<String>>,
}

const DEADLINE_MESSAGE: &str = "policy instruction budget exhausted";

impl CallCtx {
    pub(crate) fn new(budget: u64) -> Arc<CallCtx> {
        let budget = budget.max(1);
        let step = (budget / 100).clamp(1, 1000) as u32;
        Arc::new(CallCtx {
            budget,
            step,
            remaining: AtomicI64::new(i64::try_from(budget).unwrap_or(i64::MAX)),
            exhausted: AtomicBool::new(false),
            stepping: AtomicBool::new(false),
            now: AtomicI64::new(0),
            limiter_error: Mutex::new(None),
        })
    }

    pub(crate) fn budget(&self) -> u64 {
        self.budget
    }

    /// Starts a check: full budget, fresh flags, the request's clock.
    pub(crate) fn begin(self: &Arc<Self>, lua: &Lua, now: i64) -> mlua::Result<()> {
        self.remaining.store(
            i64::try_from(self.budget).unwrap_or(i64::MAX),
            Ordering::Relaxed,
        );
        self.exhausted.store(false, Ordering::Relaxed);
        self.now.store(now, Ordering::Relaxed);
        *self
            .limiter_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        if !self.stepping.load(Ordering::Relaxed) {
            self.install(lua, self.step)?;
            self.stepping.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Refills the budget within a check (after host-side work that ran under the hook).
    pub(crate) fn reset_budget(&self) {
        if !self.exhausted.load(Ordering::Relaxed) {
            self.remaining.store(
                i64::try_from(self.budget).unwrap_or(i64::MAX),
                Ordering::Relaxed,
            );
        }
    }

    pub(crate) fn now(&self) -> i64 {
        self.now.load(Ordering::Relaxed)
    }

    pub(crate) fn exhausted(&self) -> bool {
        self.exhausted.load(Ordering::Relaxed)
    }

    pub(crate) fn set_limiter_error(&self, message: String) {
        let mut slot = self
            .limiter_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        slot.get_or_insert(message);
    }

    pub(crate) fn take_limiter_error(&self) -> Option<String> {
        self.limiter_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    fn install(self: &Arc<Self>, lua: &Lua, every: u32) -> mlua::Result<()> {
        let ctx = Arc::clone(self);
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(every),
            move |lua, _debug| ctx.on_hook(lua),
        )
    }

    fn on_hook(self: &Arc<Self>, lua: &Lua) -> mlua::Result<VmState> {
        if !self.exhausted.load(Ordering::Relaxed) {
            let step = i64::from(self.step);
            let left = self.remaining.fetch_sub(step, Ordering::Relaxed) - step;
            if left > 0 {
                return Ok(VmState::Continue);
            }
            self.exhausted.store(true, Ordering::Relaxed);
        }
        if self.stepping.load(Ordering::Relaxed) {
            // From now on error on every instruction. If switching fails (out of memory),
            // the next stepped hook tries again; it errors either way.
            if self.install(lua, 1).is_ok() {
                self.stepping.store(false, Ordering::Relaxed);
            }
        }
        Err(mlua::Error::RuntimeError(DEADLINE_MESSAGE.to_owned()))
    }
}
