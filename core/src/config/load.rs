//! Where settings come from, later wins: built-in defaults, the TOML file,
//! `BUZZ__SECTION__KEY` overrides, then environment aliases (core's own and whatever the
//! caller adds: the plugin catalog passes each plugin's). Relative paths resolve here.

use super::defaults::{DEFAULTS, DEFAULT_COMMUNITY};
use super::Settings;
use anyhow::Context;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// An environment variable operators know from elsewhere that sets one config key
/// (`DATABASE_URL` → `storage.database_url`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvAlias {
    pub var: &'static str,
    /// The dotted key it sets (`plugins.<name>.enabled`).
    pub key: String,
}

/// Keys whose relative paths resolve against the config file's directory.
const PATH_KEYS: [(&str, &str); 4] = [
    ("relay", "data_dir"),
    ("policies", "access"),
    ("policies", "moderation"),
    ("storage", "database_url"),
];

impl Settings {
    /// Load from `path` (or `./config.toml` when present, else defaults) plus the
    /// environment and its `aliases`. Plugin sections are as written: the plugin catalog
    /// completes them (`PluginCatalog::load_settings`, what the binary calls).
    pub fn load(path: Option<&Path>, aliases: &[EnvAlias]) -> anyhow::Result<Settings> {
        let file = Self::file_to_read(path)?;
        let env: HashMap<String, String> = std::env::vars().collect();
        Self::load_from(file.as_deref(), &env, aliases)
    }

    /// The file [`Settings::load`] reads for `path`: `path` itself (which must exist),
    /// else `./config.toml` when present, else none (built-in defaults).
    pub fn file_to_read(path: Option<&Path>) -> anyhow::Result<Option<PathBuf>> {
        match path {
            Some(p) if !p.exists() => anyhow::bail!("config file {} does not exist", p.display()),
            Some(p) => Ok(Some(p.to_path_buf())),
            None => Ok(Some(PathBuf::from("config.toml")).filter(|p| p.exists())),
        }
    }

    /// What a failure while reading `file` is about, for error messages.
    pub fn source_label(file: Option<&Path>) -> String {
        match file {
            Some(p) => {
                let shown = std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
                format!("configuration {}", shown.display())
            }
            None => "built-in configuration".to_owned(),
        }
    }

    /// Like [`Settings::load`], with the environment supplied as a map (tests pass their
    /// own so they never race on the process environment).
    pub fn load_from(
        file: Option<&Path>,
        env: &HashMap<String, String>,
        aliases: &[EnvAlias],
    ) -> anyhow::Result<Settings> {
        // Absolute, so that paths resolved against its directory are absolute too.
        let file = file.map(std::path::absolute).transpose()?;
        let file = file.as_deref();
        Self::read(file, env, aliases).with_context(|| Self::source_label(file))
    }

