//! PostgreSQL: the documents of a whole insert group in one statement.
//!
//! Ingest indexes each new message in its own transaction hook; on PostgreSQL that was a
//! round trip per message. When the writer stores a group of independent events
//! together, the hook adds the message's document here instead ([`Tx::group_rows`]) and
//! the group's documents are written with one `UNNEST` insert after its last member.
//! Safe to wait: no hook of a grouped event reads the index (deletions, removals and
//! revisions, which do, are never grouped: `event_is_independent`).
//!
//! [`Tx::group_rows`]: buzz_core::plugin::Tx::group_rows

use crate::index::tsvector;
use buzz_core::error::Reason;
use buzz_core::plugin::GroupRows;
use diesel::pg::{Pg, PgConnection};
use diesel::prelude::*;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Array, BigInt, Text};

/// New documents: `events.seq` and `tsvector` literal, one array per column.
#[derive(Default)]
pub(crate) struct NewDocuments {
    seq: Vec<i64>,
    tsv: Vec<String>,
}

impl NewDocuments {
    /// Index event `seq` (just stored, so without an entry) with `tokens` (not empty).
    pub(crate) fn add(&mut self, seq: i64, tokens: &[String]) {
        self.seq.push(seq);
        self.tsv.push(tsvector(tokens));
    }
}

impl GroupRows for NewDocuments {
    fn flush(self, conn: &mut PgConnection) -> Result<(), Reason> {
        if !self.seq.is_empty() {
            self.execute(conn)?;
        }
        Ok(())
    }
}

/// What `index::add` writes for one document, for all of them; the SQL never changes
/// with their number, so the statement is prepared once per connection.
impl QueryFragment<Pg> for NewDocuments {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(
            "INSERT INTO search_documents (event_seq, tsv) \
             SELECT u.seq, CAST(u.tsv AS tsvector) FROM UNNEST(",
        );
        out.push_bind_param::<Array<BigInt>, _>(&self.seq)?;
        out.push_sql(", ");
        out.push_bind_param::<Array<Text>, _>(&self.tsv)?;
        out.push_sql(") AS u (seq, tsv) ON CONFLICT (event_seq) DO UPDATE SET tsv = EXCLUDED.tsv");
        Ok(())
    }
}

impl QueryId for NewDocuments {
    type QueryId = NewDocuments;
    const HAS_STATIC_QUERY_ID: bool = true;
}

impl<C> RunQueryDsl<C> for NewDocuments {}
