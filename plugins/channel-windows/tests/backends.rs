//! Copied from core/tests/backends.rs: run one async test body against both backends.
//!
//! `both_backends!(name, ...)` expands every `async fn name(backend, test_name)` into
//! `sqlite::name` and `postgres::name` tests. The PostgreSQL copy skips with one
//! `skipped:` line when `BUZZ_TEST_DATABASE_URL` is absent (a failure under `CI`).

#[macro_export]
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(buzz_core::testkit::TestBackend::Sqlite, concat!("sqlite::", stringify!($name))).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(buzz_core::testkit::TestBackend::Postgres, concat!("postgres::", stringify!($name))).await
                }
            )*
        }
    };
}
