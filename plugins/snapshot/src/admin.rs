//! Operator access to the captures of a relay, from whichever store it uses (Redis when
//! `storage.redis_url` is set, else its database): what `buzz-admin` lists, and the
//! removal of a community's captures and quota charges when the community goes.

use crate::state::{CaptureInfo, CaptureStore, DbCaptures, RedisCaptures};
use buzz_core::config::Settings;
use buzz_core::error::Reason;
use buzz_core::redis_link::RedisLink;
use buzz_core::store::{Conn, Store};
use std::sync::Arc;
use std::time::Duration;

pub struct Captures {
    store: Arc<dyn CaptureStore>,
}

impl Captures {
    /// The captures a relay with `settings` keeps; `store` is its database.
    pub async fn of_relay(settings: &Settings, store: Store) -> anyhow::Result<Captures> {
        match Captures::in_redis(settings).await {
            Some(redis) => redis,
            None => Ok(Captures {
                store: Arc::new(DbCaptures::new(store)),
            }),
        }
    }

    /// The captures a relay with `settings` keeps in Redis; `None` when it keeps them in
    /// its database (read those with [`captures_in_database`]).
    pub async fn in_redis(settings: &Settings) -> Option<anyhow::Result<Captures>> {
        if settings.storage.redis_url.is_empty() {
            return None;
        }
        let connect = async {
            let client = redis::Client::open(settings.storage.redis_url.as_str())?;
            let deadline = Duration::from_millis(settings.storage.redis_timeout_ms);
            let link = Arc::new(RedisLink::connect(client, deadline).await?);
            let store: Arc<dyn CaptureStore> =
                Arc::new(RedisCaptures::new(link, &settings.storage.redis_prefix));
            Ok(Captures { store })
        };
        Some(connect.await)
    }

    /// Every capture and registration lease.
    pub async fn list(&self) -> Result<Vec<CaptureInfo>, Reason> {
        self.store.list().await
    }

    /// Remove every capture, lease and quota charge of `community` (the community was
    /// deleted); how many captures went. Their tokens answer `snapshot_reset` after.
    pub async fn forget_community(&self, community: i64) -> Result<usize, Reason> {
        self.store.forget_community(community).await
    }
}

/// Every capture and lease kept in the database `conn` reads (the embedded store).
pub fn captures_in_database(conn: &mut Conn<'_>) -> Result<Vec<CaptureInfo>, Reason> {
    crate::state::db::list_in(conn)
}
