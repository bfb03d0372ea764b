//! What a plugin crate declares about itself, read before anything starts: its name, its
//! config section (type, defaults, validation, environment aliases), the kinds it
//! reserves, its tables and the status data it offers to `buzz-admin`.
//!
//! A plugin crate implements [`PluginManifest`] on a marker type; the binary lists
//! [`PluginEntry::of`] of each built plugin in one [`PluginCatalog`]. Core reads every
//! plugin only through the catalog, so it never names one.

use super::admin::AdminPanel;
use super::routes::{DeclaredRoute, Route, RouteAuth, RouteBody, RouteMethod};
use super::{Plugin, Services};
use crate::config::{PluginSection, Settings};
use crate::error::Reason;
use crate::store::{Conn, EmbeddedMigrations, MigrationSet};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use std::sync::Arc;

/// Tables a plugin owns: one embedded migration directory per backend, kept in step
/// (same names). Apply whether or not the plugin is enabled, so enabling it later needs no
/// migration step and disabling it loses nothing.
///
/// ```ignore
/// static SQLITE: EmbeddedMigrations = embed_migrations!("migrations/sqlite");
/// static POSTGRES: EmbeddedMigrations = embed_migrations!("migrations/postgres");
/// fn migrations() -> Option<PluginMigrations> {
///     Some(PluginMigrations { sqlite: &SQLITE, postgres: &POSTGRES })
/// }
/// ```
#[derive(Clone, Copy)]
pub struct PluginMigrations {
    pub sqlite: &'static EmbeddedMigrations,
    pub postgres: &'static EmbeddedMigrations,
}

/// Everything about a plugin that is known without running it.
pub trait PluginManifest: 'static {
    /// The config name: `[plugins.<NAME>]`, NIP-11 field, migration owner.
    const NAME: &'static str;
    /// Whether the plugin runs when its section does not say `enabled`.
    const ENABLED_BY_DEFAULT: bool;
    /// Environment variables that set a key of this section, as `(VARIABLE, key)`; e.g.
    /// `("BUZZ_V1_ENABLED", "enabled")`. `BUZZ__PLUGINS__<NAME>__<KEY>` always works too.
    const ENV_ALIASES: &'static [(&'static str, &'static str)] = &[];
    /// Kinds only the relay authors for this plugin. Core refuses them from clients on
    /// every transport whenever the plugin is built (enabled or not), so enabling it later
    /// never finds client forgeries stored under its kinds.
    const RESERVED_KINDS: &'static [u32] = &[];
    /// Kinds whose events always belong to a channel (carry `h`), reserved or not: an
    /// unauthenticated filter naming one is answered `auth-required:` like one naming a
    /// chat kind.
    const CHANNEL_KINDS: &'static [u32] = &[];
    /// The NIPs this plugin implements (numbered ones; NIP-11 `supported_nips` lists
    /// core's and every *enabled* plugin's).
    const SUPPORTED_NIPS: &'static [u32] = &[];
    /// Every HTTP route [`Plugin::routes`] mounts, exactly: the relay refuses to start
    /// when the two differ, so the console's list of routes is never stale.
    const ROUTES: &'static [DeclaredRoute] = &[];
    /// Every table its migrations create, in an order that respects their foreign keys.
    /// `buzz-relay copy` walks exactly these (after core's), so a plugin's data moves
    /// with the database without the command knowing it; a table a migration creates
    /// and this list misses makes `copy` refuse to start (`store::transfer::tables`).
    const TABLES: &'static [&'static str] = &[];
    /// Tables its migrations create that hold only what the plugin derives from stored
    /// events (an index it can rebuild), on either backend (a name may exist on one
    /// only). `copy` leaves them out — the plugin rebuilds them on the destination — and
    /// counts them as declared.
    const DERIVED_TABLES: &'static [&'static str] = &[];

    /// Maintenance commands, as `(command, what it does)`: `buzz-relay <NAME> <command>`
    /// runs [`PluginManifest::run_command`] on one connection of the configured database,
    /// whether or not a relay is running beside it.
    const COMMANDS: &'static [(&'static str, &'static str)] = &[];

    /// The section's keys besides `enabled`. Use `#[serde(default, deny_unknown_fields)]`:
    /// `Default` is the documented default, and an unknown key refuses to start, naming
    /// the keys accepted.
    type Config: DeserializeOwned + Serialize + Default + Send + Sync + 'static;

    /// Checks serde cannot express (ranges, combinations). Runs before anything is
    /// created on disk.
    fn validate(_config: &Self::Config) -> anyhow::Result<()> {
        Ok(())
    }

    /// The plugin's tables, if any.
    fn migrations() -> Option<PluginMigrations> {
        None
    }

    /// Status for the admin console, read from the database (plain data, no UI). Runs in
    /// `buzz-admin`, not in the relay: it sees the config and the database only.
    fn admin_panel(_config: &Self::Config, _conn: &mut Conn<'_>) -> Result<AdminPanel, Reason> {
        Ok(AdminPanel::default())
    }

    /// Run `command`, one of [`PluginManifest::COMMANDS`] (core checks that first) and
    /// return the one-line summary printed on success. Blocking: it runs on its own thread.
    fn run_command(
        command: &str,
        _config: &Self::Config,
        _settings: &Settings,
        _conn: &mut Conn<'_>,
    ) -> anyhow::Result<String> {
        anyhow::bail!("plugin {} has no command {command}", Self::NAME)
    }

    /// Build the running plugin (only when enabled).
    fn build(config: Self::Config, services: &Services) -> anyhow::Result<Arc<dyn Plugin>>;
}

