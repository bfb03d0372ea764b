//! A real stall for the relay's PostgreSQL statements: another session takes a table in
//! `ACCESS EXCLUSIVE` mode and keeps it, and a third watches who waits for it.

use diesel::connection::SimpleConnection;
use diesel::sql_types::BigInt;
use diesel::{Connection, PgConnection, QueryableByName, RunQueryDsl};
use std::time::{Duration, Instant};

#[derive(QueryableByName)]
struct Number {
    #[diesel(sql_type = BigInt)]
    n: i64,
}

/// `table` of the database at `url`, held by a session of its own until
/// [`TableLock::release`] (or until dropped, when the session closes).
pub struct TableLock {
    holder: PgConnection,
    holder_pid: i64,
    watcher: PgConnection,
}

impl TableLock {
    pub fn take(url: &str, table: &str) -> TableLock {
        let mut holder = PgConnection::establish(url).expect("holder session");
        holder
            .batch_execute(&format!(
                "BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE;"
            ))
            .expect("lock the table");
        let holder_pid = diesel::sql_query("SELECT pg_backend_pid()::bigint AS n")
            .get_result::<Number>(&mut holder)
            .expect("holder pid")
            .n;
        let watcher = PgConnection::establish(url).expect("watcher session");
        TableLock {
            holder,
            holder_pid,
            watcher,
        }
    }

    /// Statements of this database waiting for a lock (this lock's sessions aside).
    pub fn waiters(&mut self) -> i64 {
        diesel::sql_query(format!(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() \
             AND wait_event_type = 'Lock' AND pid <> {} AND pid <> pg_backend_pid()",
            self.holder_pid
        ))
        .get_result::<Number>(&mut self.watcher)
        .expect("pg_stat_activity")
        .n
    }

    /// Whether every waiting statement is gone within `within`.
    pub fn waiters_gone_within(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while self.waiters() > 0 {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    }

    pub fn release(mut self) {
        self.holder
            .batch_execute("ROLLBACK;")
            .expect("release the lock");
    }
}
