//! NIP-11 `supported_nips`: exactly what the running relay implements — core's own list
//! plus what each *enabled* plugin's manifest declares.

use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};

/// Every NIP core implements, each checked over the wire by some suite: 1 (nip01.rs),
/// 9 (deletion), 11 (this file), 29 (channels.rs, nip29_helpers.rs), 40 (expiration.rs),
/// 42 (AUTH), 45 (count.rs), 86 (nip86.rs), 98 (http_bridge.rs).
const CORE_NIPS: [u64; 9] = [1, 9, 11, 29, 40, 42, 45, 86, 98];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn core_alone_lists_what_core_implements() {
    let Some(relay) = TestRelay::start(TestBackend::Sqlite, "core_alone").await else {
        return;
    };
    let doc = relay.nip11().await;
    assert_eq!(doc["supported_nips"], json!(CORE_NIPS), "{doc}");
    // Spot-check two of them are really there: COUNT answers, expiration is honoured.
    let alice = Keys::generate();
    let mut ws = relay.ws().await;
    assert_eq!(ws.auth(&alice).await, (true, String::new()));
    let past = (now() - 1).to_string();
    let stale = alice.sign(1, vec![tag(&["expiration", &past])], "", now());
    assert!(!ws.publish(&stale).await.0);
    assert_eq!(
        ws.count("c", vec![json!({"kinds": [1]})]).await,
        Ok(json!({"count": 0}))
    );
    relay.stop().await;
}

/// A plugin that declares a NIP (and a channel kind), to see both reach the relay only
/// while it is enabled.
struct Declaring;

struct DeclaringPlugin;

impl buzz_core::plugin::Plugin for DeclaringPlugin {
    fn name(&self) -> &'static str {
        "declaring"
    }
}

impl buzz_core::plugin::PluginManifest for Declaring {
    const NAME: &'static str = "declaring";
    const ENABLED_BY_DEFAULT: bool = true;
    const SUPPORTED_NIPS: &'static [u32] = &[50, 1];
    const CHANNEL_KINDS: &'static [u32] = &[45_999];
    type Config = serde_json::Map<String, Value>;

    fn build(
        _config: Self::Config,
        _services: &buzz_core::plugin::Services,
    ) -> anyhow::Result<std::sync::Arc<dyn buzz_core::plugin::Plugin>> {
        Ok(std::sync::Arc::new(DeclaringPlugin))
    }
}

async fn with_declaring(enabled: bool, test: &str) -> Option<TestRelay> {
    TestRelay::start_with(
        TestBackend::Sqlite,
        test,
        move |s| {
            let section = s.plugins.entry("declaring".into()).or_default();
            section.enabled = Some(enabled);
        },
        vec![buzz_core::plugin::PluginEntry::of::<Declaring>()],
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enabled_plugins_add_what_they_declare() {
    let Some(relay) = with_declaring(true, "plugin_enabled").await else {
        return;
    };
    let doc = relay.nip11().await;
    let mut want: Vec<u64> = CORE_NIPS.to_vec();
    want.push(50);
    want.sort_unstable();
    assert_eq!(doc["supported_nips"], json!(want), "{doc}");
    relay.stop().await;

    let Some(relay) = with_declaring(false, "plugin_disabled").await else {
        return;
    };
    let doc = relay.nip11().await;
    assert_eq!(doc["supported_nips"], json!(CORE_NIPS), "{doc}");
    // A built plugin's channel kind needs AUTH whether or not the plugin runs.
    let mut anon = relay.ws().await;
    let text = anon
        .req("k", vec![json!({"kinds": [45_999]})])
        .await
        .expect_err("a plugin's channel kind before AUTH");
    assert!(text.starts_with("auth-required: "), "{text}");
    relay.stop().await;
}
