//! What a disabled plugin must still do: refuse the kinds it reserves, so that enabling
//! it later never finds client forgeries stored under them.
//!
//! Why here: every plugin suite switches its plugin off the same way and checks the same
//! refusal; one copy keeps the check (and its `invalid:` prefix) the same for all.

use super::{now, WsClient};
use crate::config::Settings;
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;

/// Set `[plugins.<plugin>] enabled` (the section is made if absent).
pub fn set_enabled(settings: &mut Settings, plugin: &str, enabled: bool) {
    settings.plugins.entry(plugin.into()).or_default().enabled = Some(enabled);
}

/// A settings tweak that turns `plugin` off.
pub fn disable(plugin: &str) -> impl FnOnce(&mut Settings) + '_ {
    move |settings| set_enabled(settings, plugin, false)
}

/// Publish one event of each of `kinds` (signed by `keys`, with `tags`) and require
/// each refused as `invalid:`. Returns the refused events, for checks of what is stored.
pub async fn assert_kinds_refused(
    ws: &mut WsClient,
    keys: &Keys,
    kinds: &[u32],
    tags: Vec<Vec<String>>,
) -> Vec<Event> {
    let mut refused = Vec::new();
    for &kind in kinds {
        let forged = keys.sign(kind, tags.clone(), "forged", now());
        let (ok, message) = ws.publish(&forged).await;
        assert!(
            !ok && message.starts_with("invalid:"),
            "kind {kind}: {message}"
        );
        refused.push(forged);
    }
    refused
}
