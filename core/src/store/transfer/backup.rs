//! A consistent copy of a SQLite database while the relay keeps writing (`buzz-relay
//! backup PATH`): `VACUUM INTO` reads one moment of the database inside a read
//! transaction, which in WAL mode never blocks the writer — ingest goes on committing to
//! the WAL while the copy is written, and the copy holds exactly what was committed when
//! it began.

use crate::error::Reason;
use crate::store::Conn;
use diesel::sql_types::Text;
use diesel::RunQueryDsl;
use std::path::Path;

/// Write a copy of the database `conn` belongs to at `path` (which must not exist).
/// PostgreSQL has its own tools for this; the error says which.
pub fn backup(conn: &mut Conn<'_>, path: &Path) -> Result<(), Reason> {
    let Conn::Sqlite(c) = conn else {
        return Err(Reason::invalid(
            "backup copies SQLite databases; for PostgreSQL use pg_dump (see README, \"Backups\")",
        ));
    };
    if path.exists() {
        return Err(Reason::invalid(format!(
            "{} exists: back up into a new file",
            path.display()
        )));
    }
    let target = path
        .to_str()
        .ok_or_else(|| Reason::invalid("the backup path is not UTF-8"))?;
    diesel::sql_query("VACUUM INTO ?")
        .bind::<Text, _>(target)
        .execute(*c)?;
    Ok(())
}
