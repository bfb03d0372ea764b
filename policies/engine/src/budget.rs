//! The per-state call context: the two limits of one run (the instruction budget and the
//! wall-clock deadline), the request clock seen by `buzz.now()`, and failures that must fail
//! the check even if the script caught them.
//!
//! The limits follow Redis scripting: a count hook fires every `step` VM instructions,
//! subtracts `step` from the budget and reads the clock. Once either limit is passed the run
//! is *stopped*: the hook is switched to fire on *every* instruction and errors each time,
//! so a script that catches the error with `pcall` cannot execute a single further
//! instruction: the error climbs out of every `pcall` until it reaches the host. Work done in
//! Rust on the script's behalf (pattern matching, `strlib.rs`) is charged through
//! [`CallCtx::charge`], which stops the run the same way.
//!
//! The instruction budget makes a script's cost deterministic (the same script fails the
//! same way in `policy test` and in the relay); the deadline bounds what the budget cannot
//! see: one instruction that copies or compares megabytes, a state slowed down by the host.

use std::sync::atomic::{AtomicI64, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mlua::{HookTriggers, Lua, VmState};

/// Why a run was stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The instruction budget is spent.
    Budget,
    /// The wall-clock deadline passed.
    Time,
}

const RUNNING: u8 = 0;
const STOPPED_BUDGET: u8 = 1;
const STOPPED_TIME: u8 = 2;

/// The most instructions between two hook calls. The clock is read at each hook call, so
/// this bounds how far past the deadline a run can get. Most instructions take nanoseconds,
/// but one instruction can run a C function over a string or table as large as the memory
/// limit (milliseconds: `table.concat`, `utf8.len`, comparing two long strings).
const MAX_STEP: u64 = 100;

/// A hook interval longer than this means the script runs expensive instructions: the hook
/// then fires on every instruction for the rest of the run, so the clock is read after each
/// of them and the deadline is overshot by at most one instruction from then on.
const SLOW_INTERVAL_NANOS: u64 = 1_000_000;

/// Shared between the sandbox and the Rust closures installed in its Lua state. Only ever
/// touched by the thread that owns the state; atomics make it `Send` for mlua's `send`
/// feature, at the cost of an uncontended atomic op per hook.
#[derive(Debug)]
pub(crate) struct CallCtx {
    budget: u64,
    /// Instructions between two hook calls while the run goes on.
    step: u32,
    remaining: AtomicI64,
    /// [`RUNNING`], [`STOPPED_BUDGET`] or [`STOPPED_TIME`] for the current run.
    stop: AtomicU8,
    /// The interval of the installed hook (0: none yet): `step` normally, 1 after a stop or
    /// a slow interval; `begin` switches it back to `step`.
    hook_every: AtomicU32,
    /// When the hook last fired (nanoseconds after `epoch`).
    last_hook: AtomicU64,
    /// Origin of `deadline`.
    epoch: Instant,
    /// Nanoseconds after `epoch` at which the current run is stopped.
    deadline: AtomicU64,
    /// The time limit of the current run, in nanoseconds (for the error message).
    timeout: AtomicU64,
    /// `req.now` of the current check, returned by `buzz.now()`.
    now: AtomicI64,
    /// Set by `buzz.rate_limit` when the limiter failed (fail closed even if caught).
    limiter_error: Mutex<Option<String>>,
}

pub(crate) const DEADLINE_MESSAGE: &str = "policy deadline exceeded";

impl CallCtx {
    pub(crate) fn new(budget: u64) -> Arc<CallCtx> {
        let budget = budget.max(1);
        let step = (budget / 100).clamp(1, MAX_STEP) as u32;
        Arc::new(CallCtx {
            budget,
            step,
            remaining: AtomicI64::new(i64::try_from(budget).unwrap_or(i64::MAX)),
            stop: AtomicU8::new(RUNNING),
            hook_every: AtomicU32::new(0),
            last_hook: AtomicU64::new(0),
            epoch: Instant::now(),
            deadline: AtomicU64::new(u64::MAX),
            timeout: AtomicU64::new(u64::MAX),
            now: AtomicI64::new(0),
            limiter_error: Mutex::new(None),
        })
    }

    pub(crate) fn budget(&self) -> u64 {
        self.budget
    }

