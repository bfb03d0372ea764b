//! Each community's rulebooks: its own Lua policy engine (own Lua states, globals, memory
//! and rate-limit counters, so one community's scripts and failures never touch
//! another's), optionally a shadow candidate beside it, file watching and SIGHUP reload.
//!
//! A community's scripts are `[[communities]] policies = { ... }` where given, else
//! `[policies]`; a default path that does not exist means the compiled-in script.

use crate::config::{CommunitySettings, Settings};
use anyhow::Context;
use buzz_nostr::host::normalize_host;
use buzz_policy::{
    MemoryRateLimiter, PolicyEngine, PolicyLimits, RateLimiter, RedisRateLimiter, ScriptOrigin,
    ShadowCounts,
};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The scripts one community runs, as resolved from the config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommunityScripts {
    pub host: String,
    pub access: ScriptOrigin,
    pub moderation: ScriptOrigin,
    /// `(access, moderation)` of the shadow candidate, when one is configured.
    pub shadow: Option<(ScriptOrigin, ScriptOrigin)>,
}

impl CommunityScripts {
    /// What `community` runs under `settings` (no file is read here).
    pub fn resolve(settings: &Settings, community: &CommunitySettings) -> CommunityScripts {
        let p = &settings.policies;
        let own = &community.policies;
        let access = match &own.access {
            Some(path) => ScriptOrigin::File(path.clone()),
            None => script_origin(&p.access, p.access_is_default, ScriptOrigin::builtin_access),
        };
        let moderation = match &own.moderation {
            Some(path) => ScriptOrigin::File(path.clone()),
            None => script_origin(
                &p.moderation,
                p.moderation_is_default,
                ScriptOrigin::builtin_moderation,
            ),
        };
        let shadow = own.has_shadow().then(|| {
            let file = |path: &Option<std::path::PathBuf>, enforced: &ScriptOrigin| {
                path.clone()
                    .map_or_else(|| enforced.clone(), ScriptOrigin::File)
            };
            (
                file(&own.shadow_access, &access),
                file(&own.shadow_moderation, &moderation),
            )
        });
        CommunityScripts {
            host: normalize_host(&community.host),
            access,
            moderation,
            shadow,
        }
    }

    /// Every script, for listings: (role, origin).
    pub fn listing(&self) -> Vec<(&'static str, &ScriptOrigin)> {
        let mut out = vec![("access", &self.access), ("moderation", &self.moderation)];
        if let Some((access, moderation)) = &self.shadow {
            out.push(("shadow_access", access));
            out.push(("shadow_moderation", moderation));
        }
        out
    }
}

/// A configured script file, or — when the path is only the default and no such file
/// exists (the relay started outside the repository, say) — the compiled-in default.
fn script_origin(path: &Path, is_default: bool, builtin: fn() -> ScriptOrigin) -> ScriptOrigin {
    if is_default && !path.exists() {
        builtin()
    } else {
        ScriptOrigin::File(path.to_owned())
    }
}

/// One community's engines.
struct Rulebooks {
    enforced: Arc<PolicyEngine>,
    candidate: Option<Arc<PolicyEngine>>,
}

/// Every community's engines, by host.
pub struct CommunityPolicies {
    by_host: HashMap<String, Rulebooks>,
}

impl CommunityPolicies {
    /// Load every community's scripts (failing, naming the community and the script, if
    /// any does not load) and start watching the files.
    pub fn load(settings: &Settings) -> anyhow::Result<CommunityPolicies> {
        let p = &settings.policies;
        let limits = PolicyLimits {
            instruction_budget: p.instruction_budget,
            memory_bytes: p.memory_bytes,
            call_timeout: Duration::from_millis(p.call_timeout_ms),
            load_timeout: Duration::from_millis(p.load_timeout_ms),
        };
        let mut by_host = HashMap::new();
        for community in &settings.communities {
            let scripts = CommunityScripts::resolve(settings, community);
            let host = scripts.host.clone();
            for (role, origin) in scripts.listing() {
                if matches!(origin, ScriptOrigin::BuiltIn { .. }) {
                    tracing::info!(community = %host, role, using = %origin,
                        "no policy file at the default path; running the compiled-in default");
                }
            }
            let load = |access: &ScriptOrigin,
                        moderation: &ScriptOrigin,
                        counters: &str|
             -> anyhow::Result<PolicyEngine> {
                let limiter = rate_limiter(settings, counters, &host)?;
                PolicyEngine::load_scripts(access.clone(), moderation.clone(), limits, limiter)
                    .with_context(|| {
                        format!("community {host}: loading policies {access} and {moderation}")
                    })
            };
            let candidate = match &scripts.shadow {
                Some((access, moderation)) => Some(Arc::new(
                    load(access, moderation, "rate-shadow").context("shadow scripts")?,
                )),
                None => None,
            };
            let mut enforced = load(&scripts.access, &scripts.moderation, "rate")?;
            if let Some(candidate) = &candidate {
                enforced = enforced
                    .with_shadow(candidate.clone(), format!("community {host}"))
                    .with_context(|| format!("community {host}: starting shadow mode"))?;
            }
            by_host.insert(
                host,
                Rulebooks {
                    enforced: Arc::new(enforced),
                    candidate,
                },
            );
        }
        let policies = CommunityPolicies { by_host };
        let poll = Duration::from_millis(p.reload_poll_ms.max(50));
        for engine in policies.engines() {
            engine.watch(poll);
        }
        Ok(policies)
    }

