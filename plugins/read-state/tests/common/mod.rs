//! Helpers shared by the read-state suites: a relay with the plugin enabled, users that
//! publish over WebSocket (NIP-42) and call `/buzz/v1` over NIP-98 HTTP. Everything
//! speaks the wire.

#![allow(dead_code)] // each suite uses its own subset

use buzz_core::config::Settings;
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{authed, now, publish_ok, tag, TestBackend, TestRelay, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use buzz_read_state::{ReadStatePlugin, NAME};
use buzz_read_state_client::{self as client, Answer, Client};
use serde_json::{json, Value};

/// A relay with `read_state` enabled and these section options.
pub(crate) async fn relay_with(
    backend: TestBackend,
    name: &str,
    options: Value,
    tweak: impl FnOnce(&mut Settings),
) -> Option<TestRelay> {
    let setup = move |s: &mut Settings| {
        if let Some(section) = s.plugins.get_mut(NAME) {
            section.enabled = Some(true);
            if let Value::Object(options) = options {
                section.options.extend(options);
            }
        }
        tweak(s);
    };
    TestRelay::start_with(
        backend,
        name,
        setup,
        vec![PluginEntry::of::<ReadStatePlugin>()],
    )
    .await
}

pub(crate) async fn relay(backend: TestBackend, name: &str) -> Option<TestRelay> {
    relay_with(backend, name, json!({}), |_| {}).await
}

/// Increasing author times, one per call, starting ten minutes back (within the
/// relay's clock-skew window): messages posted one after another then display in the
/// order they were posted, never tied within one second.
pub(crate) fn tick() -> i64 {
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::OnceLock;
    static BASE: OnceLock<i64> = OnceLock::new();
    static N: AtomicI64 = AtomicI64::new(0);
    *BASE.get_or_init(|| now() - 600) + N.fetch_add(1, Ordering::Relaxed)
}

/// An authenticated user: a WebSocket for Nostr and a NIP-98 client for `/buzz/v1`.
pub(crate) struct User {
    pub(crate) keys: Keys,
    pub(crate) ws: WsClient,
    pub(crate) api: Client,
}

impl User {
    pub(crate) async fn new(relay: &TestRelay) -> User {
        User::with_keys(relay, Keys::generate()).await
    }

    pub(crate) async fn with_keys(relay: &TestRelay, keys: Keys) -> User {
        let ws = authed(relay, &keys).await;
        let api = Client::new(
            &format!("http://{}", relay.addr),
            &relay.host(),
            keys.clone(),
        );
        User { keys, ws, api }
    }

    pub(crate) fn pubkey(&self) -> String {
        self.keys.pubkey().to_owned()
    }

    pub(crate) async fn publish(&mut self, event: Event) -> Event {
        publish_ok(&mut self.ws, event).await
    }

    /// Create a channel (`channel_type` stream/forum/dm); the creator is its owner.
    pub(crate) async fn create_channel(&mut self, name: &str, channel_type: &str) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        let tags = vec![
            tag(&["h", &id]),
            tag(&["name", name]),
            tag(&["channel_type", channel_type]),
        ];
        self.publish(self.keys.sign(9007, tags, "", now())).await;
        id
    }

    pub(crate) async fn join(&mut self, channel: &str) {
        let nonce = uuid::Uuid::new_v4().to_string();
        self.publish(
            self.keys
                .sign(9021, vec![tag(&["h", channel])], &nonce, now()),
        )
        .await;
    }

    pub(crate) async fn leave(&mut self, channel: &str) {
        let nonce = uuid::Uuid::new_v4().to_string();
        self.publish(
            self.keys
                .sign(9022, vec![tag(&["h", channel])], &nonce, now()),
        )
        .await;
    }

    /// A top-level message at author time `at`, mentioning `mentions`.
    pub(crate) async fn post_at(&mut self, channel: &str, at: i64, mentions: &[&str]) -> Event {
        let mut tags = vec![tag(&["h", channel])];
        tags.extend(mentions.iter().map(|p| tag(&["p", p])));
        let content = uuid::Uuid::new_v4().to_string();
        self.publish(self.keys.sign(9, tags, &content, at)).await
    }

    pub(crate) async fn post(&mut self, channel: &str) -> Event {
        self.post_at(channel, tick(), &[]).await
    }

    /// A reply to `parent` in the thread `root` (NIP-10 markers).
    pub(crate) async fn reply_full(
        &mut self,
        channel: &str,
        root: &Event,
        parent: &Event,
        at: i64,
        mentions: &[&str],
        broadcast: bool,
    ) -> Event {
        let mut tags = vec![tag(&["h", channel]), tag(&["e", &root.id, "", "root"])];
        tags.push(tag(&["e", &parent.id, "", "reply"]));
        tags.extend(mentions.iter().map(|p| tag(&["p", p])));
        if broadcast {
            tags.push(tag(&["broadcast", "1"]));
        }
        let content = uuid::Uuid::new_v4().to_string();
        self.publish(self.keys.sign(9, tags, &content, at)).await
    }

    pub(crate) async fn reply(&mut self, channel: &str, root: &Event) -> Event {
        self.reply_full(channel, root, root, tick(), &[], false)
            .await
    }

    pub(crate) async fn delete(&mut self, channel: &str, target: &Event) {
        let tags = vec![tag(&["h", channel]), tag(&["e", &target.id])];
        self.publish(self.keys.sign(5, tags, "", now())).await;
    }

    /// Every sidebar page's rows (following `next_cursor`), asserting 200s.
    pub(crate) async fn sidebar(&self) -> Vec<Value> {
        let page = self.api.sidebar(20, None).await.expect("sidebar");
        assert_eq!(page.status, 200, "{}", page.body);
        page.body["channels"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The sidebar row of `channel` (must be listed).
    pub(crate) async fn row(&self, channel: &str) -> Value {
        let page = self.api.refresh(&[channel]).await.expect("refresh");
        assert_eq!(page.status, 200, "{}", page.body);
        page.body["channels"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["channel_id"] == channel))
            .cloned()
            .unwrap_or_else(|| panic!("{channel} not in {}", page.body))
    }

    /// Post intents; require 200 and return the outcomes.
    pub(crate) async fn intents(&self, intents: &[Value]) -> Vec<Value> {
        let answer = self.api.intents(intents).await.expect("intents");
        assert_eq!(answer.status, 200, "{}", answer.body);
        answer.body["results"].as_array().cloned().expect("results")
    }

    /// Apply one intent; require `applied`.
    pub(crate) async fn apply(&self, intent: Value) {
        let outcomes = self.intents(std::slice::from_ref(&intent)).await;
        assert_eq!(outcomes, vec![json!({"status": "applied"})], "{intent}");
    }

    /// Start the account (first read intent) on a message of its own in `channel`.
    pub(crate) async fn start(&mut self, channel: &str) -> Event {
        let own = self.post(channel).await;
        self.apply(client::mark_through(channel, None, &own.id))
            .await;
        own
    }
}

/// The thread entry of `root` in a sidebar row, if listed.
pub(crate) fn thread<'a>(row: &'a Value, root: &Event) -> Option<&'a Value> {
    row["threads"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["root_id"] == root.id.as_str()))
}

