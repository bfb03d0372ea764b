//! Gathering the status report (data layer) and formatting it (display), kept apart so a
//! UI can draw the same [`Report`].

use anyhow::Context;
use buzz_core::access::CommunityScripts;
use buzz_core::config::Settings;
use buzz_core::plugin::{AdminPanel, PluginCatalog};
use buzz_core::store::{
    community_stats, recorded_identity, CommunityStats as CommunityStatus, MigrationStatus, Store,
};
use std::fmt;

/// A policy script and whether it loads.
pub struct PolicyStatus {
    pub path: String,
    pub verdict: Result<Vec<&'static str>, String>,
}

/// A built plugin: whether it runs, its tables, and the status it reports.
pub struct PluginStatus {
    pub name: String,
    pub enabled: bool,
    /// The HTTP routes it mounts when enabled (its manifest's declaration, which the
    /// relay holds it to), e.g. `GET /buzz/v1/me/sidebar (NIP-98)`.
    pub routes: Vec<String>,
    /// Kinds only the relay authors for it.
    pub reserved_kinds: Vec<u32>,
    /// Its migrations: (version, applied).
    pub migrations: Vec<(String, bool)>,
    /// `Err` when the panel could not be read (e.g. its tables are not migrated yet).
    pub panel: Result<AdminPanel, String>,
}

pub struct Report {
    pub database: String,
    pub migrations: MigrationStatus,
    /// The relay key the database belongs to (`None`: not recorded yet, or migrations
    /// pending).
    pub relay_identity: Option<String>,
    pub communities: Vec<CommunityStatus>,
    pub plugins: Vec<PluginStatus>,
    pub policies: Option<Vec<PolicyStatus>>,
}

impl Report {
    pub fn gather(settings: &Settings, catalog: &PluginCatalog) -> anyhow::Result<Report> {
        let url = &settings.storage.database_url;
        let migrations =
            Store::migrations(url, &catalog.migration_sets()).context("opening the database")?;
        let status = migrations.status()?;
        let communities = if status.applied.is_empty() {
            Vec::new()
        } else {
            migrations
                .with_conn(|mut conn| community_stats(&mut conn))
                .map_err(|r| anyhow::anyhow!("reading communities: {r}"))?
        };
        let relay_identity = if status.pending.is_empty() {
            migrations
                .with_conn(|mut conn| recorded_identity(&mut conn))
                .map_err(|r| anyhow::anyhow!("reading the relay identity: {r}"))?
        } else {
            None
        };
        let plugins = catalog
            .entries()
            .iter()
            .map(|entry| {
                let section = settings.plugin(entry.name);
                let owned = |list: &[buzz_core::store::MigrationId], applied: bool| {
                    list.iter()
                        .filter(|m| m.owner == entry.name)
                        .map(|m| (m.version.clone(), applied))
                        .collect::<Vec<_>>()
                };
                let mut tables = owned(&status.applied, true);
                tables.extend(owned(&status.pending, false));
                let panel = if tables.iter().any(|(_, applied)| !applied) {
                    Err("tables not migrated yet".to_owned())
                } else {
                    migrations
                        .with_conn(|mut conn| entry.admin_panel(&section, &mut conn))
                        .map_err(|r| r.to_string())
                };
                PluginStatus {
                    name: entry.name.to_owned(),
                    enabled: section.is_enabled(),
                    routes: entry.routes.iter().map(|r| r.to_string()).collect(),
                    reserved_kinds: entry.reserved_kinds.to_vec(),
                    migrations: tables,
                    panel,
                }
            })
            .collect();
        // What each community runs (its own scripts, else [policies], else compiled in).
        let policies = settings.policies.enabled.then(|| {
            settings
                .communities
                .iter()
                .flat_map(|community| {
                    let scripts = CommunityScripts::resolve(settings, community);
                    scripts
                        .listing()
                        .into_iter()
                        .map(|(role, origin)| PolicyStatus {
                            path: format!("{} {role}: {origin}", scripts.host),
                            verdict: buzz_policy::origin_entry_points(origin)
                                .map_err(|e| e.to_string()),
                        })
                        .collect::<Vec<_>>()
                })
                .collect()
        });
        Ok(Report {
            database: redact(url),
            migrations: status,
            relay_identity,
            communities,
            plugins,
            policies,
        })
    }
}

/// Hide a password in a database URL.
fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_owned(),
            }
        }
        _ => url.to_owned(),
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "database    {}", self.database)?;
        writeln!(
            f,
            "migrations  {} applied, {} pending{}",
            self.migrations.applied.len(),
            self.migrations.pending.len(),
            if self.migrations.pending.is_empty() {
                String::new()
            } else {
                let pending: Vec<String> = self
                    .migrations
                    .pending
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                format!(" ({})", pending.join(", "))
            }
        )?;
        writeln!(
            f,
            "relay key   {}",
            self.relay_identity
                .as_deref()
                .unwrap_or("(not recorded yet: no relay has opened this database)")
        )?;
        writeln!(f, "communities")?;
        if self.communities.is_empty() {
            writeln!(f, "  (none stored yet)")?;
        }
        for c in &self.communities {
            writeln!(
                f,
                "  {:<24} {:<16} {:>8} events ({} deleted) {:>6} channels",
                c.host, c.name, c.events, c.deleted_events, c.channels
            )?;
        }
        writeln!(f, "plugins (built into this binary)")?;
        for p in &self.plugins {
            let tables = if p.migrations.is_empty() {
                "no tables".to_owned()
            } else {
                let applied = p.migrations.iter().filter(|(_, a)| *a).count();
                format!("{applied}/{} migrations applied", p.migrations.len())
            };
            let state = if p.enabled { "enabled" } else { "disabled" };
            writeln!(f, "  {:<24} {:<9} {tables}", p.name, state)?;
            match &p.panel {
                Err(e) => writeln!(f, "    (status unavailable: {e})")?,
                Ok(panel) => {
                    for (label, value) in &panel.facts {
                        writeln!(f, "    {label:<32} {value}")?;
                    }
                    for table in &panel.tables {
                        writeln!(f, "    {} ({})", table.title, table.columns.join(" | "))?;
                        for row in &table.rows {
                            writeln!(f, "      {}", row.join(" | "))?;
                        }
                    }
                }
            }
        }
        writeln!(f, "policies (per community)")?;
        match &self.policies {
            None => writeln!(f, "  disabled")?,
            Some(list) => {
                for p in list {
                    match &p.verdict {
                        Ok(entries) => writeln!(f, "  {:<56} ok ({})", p.path, entries.join(", "))?,
                        Err(e) => writeln!(f, "  {:<56} BROKEN: {e}", p.path)?,
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(redact("postgres://u:secret@h/db"), "postgres://u:***@h/db");
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("sqlite://./data/buzz.db"), "sqlite://./data/buzz.db");
    }
}
