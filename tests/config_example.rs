//! config.example.toml documents every key with its default: loaded with this binary's
//! plugins it must equal the built-in defaults, and it must have a section for every
//! built plugin (and none for a plugin that is not built).

use std::collections::HashMap;
use std::path::Path;

#[test]
fn example_config_equals_the_defaults_of_core_and_every_plugin() {
    let catalog = buzz_relay::catalog();
    let dir = tempfile::tempdir().expect("temp dir");
    let example = dir.path().join("config.toml");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("config.example.toml"),
        &example,
    )
    .expect("copy the example");
    let empty = dir.path().join("empty.toml");
    std::fs::write(&empty, "").expect("empty config");

    let mut documented = catalog
        .load_settings_from(Some(&example), &HashMap::new())
        .expect("example loads");
    let defaults = catalog
        .load_settings_from(Some(&empty), &HashMap::new())
        .expect("defaults load");
    // The example names the default policy paths explicitly; that is the only difference.
    assert!(!documented.policies.access_is_default && !documented.policies.moderation_is_default);
    documented.policies.access_is_default = true;
    documented.policies.moderation_is_default = true;
    assert_eq!(format!("{documented:?}"), format!("{defaults:?}"));

    let text = std::fs::read_to_string(&example).expect("read");
    for entry in catalog.entries() {
        assert!(
            text.contains(&format!("[plugins.{}]", entry.name)),
            "config.example.toml documents [plugins.{}]",
            entry.name
        );
    }
}
