//! A plugin's manifest declares its HTTP routes (the console lists them without running
//! the plugin); the relay refuses to start a plugin that mounts anything else.

use buzz_core::error::Reason;
use buzz_core::plugin::{
    DeclaredRoute, Plugin, PluginCatalog, PluginEntry, PluginManifest, PluginRequest,
    PluginResponse, Route, RouteAuth, RouteBody, RouteHandler, RouteMethod, Services,
};
use buzz_core::relay::RelayBuilder;
use std::sync::Arc;

struct Answer;

#[async_trait::async_trait]
impl RouteHandler for Answer {
    async fn handle(&self, _request: PluginRequest) -> Result<PluginResponse, Reason> {
        Ok(PluginResponse::json(200, &serde_json::json!({})))
    }
}

/// Mounts `GET /mounted`; its manifest says what the test wants.
struct Mounts;

impl Plugin for Mounts {
    fn name(&self) -> &'static str {
        "mounts"
    }

    fn routes(self: Arc<Self>) -> Vec<Route> {
        vec![Route {
            method: RouteMethod::Get,
            path: "/mounted".into(),
            auth: RouteAuth::Public,
            body: RouteBody::Whole,
            handler: Arc::new(Answer),
        }]
    }
}

/// A section with no keys besides `enabled`.
#[derive(Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct NoKeys {}

/// The manifest `Mounts` runs under; `ROUTES` is the test's variable.
macro_rules! manifest {
    ($ty:ident, $routes:expr) => {
        struct $ty;
        impl PluginManifest for $ty {
            const NAME: &'static str = "mounts";
            const ENABLED_BY_DEFAULT: bool = true;
            const ROUTES: &'static [DeclaredRoute] = $routes;
            type Config = NoKeys;
            fn build(_config: NoKeys, _services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
                Ok(Arc::new(Mounts))
            }
        }
    };
}

manifest!(
    Exact,
    &[DeclaredRoute::new(
        RouteMethod::Get,
        "/mounted",
        RouteAuth::Public
    )]
);
manifest!(Silent, &[]);
manifest!(
    Overclaims,
    &[
        DeclaredRoute::new(RouteMethod::Get, "/mounted", RouteAuth::Public),
        DeclaredRoute::new(RouteMethod::Post, "/mounted", RouteAuth::Nip98),
    ]
);
manifest!(
    WrongAuth,
    &[DeclaredRoute::new(
        RouteMethod::Get,
        "/mounted",
        RouteAuth::Nip98
    )]
);

async fn start(entry: PluginEntry) -> anyhow::Result<()> {
    let catalog = PluginCatalog::new().with(entry);
    let dir = tempfile::tempdir()?;
    let mut settings = catalog.load_settings_from(None, &Default::default())?;
    settings.server.bind = "127.0.0.1:0".into();
    settings.metrics.bind = "127.0.0.1:0".into();
    settings.server.workers = 1;
    settings.server.shutdown_timeout_secs = 1;
    settings.storage.database_url = format!("sqlite://{}", dir.path().join("buzz.db").display());
    settings.relay.data_dir = dir.path().to_path_buf();
    let running = RelayBuilder::new(settings)
        .catalog(catalog)
        .without_signal_handlers()
        .start()
        .await?;
    running.stop().await
}

#[tokio::test]
async fn a_plugin_mounting_what_it_declares_starts() {
    start(PluginEntry::of::<Exact>()).await.expect("starts");
}

#[tokio::test]
async fn an_undeclared_route_refuses_to_start() {
    let err = start(PluginEntry::of::<Silent>())
        .await
        .expect_err("refused");
    let text = format!("{err:#}");
    assert!(text.contains("plugin mounts mounts GET /mounted"), "{text}");
    assert!(text.contains("does not declare"), "{text}");
}

#[tokio::test]
async fn a_declared_route_not_mounted_refuses_to_start() {
    let err = start(PluginEntry::of::<Overclaims>())
        .await
        .expect_err("refused");
    let text = format!("{err:#}");
    assert!(text.contains("POST /mounted (NIP-98)"), "{text}");
    assert!(text.contains("does not mount it"), "{text}");
}

#[tokio::test]
async fn a_route_declared_with_other_auth_refuses_to_start() {
    let err = start(PluginEntry::of::<WrongAuth>())
        .await
        .expect_err("refused");
    assert!(format!("{err:#}").contains("does not declare"), "{err:#}");
}
