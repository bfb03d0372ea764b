//! Assembling and running a relay: settings + plugin factories → a listening server.
//!
//! Entry point for the `buzz-relay` binary and for every integration test
//! (`RelayBuilder::new(settings).start()` on port 0).

use crate::access::{reload_on_sighup, AccessService, CommunityPolicies};
use crate::clock::{Clock, SystemClock};
use crate::community::{Communities, Community};
use crate::config::Settings;
use crate::http::{self, AppState, Bodies, ServerHandle};
use crate::ingest::Ingest;
use crate::live::{LiveBus, MemoryBus, RedisBus};
use crate::metrics::Metrics;
use crate::plugin::{Plugin, PluginCatalog, PluginEntry, Services};
use crate::query_service::QueryService;
use crate::redis_link::RedisLink;
use crate::replay::{MemoryReplayGuard, RedisReplayGuard, ReplayGuard};
use crate::store::{StatementBounds, Store};
use anyhow::Context;
use buzz_nostr::keys::Keys;
use std::net::SocketAddr;
use std::sync::Arc;

/// The relay key: `relay.private_key` when set, else `<data_dir>/relay.key` (generated on
/// first use). Also says where it came from, for messages.
pub fn relay_keys(settings: &Settings) -> anyhow::Result<(Keys, String)> {
    if settings.relay.private_key.is_empty() {
        let file = settings.relay.data_dir.join("relay.key");
        Ok((
            crate::relay_key::load_or_generate(&file)?,
            file.display().to_string(),
        ))
    } else {
        let keys = Keys::from_hex(&settings.relay.private_key).context("relay.private_key")?;
        Ok((keys, "relay.private_key".to_owned()))
    }
}

/// Record `keys` as the database's relay (see `store/identity.rs`), or fail naming both
/// keys when the database belongs to another relay.
pub async fn claim_identity(store: &Store, keys: &Keys, source: &str) -> anyhow::Result<()> {
    let ours = keys.pubkey();
    let claimed = store
        .claim_identity(ours)
        .await
        .map_err(|r| anyhow::anyhow!("recording the relay identity: {}", r.wire_text()))?;
    match claimed {
        None => Ok(()),
        Some(stored) => anyhow::bail!(
            "this database belongs to relay {stored}, but this process signs as {ours} \
             (key from {source}). Every process serving one database must sign as one relay: \
             set relay.private_key (or BUZZ_RELAY_PRIVATE_KEY) to that relay's key. To move \
             the database to this key on purpose, run `buzz-relay identity --reset` first."
        ),
    }
}

/// Collects settings and the plugins this binary knows, then starts the relay.
pub struct RelayBuilder {
    settings: Settings,
    catalog: PluginCatalog,
    clock: Arc<dyn Clock>,
    handle_signals: bool,
}

impl RelayBuilder {
    pub fn new(settings: Settings) -> Self {
        RelayBuilder {
            settings,
            catalog: PluginCatalog::new(),
            clock: Arc::new(SystemClock),
            handle_signals: true,
        }
    }

    /// The plugins built into this binary; each runs when its section enables it.
    pub fn catalog(mut self, catalog: PluginCatalog) -> Self {
        self.catalog = catalog;
        self
    }

    /// Add one plugin to the catalog.
    pub fn plugin(mut self, entry: PluginEntry) -> Self {
        self.catalog = self.catalog.with(entry);
        self
    }

    /// Replace the wall clock (tests).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Leave SIGINT/SIGTERM alone (tests run many relays in one process).
    pub fn without_signal_handlers(mut self) -> Self {
        self.handle_signals = false;
        self
    }