/// A section's keys besides `enabled`, as read.
type Options = Map<String, Value>;

/// [`PluginManifest::run_command`] with its config type erased.
type RunCommand = fn(&str, &Options, &Settings, &mut Conn<'_>) -> anyhow::Result<String>;

/// A [`PluginManifest`] with its types erased, so plugins of different config types sit in
/// one list.
#[derive(Clone)]
pub struct PluginEntry {
    pub name: &'static str,
    pub enabled_by_default: bool,
    pub env_aliases: &'static [(&'static str, &'static str)],
    pub reserved_kinds: &'static [u32],
    pub channel_kinds: &'static [u32],
    pub supported_nips: &'static [u32],
    pub routes: &'static [DeclaredRoute],
    /// [`PluginManifest::TABLES`].
    pub tables: &'static [&'static str],
    /// [`PluginManifest::DERIVED_TABLES`].
    pub derived_tables: &'static [&'static str],
    pub migrations: Option<PluginMigrations>,
    /// [`PluginManifest::COMMANDS`].
    pub commands: &'static [(&'static str, &'static str)],
    options: fn(&Options) -> anyhow::Result<Options>,
    run_command: RunCommand,
    build: fn(&Options, &Services) -> anyhow::Result<Arc<dyn Plugin>>,
    admin_panel: fn(&Map<String, Value>, &mut Conn<'_>) -> Result<AdminPanel, Reason>,
}

impl PluginEntry {
    pub fn of<M: PluginManifest>() -> PluginEntry {
        PluginEntry {
            name: M::NAME,
            enabled_by_default: M::ENABLED_BY_DEFAULT,
            env_aliases: M::ENV_ALIASES,
            reserved_kinds: M::RESERVED_KINDS,
            channel_kinds: M::CHANNEL_KINDS,
            supported_nips: M::SUPPORTED_NIPS,
            routes: M::ROUTES,
            tables: M::TABLES,
            derived_tables: M::DERIVED_TABLES,
            migrations: M::migrations(),
            commands: M::COMMANDS,
            options: effective_options::<M>,
            run_command: run_command::<M>,
            build: build::<M>,
            admin_panel: admin_panel::<M>,
        }
    }

