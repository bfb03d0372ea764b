//! The storage commands that go through the relay's pipelines rather than SQL alone:
//! `import` stores a file's events through the one ingest pipeline. The SQL side of the
//! other commands (export, copy, backup) is `store::lifecycle`.

pub mod import;

pub use crate::store::lifecycle::{Progress, Silent};
