//! Embedded migrations for both backends (`migrations/sqlite`, `migrations/postgres`).

use super::pool::Pool;
use super::StoreError;
use crate::error::Reason;
use crate::store::Conn;
use diesel_migrations::{embed_migrations, EmbeddedMigrations, MigrationHarness};

const SQLITE: EmbeddedMigrations = embed_migrations!("../migrations/sqlite");
const POSTGRES: EmbeddedMigrations = embed_migrations!("../migrations/postgres");

/// Applied and pending migration names, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationStatus {
    pub applied: Vec<String>,
    pub pending: Vec<String>,
}

/// Inspect and apply migrations on one database.
pub struct Migrations {
    pool: Pool,
}

fn failed(e: impl std::fmt::Display) -> Reason {
    Reason::Internal(StoreError::Migration(e.to_string()).into())
}

impl Migrations {
    pub(crate) fn new(pool: Pool) -> Self {
        Migrations { pool }
    }

    pub fn status(&self) -> Result<MigrationStatus, StoreError> {
        self.pool
            .with_conn(|conn| {
                fn names<DB: diesel::backend::Backend>(
                    list: Vec<Box<dyn diesel::migration::Migration<DB>>>,
                ) -> Vec<String> {
                    list.iter()
                        .map(|m| m.name().version().to_string())
                        .collect()
                }
                let (applied, pending): (Vec<String>, Vec<String>) = match conn {
                    Conn::Sqlite(c) => (
                        c.applied_migrations()
                            .map_err(failed)?
                            .iter()
                            .map(|v| v.to_string())
                            .collect(),
                        names(c.pending_migrations(SQLITE).map_err(failed)?),
                    ),
                    Conn::Pg(c) => (
                        c.applied_migrations()
                            .map_err(failed)?
                            .iter()
                            .map(|v| v.to_string())
                            .collect(),
                        names(c.pending_migrations(POSTGRES).map_err(failed)?),
                    ),
                };
                let mut applied = applied;
                applied.sort();
                Ok(MigrationStatus { applied, pending })
            })
            .map_err(|e| StoreError::Migration(e.to_string()))
    }

    /// Run `f` on a connection of this database (status tools read through it).
    pub fn with_conn<R>(&self, f: impl FnOnce(Conn<'_>) -> Result<R, Reason>) -> Result<R, Reason> {
        self.pool.with_conn(f)
    }

    /// Apply every pending migration; returns the names applied.
    pub fn run_pending(&self) -> Result<Vec<String>, StoreError> {
        self.pool
            .with_conn(|conn| {
                let done = match conn {
                    Conn::Sqlite(c) => c.run_pending_migrations(SQLITE).map_err(failed)?,
                    Conn::Pg(c) => c.run_pending_migrations(POSTGRES).map_err(failed)?,
                };
                Ok(done.iter().map(|v| v.to_string()).collect())
            })
            .map_err(|e| StoreError::Migration(format!("{e:#}")))
    }
}