    /// The section's options with every default filled in, after validation.
    pub fn effective_options(
        &self,
        given: &Map<String, Value>,
    ) -> anyhow::Result<Map<String, Value>> {
        (self.options)(given)
    }

    pub fn build(
        &self,
        section: &PluginSection,
        services: &Services,
    ) -> anyhow::Result<Arc<dyn Plugin>> {
        (self.build)(&section.options, services)
    }

    pub fn admin_panel(
        &self,
        section: &PluginSection,
        conn: &mut Conn<'_>,
    ) -> Result<AdminPanel, Reason> {
        (self.admin_panel)(&section.options, conn)
    }

    /// Run maintenance command `command` of this plugin with its section as configured
    /// (enabled or not: a command may clean up after a plugin that was turned off).
    pub fn run_command(
        &self,
        command: &str,
        section: &PluginSection,
        settings: &Settings,
        conn: &mut Conn<'_>,
    ) -> anyhow::Result<String> {
        if !self.commands.iter().any(|(name, _)| *name == command) {
            let known: Vec<&str> = self.commands.iter().map(|(name, _)| *name).collect();
            anyhow::bail!(
                "plugin {} has no command {command:?} (it has: {})",
                self.name,
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            );
        }
        (self.run_command)(command, &section.options, settings, conn)
    }

    /// `Err` naming the first route `mounted` has that the manifest does not declare, or
    /// declares that is not mounted.
    pub fn check_routes(&self, mounted: &[Route]) -> anyhow::Result<()> {
        if let Some(bad) = self.routes.iter().find(|d| {
            d.body == RouteBody::Streamed
                && d.auth == RouteAuth::Nip98
                && d.method == RouteMethod::Post
        }) {
            anyhow::bail!(
                "plugin {} declares {bad}: NIP-98 on a POST needs the whole body before \
                 the handler runs, so that route cannot be streamed",
                self.name
            );
        }
        if let Some(extra) = mounted
            .iter()
            .find(|r| !self.routes.iter().any(|d| r.is(d)))
        {
            anyhow::bail!(
                "plugin {} mounts {} {} ({:?}), which its manifest's ROUTES does not declare",
                self.name,
                extra.method,
                extra.path,
                extra.auth
            );
        }
        if let Some(missing) = self
            .routes
            .iter()
            .find(|d| !mounted.iter().any(|r| r.is(d)))
        {
            anyhow::bail!(
                "plugin {} declares {missing} in its manifest's ROUTES but does not mount it",
                self.name
            );
        }
        Ok(())
    }

    /// This plugin's migrations, labelled with its name.
    pub fn migration_set(&self) -> Option<MigrationSet> {
        self.migrations.map(|m| MigrationSet {
            owner: self.name,
            sqlite: m.sqlite,
            postgres: m.postgres,
        })
    }
}

fn parse<M: PluginManifest>(options: &Map<String, Value>) -> anyhow::Result<M::Config> {
    let config: M::Config = serde_json::from_value(Value::Object(options.clone()))
        .map_err(|e| anyhow::anyhow!("[plugins.{}]: {e}", M::NAME))?;
    M::validate(&config).map_err(|e| anyhow::anyhow!("[plugins.{}]: {e:#}", M::NAME))?;
    Ok(config)
}

fn effective_options<M: PluginManifest>(
    options: &Map<String, Value>,
) -> anyhow::Result<Map<String, Value>> {
    let config = parse::<M>(options)?;
    match serde_json::to_value(config)? {
        Value::Object(map) => Ok(map),
        // A config that serializes to something else has no keys to show.
        _ => Ok(Map::new()),
    }
}

fn build<M: PluginManifest>(
    options: &Map<String, Value>,
    services: &Services,
) -> anyhow::Result<Arc<dyn Plugin>> {
    M::build(parse::<M>(options)?, services)
}

fn run_command<M: PluginManifest>(
    command: &str,
    options: &Map<String, Value>,
    settings: &Settings,
    conn: &mut Conn<'_>,
) -> anyhow::Result<String> {
    M::run_command(command, &parse::<M>(options)?, settings, conn)
}

