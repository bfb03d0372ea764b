//! Test harness (feature `testkit`): real relays on port 0 over real SQLite files or a
//! fresh PostgreSQL database, and real WebSocket/HTTP clients that speak the wire.
//!
//! PostgreSQL and Redis come from `BUZZ_TEST_DATABASE_URL` / `BUZZ_TEST_REDIS_URL`.
//! Without them a test prints one `skipped: …` line and passes — unless `CI` is set,
//! where a missing service is a failure.

mod bench;
mod channel_rows;
pub mod disabled;
mod http;
pub mod member;
mod own_redis;
mod pg;
mod relay;
mod shared;
mod sockets;
pub mod statements;
mod table_lock;
mod ws;

pub use bench::{cpu_secs, percentile, BenchStorage};
pub use channel_rows::{channel_rows, ChannelRows, EventRows, TagRow, ThreadRows};
pub use http::HttpClient;
pub use member::{
    authed, authed_at, create_channel, fresh_id, fresh_sub, publish_kind, publish_ok, Member,
};
pub use own_redis::OwnRedis;
pub use pg::PgDatabase;
pub use relay::{TestBackend, TestRelay};
pub use shared::SharedStorage;
pub use sockets::{relay_side_socket, SocketState};
pub use table_lock::TableLock;
pub use ws::{ReqAnswer, WsClient};

/// The PostgreSQL admin URL for tests, or `None` (after printing why) when absent.
pub fn pg_admin_url(test: &str) -> Option<String> {
    service_url("BUZZ_TEST_DATABASE_URL", test)
}

/// The Redis URL for tests, or `None` (after printing why) when absent.
pub fn redis_url(test: &str) -> Option<String> {
    service_url("BUZZ_TEST_REDIS_URL", test)
}

fn service_url(var: &str, test: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            if std::env::var_os("CI").is_some() {
                panic!("{test}: CI is set but {var} is missing: the service is required in CI");
            }
            println!("skipped: {test}: {var} is not set");
            None
        }
    }
}

/// Run one async test body against both backends.
///
/// `both_backends!(name, ...)` expands every `async fn name(backend, test_name)` into
/// `sqlite::name` and `postgres::name` tests. The PostgreSQL copy skips with one
/// `skipped:` line when `BUZZ_TEST_DATABASE_URL` is absent (a failure under `CI`).
#[macro_export]
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::testkit::TestBackend::Sqlite, concat!("sqlite::", stringify!($name))).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::testkit::TestBackend::Postgres, concat!("postgres::", stringify!($name))).await
                }
            )*
        }
    };
}

/// Unix time now, seconds.
pub fn now() -> i64 {
    use crate::clock::Clock;
    crate::clock::SystemClock.now_secs()
}

/// `["t", "v"]`-style tag builder.
pub fn tag(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}
