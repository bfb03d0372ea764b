//! The read deadline (`src/deadline.rs`) on a real SQLite connection opened after
//! `register` (its own test process: the crate's unit tests count connections opened
//! before it).

use diesel::Connection;

/// A statement that would run for ever stops at its thread's deadline and says so;
/// the same connection runs the next statement in full, and one with no deadline
/// armed (the writer's case) is never cut.
#[test]
fn a_statement_past_its_threads_deadline_is_interrupted() {
    use diesel::connection::SimpleConnection;
    use std::time::{Duration, Instant};
    buzz_sqlite_plans::register();
    let mut conn = diesel::SqliteConnection::establish(":memory:").expect("in-memory SQLite");
    let forever = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n) \
                       SELECT count(*) FROM n";
    let started = Instant::now();
    let (result, cut) =
        buzz_sqlite_plans::with_deadline(started + Duration::from_millis(50), || {
            conn.batch_execute(forever)
        });
    let err = result.expect_err("cut at the deadline");
    assert!(cut, "the deadline was not what stopped it");
    assert!(err.to_string().contains("interrupted"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let finite = "WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n \
                      WHERE x < 200000) SELECT count(*) FROM n";
    let (result, cut) =
        buzz_sqlite_plans::with_deadline(Instant::now() + Duration::from_secs(60), || {
            conn.batch_execute(finite)
        });
    assert!(result.is_ok() && !cut);
    conn.batch_execute(finite).expect("no deadline armed");
}
