//! Moving a relay's storage (the `buzz-relay` storage commands' SQL): `export.rs` reads
//! events in arrival order a page at a time, `copy.rs` copies every declared table into
//! an empty database of either backend and checks it, `backup.rs` takes a consistent
//! SQLite copy while the relay writes, `tables.rs` says which tables exist and who
//! declares them. Import stores through the ingest pipeline and lives beside it
//! (`crate::import`).

pub mod backup;
pub mod copy;
mod copy_error;
pub mod export;
pub mod tables;

/// How a long operation reports how far it got (the binary draws a progress bar on
/// stderr; tests and libraries pass [`Silent`]).
pub trait Progress: Send + Sync {
    /// A new stage, `total` units long when known.
    fn begin(&self, stage: &str, total: Option<u64>);
    /// `n` more units of the current stage are done.
    fn advance(&self, n: u64);
    /// The current stage is over.
    fn end(&self);
}

/// Reports nothing.
pub struct Silent;

impl Progress for Silent {
    fn begin(&self, _stage: &str, _total: Option<u64>) {}
    fn advance(&self, _n: u64) {}
    fn end(&self) {}
}

/// `"name"`: a table or column name as an SQL identifier (names come from the schema
/// and the manifests, never from input; quoting keeps a reserved word usable).
pub(crate) fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
