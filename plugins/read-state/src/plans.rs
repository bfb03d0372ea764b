//! PostgreSQL plans of the plugin's prepared statements: planned for their values on
//! every run (`plan_cache_mode = force_custom_plan`), never with a generic plan.
//!
//! Why: each pooled connection prepares a statement once (`sql.rs`) and, after five
//! runs, PostgreSQL may switch it to one generic plan, chosen with the statistics of that
//! moment and kept until the tables are analyzed again. On a fresh database, or one whose
//! tables are not analyzed (autovacuum off or behind), that plan is chosen on empty
//! tables, where every index costs the same: the message lookup by id then walked
//! `events_by_author` by community and filtered by id, a scan that grows with every
//! message — ingest fell from ~1,200 to ~180 messages/s over 10k messages. A custom plan
//! sees the table's current size and the values (`events_identity` for an id), whatever
//! the statistics say. Parsing stays cached; planning these short statements costs less
//! than one wrong plan.
//!
//! The setting is local to the transaction. The plugin's own read transactions set it
//! once ([`for_transaction`]); work inside a transaction the plugin shares (ingest hooks,
//! intents in the writer's group commit) sets it around its own statements and puts the
//! session's setting back after them ([`around`]), so core's statements and other jobs
//! of the batch plan as they always do. On failure nothing is put back: the transaction
//! (or the job's savepoint) is rolled back, and the setting with it.

use crate::sql::{first, Val};
use buzz_core::error::Reason;
use buzz_core::store::Conn;
use diesel::sql_types::Text;
use diesel::QueryableByName;

#[derive(QueryableByName)]
struct Previous {
    #[diesel(sql_type = Text)]
    previous: String,
}

/// Force custom plans for the rest of the current transaction; the setting it replaced.
/// The subquery (kept apart by `OFFSET 0`) reads the old value before the outer
/// `set_config` changes it.
fn force_custom(conn: &mut Conn<'_>) -> Result<String, Reason> {
    let row: Option<Previous> = first(
        conn,
        "SELECT p.previous AS previous, \
         set_config('plan_cache_mode', 'force_custom_plan', TRUE) AS now \
         FROM (SELECT current_setting('plan_cache_mode') AS previous OFFSET 0) p",
        &[],
    )?;
    row.map(|r| r.previous)
        .ok_or_else(|| Reason::Internal(anyhow::anyhow!("set_config returned no row")))
}

/// In a transaction the plugin owns: custom plans until it ends. SQLite: nothing to do.
pub(crate) fn for_transaction(conn: &mut Conn<'_>) -> Result<(), Reason> {
    if matches!(conn, Conn::Pg(_)) {
        force_custom(conn)?;
    }
    Ok(())
}

/// Run `f` with custom plans inside a transaction the plugin shares, then restore the
/// session's setting. SQLite: just `f`.
pub(crate) fn around<R>(
    conn: &mut Conn<'_>,
    f: impl FnOnce(&mut Conn<'_>) -> Result<R, Reason>,
) -> Result<R, Reason> {
    if !matches!(conn, Conn::Pg(_)) {
        return f(conn);
    }
    let previous = force_custom(conn)?;
    let out = f(conn)?;
    first::<Previous>(
        conn,
        "SELECT set_config('plan_cache_mode', ?, TRUE) AS previous",
        &[Val::T(&previous)],
    )?;
    Ok(out)
}