    /// Everything but the servers: storage (migrated, identity claimed), communities,
    /// services and the enabled plugins.
    async fn assemble(mut self) -> anyhow::Result<Assembled> {
        self.settings.plugins = self.catalog.complete(&self.settings.plugins)?;
        let settings = Arc::new(self.settings);
        let policy = load_policies(&settings, self.handle_signals)?;
        if !settings.relay.private_key.is_empty() {
            Keys::from_hex(&settings.relay.private_key).context("relay.private_key")?;
        }
        let prefix = settings.storage.redis_prefix.clone();
        let (bus, replay, redis) = connect_shared(&settings).await?;

        let (relay_keys, key_source) = relay_keys(&settings)?;
        let store = Store::open_bounded(
            &settings.storage.database_url,
            settings.storage.pool_size,
            settings.storage.auto_migrate,
            &self.catalog.migration_sets(),
            StatementBounds {
                statement_timeout_ms: settings.storage.statement_timeout_ms,
                lock_timeout_ms: settings.storage.lock_timeout_ms,
                read_timeout_ms: settings.storage.read_timeout_ms,
                max_reads_per_client: settings.limits.max_reads_per_client,
                slow_read_ms: settings.storage.slow_read_ms,
            },
        )
        .await
        .context("opening storage")?;
        if let Err(err) = claim_identity(&store, &relay_keys, &key_source).await {
            store.shutdown().await;
            return Err(err);
        }

        let mut communities = Vec::new();
        for c in &settings.communities {
            let host = buzz_nostr::host::normalize_host(&c.host);
            let id = store
                .ensure_community(&host, &c.name)
                .await
                .map_err(|r| anyhow::anyhow!("registering community {host}: {r}"))?;
            communities.push(Arc::new(Community::from_settings(id, c)));
        }

        let access = AccessService::new(store.clone(), policy, self.clock.clone());
        access.declare_plugin_channel_kinds(self.catalog.channel_kinds());
        access.follow(&bus);
        let metrics = Arc::new(Metrics::new(
            store.writer_metrics(),
            access.policy_metrics(),
        ));
        let weak = Arc::downgrade(&access);
        metrics.observe_policy_loads(move || {
            weak.upgrade().map(|a| a.policy_loads()).unwrap_or_default()
        });
        let services = Services {
            store: store.clone(),
            relay_keys,
            clock: self.clock.clone(),
            bus,
            access,
            redis,
            redis_prefix: prefix,
            settings: settings.clone(),
            communities: communities.clone().into(),
            metrics: metrics.clone(),
            replay: replay.clone(),
        };

        let mut plugins: Vec<Arc<dyn Plugin>> = Vec::new();
        let mut plugin_nips: Vec<&'static [u32]> = Vec::new();
        let mut routes = Vec::new();
        for entry in self.catalog.entries() {
            let section = settings.plugin(entry.name);
            if !section.is_enabled() {
                continue;
            }
            let built = entry
                .build(&section, &services)
                .with_context(|| format!("starting plugin {}", entry.name))
                .and_then(|plugin| {
                    let mounted = plugin.clone().routes();
                    entry.check_routes(&mounted).map(|()| (plugin, mounted))
                });
            let (plugin, mounted) = match built {
                Ok(built) => built,
                Err(err) => {
                    store.shutdown().await;
                    return Err(err);
                }
            };
            tracing::info!(plugin = entry.name, "plugin enabled");
            routes.extend(mounted);
            plugins.push(plugin);
            plugin_nips.push(entry.supported_nips);
        }
        let plugins: Arc<[Arc<dyn Plugin>]> = plugins.into();

        Ok(Assembled {
            settings,
            services,
            store,
            metrics,
            replay,
            communities,
            plugins,
            plugin_nips,
            routes,
        })
    }

    /// The relay without its servers, for the storage commands that store through the
    /// ingest pipeline (`import`): the same storage, services and enabled plugins as
    /// [`RelayBuilder::start`], no listener, no plugin background tasks.
    pub async fn offline(mut self) -> anyhow::Result<OfflineRelay> {
        self.handle_signals = false;
        let reserved_kinds = self.catalog.reserved_kinds();
        let assembled = self.assemble().await?;
        Ok(OfflineRelay {
            ingest: Ingest::new(
                assembled.services.clone(),
                assembled.plugins.clone(),
                reserved_kinds,
            ),
            services: assembled.services,
        })
    }

    /// Validate everything, then open storage and start serving. Nothing is created on
    /// disk (relay key, database) until the configuration, the plugin sections and the
    /// policy scripts have all been checked.
    pub async fn start(self) -> anyhow::Result<RunningRelay> {
        let reserved_kinds = self.catalog.reserved_kinds();
        let handle_signals = self.handle_signals;
        let Assembled {
            settings,
            services,
            store,
            metrics,
            replay,
            communities,
            plugins,
            plugin_nips,
            routes,
        } = self.assemble().await?;
        let state = AppState {
            ingest: Ingest::new(services.clone(), plugins.clone(), reserved_kinds),
            query: QueryService::new(services.clone(), plugins.clone()),
            services: services.clone(),
            plugins: plugins.clone(),
            supported_nips: crate::nips::supported(plugin_nips),
            communities: Communities::new(&communities),
            replay,
            bodies: Bodies::new(&settings.limits),
            outbound: Arc::new(tokio::sync::Semaphore::new(
                settings.limits.max_outbound_bytes_total,
            )),
        };
        let metrics_server = if settings.metrics.enabled {
            match http::start_metrics(metrics, &settings.metrics.bind) {
                Ok(server) => Some(server),
                Err(err) => {
                    store.shutdown().await;
                    return Err(err);
                }
            }
        } else {
            None
        };
        let server = match http::start(state, routes, &settings, handle_signals) {
            Ok(server) => server,
            Err(err) => {
                if let Some(metrics) = &metrics_server {
                    metrics.stop().await;
                }
                store.shutdown().await;
                return Err(err);
            }
        };
        let mut background: Vec<_> = plugins
            .iter()
            .flat_map(|plugin| plugin.clone().background())
            .map(tokio::spawn)
            .collect();
        background.extend(crate::expiry::start(&services, plugins.clone()));
        tracing::info!(
            "relay listening on ws://{} (relay pubkey {})",
            server.addr,
            services.relay_keys.pubkey()
        );
        Ok(RunningRelay {
            addr: server.addr,
            metrics_addr: metrics_server.as_ref().map(|m| m.addr),
            services,
            server,
            metrics_server,
            background,
        })
    }
}

