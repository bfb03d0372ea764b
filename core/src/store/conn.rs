//! One connection type over both backends.
//!
//! Store code is written once against the diesel DSL inside [`with_conn!`], which expands
//! the body once per backend so each copy is type-checked for its own connection.

use crate::error::Reason;
use diesel::pg::PgConnection;
use diesel::sqlite::SqliteConnection;

/// A borrowed connection of either backend. Plugins receive one inside write
/// transactions and read closures.
pub enum Conn<'a> {
    Sqlite(&'a mut SqliteConnection),
    Pg(&'a mut PgConnection),
}

/// Which database a store runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// Run `$body` with `$c` bound to the concrete connection inside a [`Conn`].
///
/// ```ignore
/// let n: i64 = with_conn!(conn, |c| events::table.count().get_result(c))?;
/// ```
#[macro_export]
macro_rules! with_conn {
    ($conn:expr, |$c:ident| $body:expr) => {
        match $conn {
            $crate::store::Conn::Sqlite($c) => {
                let $c: &mut $crate::store::SqliteConnection = $c;
                $body
            }
            $crate::store::Conn::Pg($c) => {
                let $c: &mut $crate::store::PgConnection = $c;
                $body
            }
        }
    };
}

impl Conn<'_> {
    pub fn backend(&self) -> Backend {
        match self {
            Conn::Sqlite(_) => Backend::Sqlite,
            Conn::Pg(_) => Backend::Postgres,
        }
    }

    /// Run `f` in a transaction — a savepoint when one is already open. An `Err` rolls
    /// back everything `f` did.
    pub fn savepoint<R, E>(&mut self, f: impl FnOnce(&mut Conn<'_>) -> Result<R, E>) -> Result<R, E>
    where
        E: From<diesel::result::Error>,
    {
        use diesel::Connection;
        match self {
            Conn::Sqlite(c) => c.transaction(|c| f(&mut Conn::Sqlite(c))),
            Conn::Pg(c) => c.transaction(|c| f(&mut Conn::Pg(c))),
        }
    }

    /// Run `f` in one read-only transaction that sees a single moment of the database
    /// throughout: PostgreSQL `REPEATABLE READ READ ONLY`; SQLite a deferred transaction
    /// (in WAL mode its first read fixes the moment every later read sees). For reads
    /// that must not tear: several statements describing one moment.
    pub fn repeatable_read<R, E>(
        &mut self,
        f: impl FnOnce(&mut Conn<'_>) -> Result<R, E>,
    ) -> Result<R, E>
    where
        E: From<diesel::result::Error>,
    {
        use diesel::Connection;
        match self {
            Conn::Sqlite(c) => c.transaction(|c| f(&mut Conn::Sqlite(c))),
            Conn::Pg(c) => c
                .build_transaction()
                .repeatable_read()
                .read_only()
                .run(|c| f(&mut Conn::Pg(c))),
        }
    }

    /// Run `f` before `deadline`: each of its statements is bounded by the time left
    /// (on PostgreSQL by the database, through [`Conn::with_statement_timeout`]), never by
    /// more than `cap_ms`, the session's own bound (`storage.statement_timeout_ms`; 0 =
    /// none). A deadline already passed fails with `Reason::Unavailable` naming `what`,
    /// and `f` does not run — a job that waited in a queue past its request's deadline
    /// changes nothing.
    pub fn before_deadline<R>(
        &mut self,
        deadline: std::time::Instant,
        cap_ms: u64,
        what: &str,
        f: impl FnOnce(&mut Conn<'_>) -> Result<R, Reason>,
    ) -> Result<R, Reason> {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(Reason::Unavailable(format!(
                "{what} deadline passed; retry with backoff"
            )));
        }
        // Rounded up: the database never cancels before the deadline itself.
        let left_ms = u64::try_from(left.as_micros().div_ceil(1000)).unwrap_or(u64::MAX);
        let bound = if cap_ms == 0 {
            left_ms
        } else {
            left_ms.min(cap_ms)
        };
        self.with_statement_timeout(bound, f)
    }

    /// Run `f` with a tighter PostgreSQL `statement_timeout` (milliseconds) than the
    /// session's, so a deadline shorter than `storage.statement_timeout_ms` (a plugin's
    /// 2 s statements, say) is enforced by the database inside each statement, not only
    /// between them. A cancelled statement fails `f` with the database's timeout error
    /// (a retryable `error:` / 503 through `Reason`). Runs in a transaction (a savepoint
    /// inside the writer's); the session's bound applies again afterwards, also to the
    /// rest of an enclosing transaction. SQLite has no statement deadline: `f` runs as is.
    pub fn with_statement_timeout<R, E>(
        &mut self,
        timeout_ms: u64,
        f: impl FnOnce(&mut Conn<'_>) -> Result<R, E>,
    ) -> Result<R, E>
    where
        E: From<diesel::result::Error>,
    {
        use diesel::sql_types::Text;
        use diesel::{Connection, QueryableByName, RunQueryDsl};
        #[derive(QueryableByName)]
        struct Setting {
            #[diesel(sql_type = Text)]
            value: String,
        }
        let set = |c: &mut PgConnection, value: &str| {
            diesel::sql_query("SELECT set_config('statement_timeout', $1, true) AS value")
                .bind::<Text, _>(value)
                .get_result::<Setting>(c)
        };
        match self {
            Conn::Sqlite(_) => f(self),
            Conn::Pg(c) => c.transaction(|c| {
                // `set_config(…, true)` lasts to the end of the transaction; inside the
                // writer's that is the whole batch, so the previous value is put back.
                let previous =
                    diesel::sql_query("SELECT current_setting('statement_timeout') AS value")
                        .get_result::<Setting>(c)?;
                set(c, &timeout_ms.to_string())?;
                let out = f(&mut Conn::Pg(c))?;
                set(c, &previous.value)?;
                Ok(out)
            }),
        }
    }
}