    /// The enforced engine of the community at `host`.
    pub fn engine(&self, host: &str) -> Option<&Arc<PolicyEngine>> {
        self.by_host.get(host).map(|r| &r.enforced)
    }

    /// Shadow-mode counts of the community at `host`, if it runs a candidate.
    pub fn shadow_counts(&self, host: &str) -> Option<ShadowCounts> {
        self.engine(host).and_then(|e| e.shadow_counts())
    }

    /// Changes whenever any community's scripts reload (connections then recompute
    /// what they may read).
    pub fn generation(&self) -> u64 {
        self.by_host.values().map(|r| r.enforced.generation()).sum()
    }

    /// Load figures of the enforced scripts for `/metrics`.
    pub fn loads(&self) -> super::PolicyLoads {
        let enforced = || self.by_host.values().map(|r| &r.enforced);
        super::PolicyLoads {
            generation: self.generation(),
            loaded_at: enforced().map(|e| e.loaded_at()).max().unwrap_or(0),
            failed_reloads: enforced().map(|e| e.failed_reloads()).sum(),
        }
    }

    /// Re-read every community's files (SIGHUP). Each community keeps its last good
    /// scripts on failure; the others reload regardless.
    pub fn reload_all(&self) {
        for (host, rulebooks) in &self.by_host {
            for engine in std::iter::once(&rulebooks.enforced).chain(&rulebooks.candidate) {
                match engine.reload() {
                    Ok(()) => tracing::info!(community = %host, "policies reloaded"),
                    Err(e) => tracing::warn!(community = %host, error = %e,
                        "policy reload failed; keeping the last good scripts"),
                }
            }
        }
    }

    fn engines(&self) -> impl Iterator<Item = &Arc<PolicyEngine>> {
        self.by_host
            .values()
            .flat_map(|r| std::iter::once(&r.enforced).chain(&r.candidate))
    }
}

/// A rate limiter of its own for one community's `counters` ("rate", or "rate-shadow"
/// for a candidate, which must not spend the enforced script's counts).
fn rate_limiter(
    settings: &Settings,
    counters: &str,
    host: &str,
) -> anyhow::Result<Arc<dyn RateLimiter>> {
    if settings.storage.redis_url.is_empty() {
        return Ok(Arc::new(MemoryRateLimiter::new()));
    }
    let prefix = format!("{}:{counters}:{host}:", settings.storage.redis_prefix);
    // A hit runs inside a policy call (synchronously, on the request's thread), so it gets
    // the shorter of the Redis deadline and the call's own bound (at least 1 ms: a zero
    // socket timeout is refused).
    let call = Duration::from_millis(settings.policies.call_timeout_ms.max(1));
    let limiter = RedisRateLimiter::new(&settings.storage.redis_url, prefix)
        .context("storage.redis_url")?
        .with_timeout(settings.storage.redis_deadline().min(call));
    Ok(Arc::new(limiter))
}

/// Reload every community's scripts on SIGHUP, until the policies are dropped.
pub fn reload_on_sighup(policies: &Arc<CommunityPolicies>) {
    #[cfg(unix)]
    {
        let weak = Arc::downgrade(policies);
        tokio::spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            let Ok(mut hangups) = signal(SignalKind::hangup()) else {
                return;
            };
            while hangups.recv().await.is_some() {
                let Some(policies) = weak.upgrade() else {
                    return;
                };
                // Reading files and loading scripts (bounded by load_timeout_ms) is
                // blocking work: keep it off the async workers.
                let _ = tokio::task::spawn_blocking(move || policies.reload_all()).await;
            }
        });
    }
}
