//! What the plugin declares about itself ([`ChannelWindowsPlugin`]): its section, its
//! reserved kinds, its status for the admin console.

use crate::budget::ThreadBudgets;
use crate::{ChannelWindows, CHANNEL_BOUNDS_KIND, NAME, SUMMARY_KIND, THREAD_BOUNDS_KIND};
use buzz_core::error::Reason;
use buzz_core::plugin::{AdminPanel, Plugin, PluginManifest, Services};
use buzz_core::store::Conn;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// `[plugins.channel_windows]`: the allowance all thread windows of one query share
/// (NIP-CW "Resource Limits and Recovery"), advertised in NIP-11. A charge over any of
/// them answers the whole query with 503, never a partial page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Auxiliary-closure SQL statements per query.
    pub thread_aux_scans: u64,
    /// Raw reply and auxiliary rows read per query, probes and tombstones included.
    pub thread_raw_rows: u64,
    /// Stored content plus serialized tags bytes of those rows.
    pub thread_payload_bytes: u64,
    /// Serialized bytes of the events answered.
    pub thread_output_bytes: u64,
    /// Wall time for all thread windows of a query, access refresh included.
    pub thread_deadline_ms: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config::from(ThreadBudgets::default())
    }
}

impl From<ThreadBudgets> for Config {
    fn from(b: ThreadBudgets) -> Config {
        Config {
            thread_aux_scans: b.aux_scans,
            thread_raw_rows: b.raw_rows,
            thread_payload_bytes: b.payload_bytes,
            thread_output_bytes: b.output_bytes,
            thread_deadline_ms: u64::try_from(b.deadline.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

impl Config {
    pub fn budgets(&self) -> ThreadBudgets {
        ThreadBudgets {
            aux_scans: self.thread_aux_scans,
            raw_rows: self.thread_raw_rows,
            payload_bytes: self.thread_payload_bytes,
            output_bytes: self.thread_output_bytes,
            deadline: Duration::from_millis(self.thread_deadline_ms),
        }
    }
}

/// The manifest the binary registers: `PluginEntry::of::<ChannelWindowsPlugin>()`.
pub struct ChannelWindowsPlugin;

impl PluginManifest for ChannelWindowsPlugin {
    const NAME: &'static str = NAME;
    const ENABLED_BY_DEFAULT: bool = true;
    const RESERVED_KINDS: &'static [u32] = &[SUMMARY_KIND, CHANNEL_BOUNDS_KIND, THREAD_BOUNDS_KIND];
    // Summaries and bounds describe one channel: before AUTH they are auth-required.
    const CHANNEL_KINDS: &'static [u32] = &[SUMMARY_KIND, CHANNEL_BOUNDS_KIND, THREAD_BOUNDS_KIND];
    type Config = Config;

    fn validate(config: &Config) -> anyhow::Result<()> {
        if config.thread_deadline_ms > 60_000 {
            anyhow::bail!("thread_deadline_ms must be at most 60000 (a minute)");
        }
        Ok(())
    }

    /// The budgets in force: what an operator checks first when clients report 503s.
    fn admin_panel(config: &Config, _conn: &mut Conn<'_>) -> Result<AdminPanel, Reason> {
        let b = config.budgets();
        Ok(AdminPanel::default()
            .fact("thread aux scans / query", b.aux_scans)
            .fact("thread raw rows / query", b.raw_rows)
            .fact("thread payload bytes / query", b.payload_bytes)
            .fact("thread output bytes / query", b.output_bytes)
            .fact(
                "thread deadline",
                format!("{} ms", config.thread_deadline_ms),
            ))
    }

    fn build(config: Config, services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
        Ok(Arc::new(ChannelWindows::new(services, config.budgets())))
    }
}
