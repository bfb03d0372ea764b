//! Statements built at run time with their parameters, for either backend: placeholders
//! are `?` (SQLite) or `$n` (PostgreSQL), and a list is one parameter (a JSON array read
//! by `json_each` on SQLite, an array on PostgreSQL), so a statement's parameter count
//! never depends on the request. User text only ever travels as a parameter.

use buzz_core::error::Reason;
use buzz_core::store::Conn;
use diesel::query_builder::BoxedSqlQuery;
use diesel::sql_types::{Array, BigInt, Text};
use diesel::{QueryableByName, RunQueryDsl};

/// One parameter.
#[derive(Debug, Clone)]
pub(crate) enum Param {
    Int(i64),
    Text(String),
    Texts(Vec<String>),
    Ints(Vec<i64>),
}

/// A statement being written.
pub(crate) struct Sql {
    pub text: String,
    params: Vec<Param>,
    pg: bool,
}

impl Sql {
    pub(crate) fn new(conn: &Conn<'_>) -> Sql {
        Sql {
            text: String::new(),
            params: Vec::new(),
            pg: matches!(conn, Conn::Pg(_)),
        }
    }

    pub(crate) fn is_pg(&self) -> bool {
        self.pg
    }

    /// Append text.
    pub(crate) fn push(&mut self, text: &str) -> &mut Sql {
        self.text.push_str(text);
        self
    }

    /// Append a scalar parameter's placeholder.
    pub(crate) fn param(&mut self, param: Param) -> &mut Sql {
        self.params.push(param);
        if self.pg {
            let n = self.params.len();
            self.text.push_str(&format!("${n}"));
        } else {
            self.text.push('?');
        }
        self
    }

    /// Append `column IN <list>` for a list parameter.
    pub(crate) fn in_list(&mut self, column: &str, list: Param) -> &mut Sql {
        self.text.push_str(column);
        if self.pg {
            self.text.push_str(" = ANY(");
            self.param(list);
            self.text.push(')');
        } else {
            self.text.push_str(" IN (SELECT value FROM json_each(");
            let json = match &list {
                Param::Texts(v) => serde_json::to_string(v),
                Param::Ints(v) => serde_json::to_string(v),
                Param::Int(v) => serde_json::to_string(&[v]),
                Param::Text(v) => serde_json::to_string(&[v]),
            };
            let json = json.unwrap_or_else(|_| "[]".into());
            self.param(Param::Text(json));
            self.text.push_str("))");
        }
        self
    }

    /// Run a statement that returns rows.
    pub(crate) fn load<R>(self, conn: &mut Conn<'_>) -> Result<Vec<R>, Reason>
    where
        R: QueryableByName<diesel::sqlite::Sqlite> + QueryableByName<diesel::pg::Pg> + 'static,
    {
        Ok(match conn {
            Conn::Sqlite(c) => bind_sqlite(self.text, self.params).load::<R>(*c)?,
            Conn::Pg(c) => bind_pg(self.text, self.params).load::<R>(*c)?,
        })
    }

    /// Run a statement that changes rows; how many.
    pub(crate) fn execute(self, conn: &mut Conn<'_>) -> Result<usize, Reason> {
        Ok(match conn {
            Conn::Sqlite(c) => bind_sqlite(self.text, self.params).execute(*c)?,
            Conn::Pg(c) => bind_pg(self.text, self.params).execute(*c)?,
        })
    }
}

fn bind_sqlite(
    text: String,
    params: Vec<Param>,
) -> BoxedSqlQuery<'static, diesel::sqlite::Sqlite, diesel::query_builder::SqlQuery> {
    let mut q = diesel::sql_query(text).into_boxed::<diesel::sqlite::Sqlite>();
    for p in params {
        q = match p {
            Param::Int(v) => q.bind::<BigInt, _>(v),
            Param::Text(v) => q.bind::<Text, _>(v),
            // Lists were turned into JSON text by `in_list`.
            Param::Texts(v) => q.bind::<Text, _>(serde_json::to_string(&v).unwrap_or_default()),
            Param::Ints(v) => q.bind::<Text, _>(serde_json::to_string(&v).unwrap_or_default()),
        };
    }
    q
}

fn bind_pg(
    text: String,
    params: Vec<Param>,
) -> BoxedSqlQuery<'static, diesel::pg::Pg, diesel::query_builder::SqlQuery> {
    let mut q = diesel::sql_query(text).into_boxed::<diesel::pg::Pg>();
    for p in params {
        q = match p {
            Param::Int(v) => q.bind::<BigInt, _>(v),
            Param::Text(v) => q.bind::<Text, _>(v),
            Param::Texts(v) => q.bind::<Array<Text>, _>(v),
            Param::Ints(v) => q.bind::<Array<BigInt>, _>(v),
        };
    }
    q
}

/// A count.
#[derive(QueryableByName)]
pub(crate) struct Count {
    #[diesel(sql_type = BigInt)]
    pub n: i64,
}

/// One number, maybe absent.
#[derive(QueryableByName)]
pub(crate) struct MaybeInt {
    #[diesel(sql_type = diesel::sql_types::Nullable<BigInt>)]
    pub v: Option<i64>,
}
