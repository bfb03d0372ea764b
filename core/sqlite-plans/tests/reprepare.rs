//! What the guarantee is for, measured on SQLite's own statement counters: with it off,
//! a statement whose plan read a bound `LIMIT ?` is prepared again each time that
//! parameter is bound anew (as diesel does on every execution); with it on, never.

#![allow(unsafe_code)]

use libsqlite3_sys as ffi;
use std::ffi::{c_int, CString};
use std::ptr;

/// An in-memory connection with the guarantee set to `on` (read back to be sure).
fn open(on: bool) -> *mut ffi::sqlite3 {
    let mut db = ptr::null_mut();
    let name = CString::new(":memory:").expect("no NUL");
    // SAFETY: a valid C string and an out pointer for the handle.
    let rc = unsafe { ffi::sqlite3_open(name.as_ptr(), &mut db) };
    assert_eq!(rc, ffi::SQLITE_OK, "open");
    let mut now: c_int = -1;
    // SAFETY: QPSG takes an int and an int pointer, both valid for the call.
    let rc = unsafe {
        ffi::sqlite3_db_config(
            db,
            ffi::SQLITE_DBCONFIG_ENABLE_QPSG,
            c_int::from(on),
            &mut now as *mut c_int,
        )
    };
    assert_eq!(rc, ffi::SQLITE_OK, "db_config");
    assert_eq!(now, c_int::from(on));
    db
}

fn exec(db: *mut ffi::sqlite3, sql: &str) {
    let sql = CString::new(sql).expect("no NUL");
    // SAFETY: an open connection and a valid C string; no callback.
    let rc = unsafe { ffi::sqlite3_exec(db, sql.as_ptr(), None, ptr::null_mut(), ptr::null_mut()) };
    assert_eq!(rc, ffi::SQLITE_OK, "exec");
}

/// Run `SELECT … LIMIT ?` five times with a newly bound limit each time, as a cached
/// diesel statement is run; how many times SQLite prepared it again.
fn reprepares(db: *mut ffi::sqlite3) -> c_int {
    exec(db, "CREATE TABLE t(x INTEGER PRIMARY KEY, y INTEGER)");
    exec(db, "INSERT INTO t(y) VALUES (1),(2),(3)");
    let sql = CString::new("SELECT x FROM t WHERE y > ?1 ORDER BY x LIMIT ?2").expect("no NUL");
    let mut stmt = ptr::null_mut();
    // SAFETY: an open connection, a valid C string, an out pointer for the statement.
    let rc = unsafe { ffi::sqlite3_prepare_v2(db, sql.as_ptr(), -1, &mut stmt, ptr::null_mut()) };
    assert_eq!(rc, ffi::SQLITE_OK, "prepare");
    for limit in 1..=5 {
        // SAFETY: `stmt` is the statement prepared above, not yet finalized.
        unsafe {
            assert_eq!(ffi::sqlite3_bind_int64(stmt, 1, 0), ffi::SQLITE_OK);
            assert_eq!(ffi::sqlite3_bind_int64(stmt, 2, limit), ffi::SQLITE_OK);
            let mut rows = 0;
            while ffi::sqlite3_step(stmt) == ffi::SQLITE_ROW {
                rows += 1;
            }
            assert_eq!(rows, limit.min(3), "the answer is the same either way");
            ffi::sqlite3_reset(stmt);
        }
    }
    // SAFETY: as above; finalized once, then the connection closed.
    unsafe {
        let n = ffi::sqlite3_stmt_status(stmt, ffi::SQLITE_STMTSTATUS_REPREPARE, 0);
        ffi::sqlite3_finalize(stmt);
        ffi::sqlite3_close(db);
        n
    }
}

#[test]
fn without_the_guarantee_a_bound_limit_reprepares_the_statement() {
    assert!(reprepares(open(false)) > 0);
}

#[test]
fn with_the_guarantee_a_statement_is_prepared_once() {
    assert_eq!(reprepares(open(true)), 0);
}
