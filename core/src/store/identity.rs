//! Which relay key a database belongs to.
//!
//! Relay-authored events (channel state, overlays, receipts) are signed with the relay
//! key and replaced per (kind, pubkey, `d`). Processes of one deployment that signed
//! with different keys would each keep their own copy of every channel's state, and
//! clients would see several relays' worth. So the first relay to open a database records
//! its public key, and a relay with another key refuses to start; forgetting the record
//! (`buzz-relay identity --reset`) is how a database moves to a new key on purpose.

use super::schema::relay_identity;
use super::{Conn, Store};
use crate::error::Reason;
use crate::with_conn;
use diesel::prelude::*;

/// The single row's id.
const ROW: i32 = 1;

impl Store {
    /// Record `pubkey` as this database's relay unless one is recorded already. Returns
    /// the recorded key when it differs from `pubkey`.
    pub async fn claim_identity(&self, pubkey: &str) -> Result<Option<String>, Reason> {
        let pubkey = pubkey.to_owned();
        self.write(move |conn| {
            with_conn!(conn, |c| diesel::insert_into(relay_identity::table)
                .values((
                    relay_identity::id.eq(ROW),
                    relay_identity::pubkey.eq(&pubkey)
                ))
                .on_conflict_do_nothing()
                .execute(c))?;
            let stored: String = with_conn!(conn, |c| relay_identity::table
                .select(relay_identity::pubkey)
                .first(c))?;
            Ok((stored != pubkey).then_some(stored))
        })
        .await
    }

    /// The recorded relay public key, if any.
    pub async fn identity(&self) -> Result<Option<String>, Reason> {
        self.read(|mut conn| recorded_identity(&mut conn)).await
    }

    /// Forget the recorded relay key (the next relay to start records its own).
    pub async fn reset_identity(&self) -> Result<(), Reason> {
        self.write(|conn| {
            with_conn!(conn, |c| diesel::delete(relay_identity::table).execute(c))?;
            Ok(())
        })
        .await
    }
}

/// The recorded relay public key, if any, on one connection (status tools).
pub fn recorded_identity(conn: &mut Conn<'_>) -> Result<Option<String>, Reason> {
    Ok(with_conn!(conn, |c| relay_identity::table
        .select(relay_identity::pubkey)
        .first::<String>(c)
        .optional())?)
}