/// What [`RelayBuilder::assemble`] made.
struct Assembled {
    settings: Arc<Settings>,
    services: Services,
    store: Store,
    metrics: Arc<Metrics>,
    replay: Arc<dyn ReplayGuard>,
    communities: Vec<Arc<Community>>,
    plugins: Arc<[Arc<dyn Plugin>]>,
    plugin_nips: Vec<&'static [u32]>,
    routes: Vec<crate::plugin::Route>,
}

/// A relay's storage, services, plugins and ingest pipeline, serving nothing
/// ([`RelayBuilder::offline`]).
pub struct OfflineRelay {
    pub ingest: Ingest,
    pub services: Services,
}

impl OfflineRelay {
    /// Finish queued writes and stop the writer.
    pub async fn shutdown(self) {
        self.services.store.shutdown().await;
    }
}

/// Live bus, replay guard and Redis link: in-process without `storage.redis_url`,
/// shared through Redis with it.
async fn connect_shared(
    settings: &Settings,
) -> anyhow::Result<(
    Arc<dyn LiveBus>,
    Arc<dyn ReplayGuard>,
    Option<Arc<RedisLink>>,
)> {
    if settings.storage.redis_url.is_empty() {
        return Ok((
            Arc::new(MemoryBus::default()),
            Arc::new(MemoryReplayGuard::default()),
            None,
        ));
    }
    let prefix = &settings.storage.redis_prefix;
    let client =
        redis::Client::open(settings.storage.redis_url.as_str()).context("storage.redis_url")?;
    // One attempt within the deadline, so a refused port is reported as refused at once
    // (retrying with back-off would only turn it into "no answer").
    let link = RedisLink::connect(client, settings.storage.redis_deadline())
        .await
        .with_context(|| format!("connecting to redis at {}", settings.storage.redis_url))?;
    let link = Arc::new(link);
    let bus = RedisBus::start(link.clone(), prefix)
        .await
        .context("subscribing to redis live channel")?;
    Ok((
        Arc::new(bus),
        Arc::new(RedisReplayGuard::new(link.clone(), prefix)),
        Some(link),
    ))
}

/// Load every community's policies (unless disabled) and reload them on SIGHUP.
fn load_policies(
    settings: &Settings,
    handle_signals: bool,
) -> anyhow::Result<Option<Arc<CommunityPolicies>>> {
    if !settings.policies.enabled {
        tracing::warn!("policies are disabled: only core's authorship rules apply");
        return Ok(None);
    }
    let policies = Arc::new(CommunityPolicies::load(settings)?);
    if handle_signals {
        reload_on_sighup(&policies);
    }
    Ok(Some(policies))
}

/// A started relay.
pub struct RunningRelay {
    pub addr: SocketAddr,
    /// Where `GET /metrics` answers (`None` when `[metrics] enabled = false`).
    pub metrics_addr: Option<SocketAddr>,
    pub services: Services,
    server: ServerHandle,
    metrics_server: Option<ServerHandle>,
    /// Plugins' background tasks and core's expired-event purge, aborted when the relay
    /// stops.
    background: Vec<tokio::task::JoinHandle<()>>,
}

impl RunningRelay {
    /// The relay's public key (NIP-11 `self`).
    pub fn pubkey(&self) -> &str {
        self.services.relay_keys.pubkey()
    }

    /// Run until the server stops (SIGINT/SIGTERM), then stop plugin tasks and finish
    /// queued writes.
    pub async fn wait(self) -> anyhow::Result<()> {
        let result = self.server.stopped().await;
        if let Some(metrics) = self.metrics_server {
            metrics.stop().await;
        }
        for task in &self.background {
            task.abort();
        }
        self.services.store.shutdown().await;
        result
    }

    /// Stop gracefully: stop accepting, finish in-flight requests and queued writes.
    pub async fn stop(self) -> anyhow::Result<()> {
        self.server.stop().await;
        self.wait().await
    }
}
