//! The plugins built into `buzz-relay`: the one list of them. The relay binary
//! (`main.rs`) starts them, `buzz-admin` reports on them; nothing else names a plugin.

use buzz_core::plugin::{PluginCatalog, PluginEntry};

/// Every plugin this build carries, in hook order.
pub fn catalog() -> PluginCatalog {
    PluginCatalog::new()
        .with(PluginEntry::of::<buzz_channel_windows::ChannelWindowsPlugin>())
        // Before artifacts: it claims NIP-AR's "snapshot" filters, artifacts the rest.
        .with(PluginEntry::of::<buzz_snapshot::SnapshotPlugin>())
        .with(PluginEntry::of::<buzz_artifacts::ArtifactsPlugin>())
        .with(PluginEntry::of::<buzz_read_state::ReadStatePlugin>())
        .with(PluginEntry::of::<buzz_sync::SyncPlugin>())
        // After artifacts: its hook reads the head row artifacts' hook just wrote.
        .with(PluginEntry::of::<buzz_search::SearchPlugin>())
        .with(PluginEntry::of::<buzz_media::MediaPlugin>())
}