    fn read(
        file: Option<&Path>,
        env: &HashMap<String, String>,
        aliases: &[EnvAlias],
    ) -> anyhow::Result<Settings> {
        let mut builder = config::Config::builder()
            .add_source(config::File::from_str(DEFAULTS, config::FileFormat::Toml));
        let mut file_keys = toml::Table::new();
        if let Some(p) = file {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            file_keys = text.parse::<toml::Table>().context("not valid TOML")?;
            builder = builder.add_source(config::File::from_str(&text, config::FileFormat::Toml));
        }
        if !file_keys.contains_key("communities") {
            builder = builder.add_source(config::File::from_str(
                DEFAULT_COMMUNITY,
                config::FileFormat::Toml,
            ));
        }
        let overrides: HashMap<String, String> = env
            .iter()
            .filter(|(k, _)| k.starts_with("BUZZ__"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        builder = builder.add_source(
            config::Environment::with_prefix("BUZZ")
                .prefix_separator("__")
                .separator("__")
                .try_parsing(true)
                .source(Some(overrides.clone())),
        );
        // Keys an environment variable set: their relative paths stay relative to the
        // working directory.
        let mut env_keys: Vec<String> = overrides
            .keys()
            .map(|k| k["BUZZ__".len()..].to_ascii_lowercase().replace("__", "."))
            .collect();
        let aliases = CORE_ALIASES
            .iter()
            .map(|(var, key)| (*var, (*key).to_owned()))
            .chain(aliases.iter().map(|a| (a.var, a.key.clone())));
        for (var, key) in aliases {
            if let Some(value) = env.get(var) {
                builder = builder.set_override(key.as_str(), parse_scalar(value))?;
                env_keys.push(key);
            }
        }
        let mut settings: Settings = builder
            .build()
            .context("reading configuration")?
            .try_deserialize()
            .context("a key has a wrong or missing value")?;
        let named = |section: &str, key: &str| {
            env_keys.iter().any(|k| k == &format!("{section}.{key}"))
                || file_keys
                    .get(section)
                    .and_then(|t| t.as_table())
                    .is_some_and(|t| t.contains_key(key))
        };
        settings.policies.access_is_default = !named("policies", "access");
        settings.policies.moderation_is_default = !named("policies", "moderation");
        if let Some(dir) = file.and_then(Path::parent) {
            let from_env = |section: &str, key: &str| {
                env_keys.iter().any(|k| k == &format!("{section}.{key}"))
            };
            settings.resolve_paths(dir, |section, key| !from_env(section, key));
        }
        settings.validate()?;
        Ok(settings)
    }

    /// Make relative paths absolute against `dir` for the keys `applies` accepts.
    fn resolve_paths(&mut self, dir: &Path, applies: impl Fn(&str, &str) -> bool) {
        let resolve = |path: &mut PathBuf| {
            if path.is_relative() && !dir.as_os_str().is_empty() {
                *path = dir.join(&*path);
            }
        };
        // Communities come from the file only: their scripts live beside it.
        for community in &mut self.communities {
            for path in community.policies.paths_mut().into_iter().flatten() {
                resolve(path);
            }
        }
        for (section, key) in PATH_KEYS {
            if !applies(section, key) {
                continue;
            }
            match (section, key) {
                ("relay", _) => resolve(&mut self.relay.data_dir),
                ("policies", "access") => resolve(&mut self.policies.access),
                ("policies", _) => resolve(&mut self.policies.moderation),
                _ => {
                    if let Some(rest) = self.storage.database_url.strip_prefix("sqlite://") {
                        let mut path = PathBuf::from(rest);
                        if !rest.is_empty() && rest != ":memory:" {
                            resolve(&mut path);
                            self.storage.database_url = format!("sqlite://{}", path.display());
                        }
                    }
                }
            }
        }
    }
}

/// Environment aliases of core's own keys.
const CORE_ALIASES: [(&str, &str); 4] = [
    ("DATABASE_URL", "storage.database_url"),
    ("REDIS_URL", "storage.redis_url"),
    ("BUZZ_AUTO_MIGRATE", "storage.auto_migrate"),
    ("BUZZ_RELAY_PRIVATE_KEY", "relay.private_key"),
];

fn parse_scalar(value: &str) -> config::Value {
    match value.to_ascii_lowercase().as_str() {
        "true" | "1" | "yes" => config::Value::from(true),
        "false" | "0" | "no" => config::Value::from(false),
        _ => config::Value::from(value.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_in(dir: &Path, file: Option<&str>, env: &[(&str, &str)]) -> anyhow::Result<Settings> {
        let path = dir.join("config.toml");
        if let Some(text) = file {
            std::fs::write(&path, text)?;
        }
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let aliases = [EnvAlias {
            var: "SAMPLE_ON",
            key: "plugins.sample.enabled".to_owned(),
        }];
        Settings::load_from(file.map(|_| path.as_path()), &env, &aliases)
    }

    fn load(file: Option<&str>, env: &[(&str, &str)]) -> anyhow::Result<Settings> {
        load_in(tempfile::tempdir()?.path(), file, env)
    }

    #[test]
    fn defaults() {
        let s = load(None, &[]).expect("defaults");
        assert_eq!(s.server.bind, "127.0.0.1:7777");
        assert_eq!(s.storage.database_url, "sqlite://./data/buzz.db");
        assert_eq!(s.communities.len(), 1);
        assert_eq!(s.communities[0].host, "localhost");
        assert!(s.policies.access_is_default && s.policies.moderation_is_default);
        // Plugin sections are the catalog's to complete: none appear by themselves.
        assert!(s.plugins.is_empty());
    }

    #[test]
    fn aliases_override_the_file() {
        let s = load(
            Some("[storage]\ndatabase_url = \"sqlite://x.db\"\n[[communities]]\nhost = \"a.example\"\nname = \"A\"\n"),
            &[
                ("DATABASE_URL", "postgres://u@h/db"),
                ("SAMPLE_ON", "true"),
                ("BUZZ__SERVER__BIND", "0.0.0.0:1"),
            ],
        )
        .expect("config");
        assert_eq!(s.storage.database_url, "postgres://u@h/db");
        assert!(s.plugin("sample").is_enabled());
        assert_eq!(s.communities[0].host, "a.example");
        assert!(s.communities[0].open);
        assert_eq!(s.server.bind, "0.0.0.0:1");
    }

    #[test]
    fn bad_values_are_refused_with_the_key() {
        let err =
            load(Some("[server]\npublic_scheme = \"ftp\"\n"), &[]).expect_err("must be refused");
        assert!(format!("{err:#}").contains("public_scheme"));
        let err =
            load(Some("[storage]\nauto_migrate = \"maybe\"\n"), &[]).expect_err("must be refused");
        assert!(
            format!("{err:#}").contains("auto_migrate") || format!("{err:#}").contains("boolean"),
            "{err:#}"
        );
    }

    #[test]
    fn relative_paths_resolve_against_the_file() {
        let dir = tempfile::tempdir().expect("dir");
        let s = load_in(
            dir.path(),
            Some("[relay]\ndata_dir = \"state\"\n[policies]\naccess = \"rules/a.lua\"\n"),
            &[("DATABASE_URL", "sqlite://env.db")],
        )
        .expect("config");
        assert_eq!(s.relay.data_dir, dir.path().join("state"));
        assert_eq!(s.policies.access, dir.path().join("rules/a.lua"));
        assert!(!s.policies.access_is_default && s.policies.moderation_is_default);
        // Defaults a file leaves alone live beside it too ...
        assert_eq!(
            s.policies.moderation,
            dir.path().join("policies/moderation.lua")
        );
        // ... but a value from the environment stays relative to the working directory.
        assert_eq!(s.storage.database_url, "sqlite://env.db");

        let s = load_in(
            dir.path(),
            Some("[storage]\ndatabase_url = \"sqlite://db/b.db\"\n"),
            &[],
        )
        .expect("config");
        assert_eq!(
            s.storage.database_url,
            format!("sqlite://{}", dir.path().join("db/b.db").display())
        );
    }
}