    /// The time limit of the current run.
    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_nanos(self.timeout.load(Ordering::Relaxed))
    }

    /// Starts a run (a check, or loading a script): full budget, a deadline `timeout` from
    /// now, fresh flags, the request's clock.
    pub(crate) fn begin(
        self: &Arc<Self>,
        lua: &Lua,
        now: i64,
        timeout: Duration,
    ) -> mlua::Result<()> {
        self.remaining.store(
            i64::try_from(self.budget).unwrap_or(i64::MAX),
            Ordering::Relaxed,
        );
        let timeout = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        self.timeout.store(timeout, Ordering::Relaxed);
        let started = self.elapsed();
        self.deadline
            .store(started.saturating_add(timeout), Ordering::Relaxed);
        self.last_hook.store(started, Ordering::Relaxed);
        self.stop.store(RUNNING, Ordering::Relaxed);
        self.now.store(now, Ordering::Relaxed);
        *self
            .limiter_error
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        if self.hook_every.load(Ordering::Relaxed) != self.step {
            self.install(lua, self.step)?;
        }
        Ok(())
    }

    /// Refills the budget within a check (after host-side work that ran under the hook).
    /// The deadline stays: it covers the whole check.
    pub(crate) fn reset_budget(&self) {
        if self.stopped().is_none() {
            self.remaining.store(
                i64::try_from(self.budget).unwrap_or(i64::MAX),
                Ordering::Relaxed,
            );
        }
    }

    pub(crate) fn now(&self) -> i64 {
        self.now.load(Ordering::Relaxed)
    }

    /// Whether (and why) the current run was stopped.
    pub(crate) fn stopped(&self) -> Option<Stop> {
        match self.stop.load(Ordering::Relaxed) {
            RUNNING => None,
            STOPPED_BUDGET => Some(Stop::Budget),
            _ => Some(Stop::Time),
        }
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

    /// Charges `steps` of host work done for the script (one step ≈ one instruction) and
    /// checks the clock. `false` once the run is stopped: the caller must return
    /// [`deadline_error`] at once.
    pub(crate) fn charge(self: &Arc<Self>, lua: &Lua, steps: u64) -> bool {
        if self.stopped().is_some() {
            return false;
        }
        let steps = i64::try_from(steps).unwrap_or(i64::MAX);
        let left = self.remaining.fetch_sub(steps, Ordering::Relaxed) - steps;
        if left <= 0 {
            self.stop_run(lua, STOPPED_BUDGET);
            return false;
        }
        if self.past_deadline() {
            self.stop_run(lua, STOPPED_TIME);
            return false;
        }
        true
    }

    fn elapsed(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn past_deadline(&self) -> bool {
        self.elapsed() >= self.deadline.load(Ordering::Relaxed)
    }

    fn install(self: &Arc<Self>, lua: &Lua, every: u32) -> mlua::Result<()> {
        let ctx = Arc::clone(self);
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(every),
            move |lua, _debug| ctx.on_hook(lua),
        )?;
        self.hook_every.store(every, Ordering::Relaxed);
        Ok(())
    }

    /// Marks the run stopped (the first reason wins) and makes the hook fire on every
    /// instruction from now on. If switching fails (out of memory), the next stepped hook
    /// tries again; it errors either way.
    fn stop_run(self: &Arc<Self>, lua: &Lua, reason: u8) {
        let _ = self
            .stop
            .compare_exchange(RUNNING, reason, Ordering::Relaxed, Ordering::Relaxed);
        if self.hook_every.load(Ordering::Relaxed) != 1 {
            let _ = self.install(lua, 1);
        }
    }

    fn on_hook(self: &Arc<Self>, lua: &Lua) -> mlua::Result<VmState> {
        if self.stopped().is_none() {
            let every = self.hook_every.load(Ordering::Relaxed);
            let step = i64::from(every);
            let left = self.remaining.fetch_sub(step, Ordering::Relaxed) - step;
            let now = self.elapsed();
            if left <= 0 {
                self.stop_run(lua, STOPPED_BUDGET);
            } else if now >= self.deadline.load(Ordering::Relaxed) {
                self.stop_run(lua, STOPPED_TIME);
            } else {
                let last = self.last_hook.swap(now, Ordering::Relaxed);
                if every > 1 && now.saturating_sub(last) > SLOW_INTERVAL_NANOS {
                    // Expensive instructions: watch every one of them from now on. If the
                    // switch fails (out of memory) the next hook tries again.
                    let _ = self.install(lua, 1);
                }
                return Ok(VmState::Continue);
            }
        } else if self.hook_every.load(Ordering::Relaxed) != 1 {
            // Stopped by `charge`, whose switch to every instruction failed: retry.
            let _ = self.install(lua, 1);
        }
        Err(deadline_error())
    }
}

/// The error raised into the script once its run is stopped.
pub(crate) fn deadline_error() -> mlua::Error {
    mlua::Error::RuntimeError(DEADLINE_MESSAGE.to_owned())
}
