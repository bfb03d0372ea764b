//! Settings as the binary loads them: core's loader (`config`) with every built plugin's
//! environment aliases, then the `[plugins.<name>]` sections checked against the catalog
//! and completed with each plugin's defaults. Here both are known; `config` knows no
//! catalog.

use super::PluginCatalog;
use crate::config::{EnvAlias, Settings};
use anyhow::Context;
use std::collections::HashMap;
use std::path::Path;

impl PluginCatalog {
    /// [`Settings::load`] for this binary: plugin aliases applied, plugin sections
    /// checked and completed (one per built plugin).
    pub fn load_settings(&self, path: Option<&Path>) -> anyhow::Result<Settings> {
        let file = Settings::file_to_read(path)?;
        let settings = Settings::load(file.as_deref(), &self.env_aliases())?;
        self.completed(settings, file.as_deref())
    }

    /// [`Settings::load_from`] for this binary (tests pass their own environment).
    pub fn load_settings_from(
        &self,
        file: Option<&Path>,
        env: &HashMap<String, String>,
    ) -> anyhow::Result<Settings> {
        let settings = Settings::load_from(file, env, &self.env_aliases())?;
        self.completed(settings, file)
    }

    /// Every built plugin's environment aliases, as the config keys they set.
    pub fn env_aliases(&self) -> Vec<EnvAlias> {
        self.entries()
            .iter()
            .flat_map(|entry| {
                entry.env_aliases.iter().map(move |(var, key)| EnvAlias {
                    var,
                    key: format!("plugins.{}.{key}", entry.name),
                })
            })
            .collect()
    }

    fn completed(&self, mut settings: Settings, file: Option<&Path>) -> anyhow::Result<Settings> {
        settings.plugins = self
            .complete(&settings.plugins)
            .with_context(|| Settings::source_label(file))?;
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::{Plugin, PluginEntry, PluginManifest, Services};
    use serde::Deserialize;
    use std::sync::Arc;

    /// A plugin manifest for these tests: one option, one alias.
    struct Sample;

    #[derive(Debug, Default, serde::Serialize, Deserialize)]
    #[serde(default, deny_unknown_fields)]
    struct SampleConfig {
        words: Vec<String>,
    }

    impl PluginManifest for Sample {
        const NAME: &'static str = "sample";
        const ENABLED_BY_DEFAULT: bool = false;
        const ENV_ALIASES: &'static [(&'static str, &'static str)] = &[("SAMPLE_ON", "enabled")];
        type Config = SampleConfig;
        fn build(_: SampleConfig, _: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
            anyhow::bail!("not run in these tests")
        }
    }

    fn load(file: Option<&str>, env: &[(&str, &str)]) -> anyhow::Result<Settings> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("config.toml");
        if let Some(text) = file {
            std::fs::write(&path, text)?;
        }
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        PluginCatalog::new()
            .with(PluginEntry::of::<Sample>())
            .load_settings_from(file.map(|_| path.as_path()), &env)
    }

    #[test]
    fn every_built_plugin_gets_its_defaults() {
        let s = load(None, &[]).expect("defaults");
        assert_eq!(s.plugins.len(), 1);
        assert_eq!(s.plugin("sample").enabled, Some(false));
        assert_eq!(
            s.plugin("sample").options.get("words"),
            Some(&serde_json::json!([]))
        );
    }

    #[test]
    fn plugin_aliases_set_their_section() {
        let s = load(None, &[("SAMPLE_ON", "true")]).expect("config");
        assert!(s.plugin("sample").is_enabled());
    }

    #[test]
    fn plugin_sections_are_checked_against_the_catalog() {
        let err = load(Some("[plugins.nonesuch]\nenabled = true\n"), &[])
            .expect_err("an unbuilt plugin must refuse");
        let text = format!("{err:#}");
        assert!(
            text.contains("nonesuch") && text.contains("built: sample"),
            "{text}"
        );

        let err = load(Some("[plugins.sample]\nwrds = []\n"), &[])
            .expect_err("an unknown key must refuse");
        let text = format!("{err:#}");
        assert!(text.contains("wrds") && text.contains("words"), "{text}");

        let s = load(
            Some("[plugins.sample]\nenabled = true\nwords = [\"a\"]\n"),
            &[],
        )
        .expect("a good section");
        assert!(s.plugin("sample").is_enabled());
        assert_eq!(
            s.plugin("sample").options.get("words"),
            Some(&serde_json::json!(["a"]))
        );
    }
}
