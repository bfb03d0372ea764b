//! Gathering the status report (data layer) and formatting it (display), kept apart so a
//! UI can draw the same [`Report`].

use anyhow::Context;
use buzz_core::config::Settings;
use buzz_core::store::{
    community_stats, recorded_identity, CommunityStats as CommunityStatus, MigrationStatus, Store,
};
use std::fmt;

/// A policy script and whether it loads.
pub(crate) struct PolicyStatus {
    pub(crate) path: String,
    pub(crate) verdict: Result<Vec<&'static str>, String>,
}

pub(crate) struct Report {
    pub(crate) database: String,
    pub(crate) migrations: MigrationStatus,
    /// The relay key the database belongs to (`None`: not recorded yet, or migrations
    /// pending).
    pub(crate) relay_identity: Option<String>,
    pub(crate) communities: Vec<CommunityStatus>,
    pub(crate) plugins: Vec<(String, bool)>,
    pub(crate) policies: Option<Vec<PolicyStatus>>,
}

impl Report {
    pub(crate) fn gather(settings: &Settings) -> anyhow::Result<Report> {
        let url = &settings.storage.database_url;
        let migrations = Store::migrations(url).context("opening the database")?;
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
        let plugins = settings
            .plugins
            .iter()
            .map(|(name, section)| (name.clone(), section.enabled))
            .collect();
        let policies = settings.policies.enabled.then(|| {
            [&settings.policies.access, &settings.policies.moderation]
                .into_iter()
                .map(|path| PolicyStatus {
                    path: path.display().to_string(),
                    verdict: buzz_policy::script_entry_points(path).map_err(|e| e.to_string()),
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
                format!(" ({})", self.migrations.pending.join(", "))
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
        writeln!(f, "plugins (as configured)")?;
        for (name, enabled) in &self.plugins {
            writeln!(
                f,
                "  {:<24} {}",
                name,
                if *enabled { "enabled" } else { "disabled" }
            )?;
        }
        writeln!(f, "policies")?;
        match &self.policies {
            None => writeln!(f, "  disabled")?,
            Some(list) => {
                for p in list {
                    match &p.verdict {
                        Ok(entries) => writeln!(f, "  {:<40} ok ({})", p.path, entries.join(", "))?,
                        Err(e) => writeln!(f, "  {:<40} BROKEN: {e}", p.path)?,
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
