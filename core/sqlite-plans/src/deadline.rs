//! A deadline for the statements one thread runs: SQLite's progress handler, installed
//! on every connection by the auto extension, interrupts a statement of a thread whose
//! deadline has passed (`SQLITE_INTERRUPT`, diesel's "interrupted" error).
//!
//! The deadline is the thread's, not the connection's: the relay's read threads arm one
//! around each read ([`with_deadline`]) and the writer thread never does, so a pooled
//! connection that served a read and then the writer is never cut while writing.

use libsqlite3_sys as ffi;
use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::time::Instant;

/// SQLite virtual machine steps between two looks at the clock: often enough to stop
/// within a millisecond or so, rare enough that reading the clock costs nothing. A
/// `ROLLBACK` after a cut takes a handful of steps, so the handler never runs during it
/// and the connection leaves the read's transaction (`core/tests/read_deadline.rs`).
pub(crate) const STEPS_PER_CHECK: c_int = 4096;

thread_local! {
    /// The running read's deadline on this thread, if any.
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// Whether a statement was interrupted at the deadline since it was armed.
    static CUT: Cell<bool> = const { Cell::new(false) };
}

/// Run `f` with this thread's SQLite statements interrupted once `deadline` passes;
/// also says whether any of them was (and so failed with "interrupted"). Nested calls
/// keep the nearer deadline.
pub fn with_deadline<R>(deadline: Instant, f: impl FnOnce() -> R) -> (R, bool) {
    struct Restore(Option<Instant>, bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            DEADLINE.with(|d| d.set(self.0));
            CUT.with(|c| c.set(self.1));
        }
    }
    let outer = DEADLINE.with(Cell::get);
    let nearer = outer.map_or(deadline, |outer| outer.min(deadline));
    let restore = Restore(outer, CUT.with(Cell::get));
    DEADLINE.with(|d| d.set(Some(nearer)));
    CUT.with(|c| c.set(false));
    let out = f();
    let cut = CUT.with(Cell::get);
    drop(restore);
    (out, cut)
}

/// SQLite's progress handler: non-zero interrupts the running statement.
#[allow(unsafe_code)]
pub(crate) unsafe extern "C" fn past_deadline(_: *mut c_void) -> c_int {
    let Some(deadline) = DEADLINE.with(Cell::get) else {
        return 0;
    };
    if Instant::now() < deadline {
        return 0;
    }
    CUT.with(|c| c.set(true));
    1
}

/// Install [`past_deadline`] on `db`.
#[allow(unsafe_code)]
pub(crate) fn install(db: *mut ffi::sqlite3) {
    // SAFETY: `db` is a connection being opened; the handler takes no argument and
    // stays valid for the life of the process.
    unsafe {
        ffi::sqlite3_progress_handler(
            db,
            STEPS_PER_CHECK,
            Some(past_deadline),
            std::ptr::null_mut(),
        )
    };
}
