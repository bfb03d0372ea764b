//! config.example.toml must stay loadable and equal to the built-in defaults.

use buzz_core::config::Settings;
use std::collections::HashMap;
use std::path::Path;

#[test]
fn example_config_loads_and_matches_defaults() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config.example.toml");
    let example = Settings::load_from(Some(&path), &HashMap::new()).expect("example loads");
    let defaults = Settings::load_from(None, &HashMap::new()).expect("defaults load");
    assert_eq!(format!("{example:?}"), format!("{defaults:?}"));
}
