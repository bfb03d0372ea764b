//! Embedded migrations for both backends: core's own (`migrations/sqlite`,
//! `migrations/postgres` at the repository root) and each built plugin's, every set
//! labelled with its owner. All sets are applied whether or not their plugin is enabled.

use super::pool::Pool;
use super::StoreError;
use crate::error::Reason;
use crate::store::Conn;
use diesel::migration::{Migration, MigrationSource};
use diesel_migrations::{embed_migrations, EmbeddedMigrations, MigrationHarness};
use std::collections::BTreeSet;
use std::fmt;

/// Migrations one owner (core or a plugin) keeps, per backend, in step (same names).
#[derive(Clone, Copy)]
pub struct MigrationSet {
    /// `core` or the plugin's name.
    pub owner: &'static str,
    pub sqlite: &'static EmbeddedMigrations,
    pub postgres: &'static EmbeddedMigrations,
}

static CORE_SQLITE: EmbeddedMigrations = embed_migrations!("../migrations/sqlite");
static CORE_POSTGRES: EmbeddedMigrations = embed_migrations!("../migrations/postgres");

impl MigrationSet {
    /// Core's own tables.
    pub const CORE: MigrationSet = MigrationSet {
        owner: "core",
        sqlite: &CORE_SQLITE,
        postgres: &CORE_POSTGRES,
    };
}

/// Lends a `'static` embedded set to diesel's harness, which takes its source by value.
struct Borrowed(&'static EmbeddedMigrations);

impl<DB: diesel::backend::Backend> MigrationSource<DB> for Borrowed {
    fn migrations(&self) -> diesel::migration::Result<Vec<Box<dyn Migration<DB>>>> {
        MigrationSource::<DB>::migrations(self.0)
    }
}

/// One migration and who owns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationId {
    /// The migration's version (its directory name's date and number, digits only).
    pub version: String,
    /// `core`, a plugin's name, or `unknown` for an applied migration no built set has
    /// (a plugin removed from this binary).
    pub owner: String,
}

impl fmt::Display for MigrationId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.version, self.owner)
    }
}

/// Applied and pending migrations, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationStatus {
    pub applied: Vec<MigrationId>,
    pub pending: Vec<MigrationId>,
}

/// Inspect and apply migrations on one database.
pub struct Migrations {
    pool: Pool,
    /// Core's set first, then the plugins' in catalog order.
    sets: Vec<MigrationSet>,
}

fn failed(e: impl std::fmt::Display) -> Reason {
    Reason::Internal(StoreError::Migration(e.to_string()).into())
}

fn versions<DB: diesel::backend::Backend>(
    source: &EmbeddedMigrations,
) -> Result<Vec<String>, Reason>
where
    EmbeddedMigrations: MigrationSource<DB>,
{
    Ok(MigrationSource::<DB>::migrations(source)
        .map_err(failed)?
        .iter()
        .map(|m| m.name().version().to_string())
        .collect())
}

impl Migrations {
    pub(crate) fn new(pool: Pool, plugin_sets: &[MigrationSet]) -> Self {
        let mut sets = vec![MigrationSet::CORE];
        sets.extend(plugin_sets.iter().copied());
        Migrations { pool, sets }
    }

