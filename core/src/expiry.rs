//! The NIP-40 purge: every `storage.expired_purge_interval_secs` each process deletes
//! expired events, at most `storage.expired_purge_batch` per writer job, with core's
//! rows that reference them (`store::purge`) and every enabled plugin's
//! (`Plugin::on_events_purged`), in one transaction per batch. Reads never serve an expired
//! event anyway; this is what gives its bytes back. Several processes on one
//! PostgreSQL purge at once without overlap (`store::purge::pick_expired` skips rows
//! another has locked).

use crate::clock::Clock;
use crate::error::Reason;
use crate::metrics::Metrics;
use crate::plugin::{Plugin, Services};
use crate::store::{purge, Store};
use std::sync::Arc;
use std::time::Duration;

/// Start the purge task, or nothing when the interval is 0.
pub(crate) fn start(
    services: &Services,
    plugins: Arc<[Arc<dyn Plugin>]>,
) -> Option<tokio::task::JoinHandle<()>> {
    let storage = &services.settings.storage;
    if storage.expired_purge_interval_secs == 0 {
        return None;
    }
    let period = Duration::from_secs(storage.expired_purge_interval_secs);
    let purger = Purger {
        store: services.store.clone(),
        clock: services.clock.clone(),
        metrics: services.metrics.clone(),
        plugins,
        batch: storage.expired_purge_batch.max(1),
    };
    Some(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(period);
        // A slow purge (a backlog) is followed by a full interval, not a burst of ticks.
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            if let Err(err) = purger.run().await {
                tracing::warn!(error = %err, "expired-event purge failed; next tick retries");
            }
        }
    }))
}

struct Purger {
    store: Store,
    clock: Arc<dyn Clock>,
    metrics: Arc<Metrics>,
    plugins: Arc<[Arc<dyn Plugin>]>,
    batch: u32,
}

impl Purger {
    /// Purge batches until one comes back short: everything expired by now is gone.
    /// Each batch is its own writer job, so ingest goes on between them.
    async fn run(&self) -> Result<usize, Reason> {
        let mut total = 0;
        loop {
            let (now, batch, plugins) = (self.clock.now_secs(), self.batch, self.plugins.clone());
            let purged = self
                .store
                .write(move |conn| {
                    let purged = purge::pick_expired(conn, now, batch)?;
                    if purged.is_empty() {
                        return Ok(0);
                    }
                    for plugin in plugins.iter() {
                        plugin.on_events_purged(conn, &purged)?;
                    }
                    purge::delete_purged(conn, &purged)?;
                    Ok(purged.len())
                })
                .await?;
            self.metrics.expired_purged(purged);
            total += purged;
            if purged < batch as usize {
                return Ok(total);
            }
        }
    }
}
