//! The section's defaults and the `BUZZ_V1_ENABLED` alias.

use buzz_core::config::Settings;
use buzz_core::plugin::{PluginCatalog, PluginEntry};
use buzz_read_state::{ReadStatePlugin, NAME};
use std::collections::HashMap;

fn settings(env: &[(&str, &str)]) -> anyhow::Result<Settings> {
    let catalog = PluginCatalog::new().with(PluginEntry::of::<ReadStatePlugin>());
    let env: HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    catalog.load_settings_from(None, &env)
}

#[test]
fn disabled_by_default_and_enabled_by_the_alias() {
    let off = settings(&[]).expect("defaults");
    let section = off.plugins.get(NAME).expect("section");
    assert_eq!(section.enabled, Some(false));
    assert_eq!(section.options["intent_deadline_ms"], 8000);
    assert_eq!(section.options["max_response_bytes"], 1_048_576);
    assert_eq!(section.options["max_threads"], 50);
    assert_eq!(section.options["max_message_mentions"], 50);
    let on = settings(&[("BUZZ_V1_ENABLED", "true")]).expect("alias");
    assert_eq!(on.plugins.get(NAME).and_then(|s| s.enabled), Some(true));
}

#[test]
fn bad_values_refuse_to_start() {
    for (key, value) in [
        ("BUZZ__PLUGINS__READ_STATE__INTENT_DEADLINE_MS", "0"),
        ("BUZZ__PLUGINS__READ_STATE__MAX_RESPONSE_BYTES", "10"),
        ("BUZZ__PLUGINS__READ_STATE__UNKNOWN_KEY", "1"),
        ("BUZZ__PLUGINS__READ_STATE__MAX_THREADS", "0"),
        ("BUZZ__PLUGINS__READ_STATE__MAX_THREADS", "201"),
        ("BUZZ__PLUGINS__READ_STATE__MAX_MESSAGE_MENTIONS", "0"),
        ("BUZZ__PLUGINS__READ_STATE__MAX_MESSAGE_MENTIONS", "2001"),
    ] {
        assert!(settings(&[(key, value)]).is_err(), "{key}={value} accepted");
    }
}