/// The error body shape every v1 error has, and the private cache header.
pub(crate) fn assert_api_error(answer: &Answer, status: u16, code: &str) {
    assert_eq!(answer.status, status, "{}", answer.body);
    assert_eq!(answer.body["error"]["code"], code, "{}", answer.body);
    let id = answer.body["error"]["request_id"]
        .as_str()
        .unwrap_or_default();
    assert!(!id.is_empty(), "request_id missing: {}", answer.body);
    assert_eq!(answer.header("cache-control"), Some("private, no-store"));
    if status == 429 || status == 503 {
        assert!(
            answer.header("retry-after").is_some(),
            "Retry-After missing"
        );
    }
}

/// The default community's row id.
pub(crate) fn community_id(relay: &TestRelay) -> i64 {
    relay.running().services.communities[0].id
}

#[derive(diesel::QueryableByName)]
struct CountRow {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    v: i64,
}

/// `SELECT COUNT(*) AS v …` over the relay's database (either backend), for
/// assertions on what the plugin stored.
pub(crate) async fn count(relay: &TestRelay, sql: &str) -> i64 {
    use diesel::RunQueryDsl;
    let sql = sql.to_owned();
    relay
        .running()
        .services
        .store
        .read(move |mut conn| {
            let rows: Vec<CountRow> =
                buzz_core::with_conn!(&mut conn, |c| diesel::sql_query(&sql).load(c))?;
            Ok(rows.first().map_or(0, |r| r.v))
        })
        .await
        .expect("count query")
}

/// What the plugin holds for `pubkey` (the console's reader, straight from storage).
pub(crate) async fn frontiers_of(
    relay: &TestRelay,
    pubkey: &str,
) -> buzz_read_state::ReaderFrontiers {
    let (cid, pk) = (community_id(relay), pubkey.to_owned());
    let skew = relay.settings.limits.max_clock_skew_secs;
    relay
        .running()
        .services
        .store
        .read(move |mut conn| {
            buzz_read_state::reader_frontiers(&mut conn, cid, &pk, now() * 1_000_000, skew)
        })
        .await
        .expect("reader_frontiers")
}

impl User {
    /// A private channel (`["private"]`); the creator is its owner.
    pub(crate) async fn create_private_channel(&mut self, name: &str) -> String {
        let id = uuid::Uuid::new_v4().to_string();
        let tags = vec![tag(&["h", &id]), tag(&["name", name]), tag(&["private"])];
        self.publish(self.keys.sign(9007, tags, "", now())).await;
        id
    }

    /// Add `pubkey` to `channel` (kind 9000; the signer must manage the channel).
    pub(crate) async fn add_member(&mut self, channel: &str, pubkey: &str) {
        let tags = vec![tag(&["h", channel]), tag(&["p", pubkey])];
        let nonce = uuid::Uuid::new_v4().to_string();
        self.publish(self.keys.sign(9000, tags, &nonce, now()))
            .await;
    }

    /// The sidebar row of `channel` with the next page of its threads after `cursor`
    /// (`threads_cursor`), the raw answer.
    pub(crate) async fn threads_page(&self, channel: &str, cursor: &str) -> Answer {
        self.api
            .get(&format!(
                "/buzz/v1/me/sidebar?channel_ids={channel}&threads_cursor={}",
                client::encode(cursor)
            ))
            .await
            .expect("threads page")
    }
}
