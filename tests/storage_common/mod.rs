//! Helpers of the storage-command suites: a database of either backend, a config file
//! pointing at it, and the real `buzz-relay` binary run against it.

#![allow(dead_code)] // each suite uses its own subset

use buzz_core::testkit::{pg_admin_url, PgDatabase, TestBackend};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A database for one test: a SQLite file in `dir`, or a fresh PostgreSQL database
/// (dropped with this value).
pub(crate) struct Db {
    pub(crate) url: String,
    _pg: Option<PgDatabase>,
}

impl Db {
    /// `None`: PostgreSQL is not configured and the test is skipped.
    pub(crate) fn new(backend: TestBackend, dir: &Path, name: &str, test: &str) -> Option<Db> {
        Some(match backend {
            TestBackend::Sqlite => Db {
                url: format!("sqlite://{}", dir.join(format!("{name}.db")).display()),
                _pg: None,
            },
            TestBackend::Postgres => {
                let admin = pg_admin_url(test)?;
                let pg = PgDatabase::create(&admin).expect("create test database");
                Db {
                    url: pg.url.clone(),
                    _pg: Some(pg),
                }
            }
        })
    }
}

/// The other backend.
pub(crate) fn other(backend: TestBackend) -> TestBackend {
    match backend {
        TestBackend::Sqlite => TestBackend::Postgres,
        TestBackend::Postgres => TestBackend::Sqlite,
    }
}

/// A config file in `dir` for a relay on `url` signing with `key` (hex secret).
pub(crate) fn config(dir: &Path, name: &str, url: &str, key: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!(
            "[server]\nbind = \"127.0.0.1:0\"\n[metrics]\nenabled = false\n[storage]\n\
             database_url = \"{url}\"\n[relay]\ndata_dir = \"{data}\"\nprivate_key = \"{key}\"\n",
            data = dir.display()
        ),
    )
    .expect("write config");
    path
}

/// The `buzz-relay` binary with `--config config` and `args`, environment overrides
/// removed.
pub(crate) fn command(config: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_buzz-relay"));
    cmd.arg("--config")
        .arg(config)
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("BUZZ_AUTO_MIGRATE")
        .env("RUST_LOG", "warn");
    cmd
}

/// Run to the end: (success, stdout, stderr).
pub(crate) fn run(config: &Path, args: &[&str]) -> (bool, String, String) {
    let out: Output = command(config, args).output().expect("run buzz-relay");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