    pub fn status(&self) -> Result<MigrationStatus, StoreError> {
        self.pool
            .with_conn(|conn| {
                let (applied, known): (BTreeSet<String>, Vec<(String, &str)>) = match conn {
                    Conn::Sqlite(c) => (
                        c.applied_migrations()
                            .map_err(failed)?
                            .iter()
                            .map(|v| v.to_string())
                            .collect(),
                        self.known(|set| versions::<diesel::sqlite::Sqlite>(set.sqlite))?,
                    ),
                    Conn::Pg(c) => (
                        c.applied_migrations()
                            .map_err(failed)?
                            .iter()
                            .map(|v| v.to_string())
                            .collect(),
                        self.known(|set| versions::<diesel::pg::Pg>(set.postgres))?,
                    ),
                };
                let id = |version: &str, owner: &str| MigrationId {
                    version: version.to_owned(),
                    owner: owner.to_owned(),
                };
                let mut status = MigrationStatus {
                    applied: applied
                        .iter()
                        .map(|v| {
                            let owner = known.iter().find(|(k, _)| k == v).map(|(_, o)| *o);
                            id(v, owner.unwrap_or("unknown"))
                        })
                        .collect(),
                    pending: known
                        .iter()
                        .filter(|(v, _)| !applied.contains(v))
                        .map(|(v, o)| id(v, o))
                        .collect(),
                };
                status.pending.sort_by(|a, b| a.version.cmp(&b.version));
                Ok(status)
            })
            .map_err(|e| StoreError::Migration(e.to_string()))
    }

    /// Every migration of every set, as (version, owner); a version used twice is an
    /// error naming both owners.
    pub fn check_unique_versions(&self) -> Result<(), StoreError> {
        self.pool
            .with_conn(|conn| {
                let known = match conn {
                    Conn::Sqlite(_) => {
                        self.known(|set| versions::<diesel::sqlite::Sqlite>(set.sqlite))?
                    }
                    Conn::Pg(_) => self.known(|set| versions::<diesel::pg::Pg>(set.postgres))?,
                };
                unique_versions(&known)
            })
            .map_err(|e| StoreError::Migration(e.to_string()))
    }

    /// Every migration of every set, as (version, owner).
    fn known(
        &self,
        list: impl Fn(&MigrationSet) -> Result<Vec<String>, Reason>,
    ) -> Result<Vec<(String, &'static str)>, Reason> {
        let mut out = Vec::new();
        for set in &self.sets {
            out.extend(list(set)?.into_iter().map(|v| (v, set.owner)));
        }
        Ok(out)
    }

    /// Run `f` on a connection of this database (status tools read through it).
    pub fn with_conn<R>(&self, f: impl FnOnce(Conn<'_>) -> Result<R, Reason>) -> Result<R, Reason> {
        self.pool.with_conn(f)
    }

    /// Apply every pending migration, core's first, then each plugin's; returns those
    /// applied.
    pub fn run_pending(&self) -> Result<Vec<MigrationId>, StoreError> {
        self.pool
            .with_conn(|mut conn| {
                // diesel records applied migrations by version alone: a version two
                // components share would apply only the first and skip the other's
                // tables without a word.
                let known = match &conn {
                    Conn::Sqlite(_) => {
                        self.known(|set| versions::<diesel::sqlite::Sqlite>(set.sqlite))?
                    }
                    Conn::Pg(_) => self.known(|set| versions::<diesel::pg::Pg>(set.postgres))?,
                };
                unique_versions(&known)?;
                let mut done = Vec::new();
                for set in &self.sets {
                    let versions = match &mut conn {
                        Conn::Sqlite(c) => c
                            .run_pending_migrations(Borrowed(set.sqlite))
                            .map_err(failed)?,
                        Conn::Pg(c) => c
                            .run_pending_migrations(Borrowed(set.postgres))
                            .map_err(failed)?,
                    };
                    done.extend(versions.iter().map(|v| MigrationId {
                        version: v.to_string(),
                        owner: set.owner.to_owned(),
                    }));
                }
                Ok(done)
            })
            .map_err(|e| StoreError::Migration(format!("{e:#}")))
    }
}

/// Refuse two migrations with one version (the owners named).
fn unique_versions(known: &[(String, &'static str)]) -> Result<(), Reason> {
    let mut seen: std::collections::HashMap<&str, &str> = std::collections::HashMap::new();
    for (version, owner) in known {
        if let Some(first) = seen.insert(version.as_str(), owner) {
            return Err(Reason::Internal(anyhow::anyhow!(
                "migration version {version} is used by both {first} and {owner}: \
                 give one of them another date or number"
            )));
        }
    }
    Ok(())
}
