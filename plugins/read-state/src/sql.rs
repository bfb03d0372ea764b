//! The read-state plugin's statements are SQL text run through core's
//! [`buzz_core::store::prepared`] (one text for both backends, prepared once per
//! connection), because its reads join core's `events` and `thread_metadata` with the
//! plugin's own tables, which core's diesel schema does not declare joinable. This file
//! holds the small row types those statements read.

pub(crate) use buzz_core::store::prepared::{execute, first, load, Val};
use diesel::sql_types::{BigInt, Nullable, Text};
use diesel::QueryableByName;

/// One optional BIGINT (`MAX(...) AS v`, `COUNT(*) AS v`).
#[derive(QueryableByName)]
pub(crate) struct OptI64 {
    #[diesel(sql_type = Nullable<BigInt>)]
    pub v: Option<i64>,
}

/// One BIGINT.
#[derive(QueryableByName)]
pub(crate) struct I64 {
    #[diesel(sql_type = BigInt)]
    pub v: i64,
}

/// One message id.
#[derive(QueryableByName)]
pub(crate) struct Id {
    #[diesel(sql_type = Text)]
    pub id: String,
}