fn admin_panel<M: PluginManifest>(
    options: &Map<String, Value>,
    conn: &mut Conn<'_>,
) -> Result<AdminPanel, Reason> {
    let config = parse::<M>(options).map_err(Reason::Internal)?;
    M::admin_panel(&config, conn)
}

/// The plugins built into one binary, in registration order (which is also hook order).
#[derive(Clone, Default)]
pub struct PluginCatalog {
    entries: Vec<PluginEntry>,
}

impl PluginCatalog {
    pub fn new() -> PluginCatalog {
        PluginCatalog::default()
    }

    /// Add a plugin. Names must be unique.
    pub fn with(mut self, entry: PluginEntry) -> PluginCatalog {
        self.entries.retain(|e| e.name != entry.name);
        self.entries.push(entry);
        self
    }

    pub fn entries(&self) -> &[PluginEntry] {
        &self.entries
    }

    pub fn get(&self, name: &str) -> Option<&PluginEntry> {
        self.entries.iter().find(|e| e.name == name)
    }

    /// `a, b, c`, or `none` — for messages that name what is built.
    pub fn names(&self) -> String {
        if self.entries.is_empty() {
            return "none".to_owned();
        }
        self.entries
            .iter()
            .map(|e| e.name)
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Every kind a built plugin reserves for the relay.
    pub fn reserved_kinds(&self) -> Vec<u32> {
        self.entries
            .iter()
            .flat_map(|e| e.reserved_kinds.iter().copied())
            .collect()
    }

    /// Every kind a built plugin declares channel-scoped (`CHANNEL_KINDS`: what the
    /// access service asks anonymous filters about). Reserved kinds are not channel
    /// kinds by themselves: a relay-authored kind may well be public.
    pub fn channel_kinds(&self) -> Vec<u32> {
        self.entries
            .iter()
            .flat_map(|e| e.channel_kinds)
            .copied()
            .collect()
    }

    /// Every table of every built plugin (enabled or not), with its owner, in catalog
    /// order: what `copy` walks after core's.
    pub fn tables(&self) -> Vec<(&'static str, &'static str)> {
        self.entries
            .iter()
            .flat_map(|e| e.tables.iter().map(|t| (e.name, *t)))
            .collect()
    }

    /// Every built plugin's derived tables ([`PluginManifest::DERIVED_TABLES`]).
    pub fn derived_tables(&self) -> Vec<&'static str> {
        self.entries
            .iter()
            .flat_map(|e| e.derived_tables.iter().copied())
            .collect()
    }

    /// Migrations of every built plugin (enabled or not).
    pub fn migration_sets(&self) -> Vec<MigrationSet> {
        self.entries
            .iter()
            .filter_map(PluginEntry::migration_set)
            .collect()
    }

    /// Check `sections` against what is built and complete them: an unknown plugin name or
    /// a bad section is an error naming what is accepted; a missing section gets the
    /// plugin's defaults. The result has one section per built plugin, options filled in.
    pub fn complete(
        &self,
        sections: &std::collections::BTreeMap<String, PluginSection>,
    ) -> anyhow::Result<std::collections::BTreeMap<String, PluginSection>> {
        for name in sections.keys() {
            if self.get(name).is_none() {
                anyhow::bail!(
                    "[plugins.{name}]: this binary has no plugin {name:?} (built: {})",
                    self.names()
                );
            }
        }
        let mut out = std::collections::BTreeMap::new();
        for entry in &self.entries {
            let given = sections.get(entry.name);
            let enabled = given
                .and_then(|s| s.enabled)
                .unwrap_or(entry.enabled_by_default);
            let options =
                entry.effective_options(given.map(|s| &s.options).unwrap_or(&Map::new()))?;
            out.insert(
                entry.name.to_owned(),
                PluginSection {
                    enabled: Some(enabled),
                    options,
                },
            );
        }
        Ok(out)
    }
}
