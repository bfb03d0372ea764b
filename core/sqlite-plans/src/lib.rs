//! SQLite's query planner stability guarantee (`SQLITE_DBCONFIG_ENABLE_QPSG`) on every
//! SQLite connection this process opens.
//!
//! The bundled SQLite (3.51) plans some statements from the values bound to them: a
//! `LIMIT ?` (every diesel `.first()` and `.limit(n)`), a bound value compared with a
//! partial index's condition, and with STAT4 statistics any value compared with an
//! indexed column. A statement planned from a bound value is marked to be prepared
//! again whenever that parameter is bound anew — and diesel binds every parameter on
//! every execution, so its statement cache bought nothing: each REQ and each message
//! the writer stored parsed and planned its statements again (in a 1M-event import a
//! quarter of the writer thread was `sqlite3Reprepare`, under `load_channel` and every
//! other `.first()`). With the guarantee on, a statement's plan never depends on its
//! bound values, so a prepared statement is reused as is; the plans are the ones SQLite
//! chose before it looked at bound values, and planner statistics (`planner_stats.rs`)
//! still apply.
//!
//! diesel does not hand out its connections' `sqlite3` handles, so the setting is made
//! by an auto extension: a function SQLite itself runs for every connection it opens.
//! `buzz-core`'s pool calls [`register`] before it opens its first SQLite connection.
//! This crate is the workspace's only `unsafe` code (the workspace forbids it elsewhere).
//!
//! The same auto extension installs the read deadline's progress handler
//! (`deadline.rs`, [`with_deadline`]).

mod deadline;

pub use deadline::with_deadline;
use libsqlite3_sys as ffi;
use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

static REGISTER: Once = Once::new();
/// Connections opened with the guarantee on (read back from SQLite), for tests.
static ENABLED: AtomicU64 = AtomicU64::new(0);

/// Run by SQLite for each new connection, before it is returned to diesel.
#[allow(unsafe_code)]
unsafe extern "C" fn enable_on(
    db: *mut ffi::sqlite3,
    _error: *mut *mut c_char,
    _api: *const ffi::sqlite3_api_routines,
) -> c_int {
    let mut now_on: c_int = 0;
    // SAFETY: `db` is the connection SQLite is opening; QPSG takes an int (1: on) and
    // an int pointer it writes the resulting setting to, both valid for the call.
    let rc = unsafe {
        ffi::sqlite3_db_config(
            db,
            ffi::SQLITE_DBCONFIG_ENABLE_QPSG,
            1 as c_int,
            &mut now_on as *mut c_int,
        )
    };
    if rc == ffi::SQLITE_OK && now_on == 1 {
        ENABLED.fetch_add(1, Ordering::Relaxed);
    }
    deadline::install(db);
    // A failure here would fail the open; the setting is an optimization, so never.
    ffi::SQLITE_OK
}

/// Make every SQLite connection opened from now on keep its plans stable and obey
/// [`with_deadline`] (once per process; later calls do nothing).
#[allow(unsafe_code)]
pub fn register() {
    REGISTER.call_once(|| {
        // SAFETY: `enable_on` has the entry-point signature SQLite expects and stays
        // valid for the life of the process.
        let rc = unsafe { ffi::sqlite3_auto_extension(Some(enable_on)) };
        // Only on a SQLite too old to have auto extensions or out of memory at start:
        // statements then behave as before (re-prepared), which is slower, not wrong.
        debug_assert_eq!(rc, ffi::SQLITE_OK, "sqlite3_auto_extension failed");
    });
}

/// How many connections were opened with the guarantee on so far.
pub fn connections_enabled() -> u64 {
    ENABLED.load(Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use diesel::Connection;

    /// A connection opened after [`super::register`] comes up with the guarantee on, as
    /// SQLite reads it back; one opened before it did not count.
    #[test]
    fn connections_opened_after_register_have_stable_plans() {
        let open = || diesel::SqliteConnection::establish(":memory:").expect("in-memory SQLite");
        let _early = open();
        assert_eq!(super::connections_enabled(), 0);
        super::register();
        super::register();
        let (_a, _b) = (open(), open());
        assert_eq!(super::connections_enabled(), 2);
    }
}
