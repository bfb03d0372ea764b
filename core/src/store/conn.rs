//! One connection type over both backends.
//!
//! Store code is written once against the diesel DSL inside [`with_conn!`], which expands
//! the body once per backend so each copy is type-checked for its own connection.

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
}
