//! Thread-window failure modes over the wire, on both backends: shared budgets (503, no
//! partial output), access revoked while the batch is built (503), malformed stored aux
//! data (500).

use buzz_core::both_backends;
mod common;

use buzz_channel_windows::{
    AccessRefreshHook, ChannelWindows, ChannelWindowsPlugin, ThreadBudgets,
};
use buzz_core::ctx::ConnCtx;
use buzz_core::plugin::{Plugin, PluginEntry, PluginManifest, Services};
use buzz_core::testkit::{now, TestBackend, TestRelay};
use buzz_nostr::event::Event;
use common::*;
use serde_json::{json, Value};
use std::sync::Arc;

both_backends!(
    exhausted_budgets_answer_nothing,
    access_revoked_mid_request_is_unavailable,
    malformed_stored_aux_is_an_internal_error,
);

/// A relay with the thread budgets `budgets` (config options), a channel and a root with
/// `replies` 300-byte replies (and a reaction on the root when `reaction`).
async fn budget_relay(
    backend: TestBackend,
    name: &str,
    budgets: Value,
    replies: usize,
    reaction: bool,
) -> Option<(TestRelay, User, String, Event)> {
    let plugin = PluginEntry::of::<ChannelWindowsPlugin>();
    let relay = relay_with(backend, name, plugin, budgets).await?;
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now() - 100;
    let root = alice.post_at(&ch, "root", t).await;
    let body = "x".repeat(300);
    let events: Vec<Event> = (0..replies)
        .map(|i| alice.reply_event(&ch, &root, None, &body, t + 1 + i as i64, false))
        .collect();
    alice.publish_all(&events).await;
    if reaction {
        alice.react(&ch, &root, t).await;
    }
    Some((relay, alice, ch, root))
}

/// The query fails with 503 on both transports, with nothing but the error.
async fn unavailable(relay: &TestRelay, user: &mut User, filters: Vec<Value>) {
    let (status, body) = user.http(relay, filters.clone()).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        body.as_object().map(|o| o.len()),
        Some(1),
        "only the error: {body}"
    );
    assert!(
        body["error"].as_str().unwrap_or("").starts_with("error:"),
        "{body}"
    );
    let closed = user.req(filters).await.expect_err("CLOSED");
    assert!(closed.starts_with("error:"), "{closed}");
}

async fn exhausted_budgets_answer_nothing(backend: TestBackend, name: &str) {
    // Raw rows (probe included), shared across the windows of one query.
    let Some((relay, mut alice, ch, root)) =
        budget_relay(backend, name, json!({"thread_raw_rows": 5}), 6, false).await
    else {
        return;
    };
    assert_eq!(
        of_kind(
            &alice
                .query(&relay, vec![thread(&ch, &root.id, 3, None)])
                .await,
            9
        )
        .len(),
        3
    );
    unavailable(&relay, &mut alice, vec![thread(&ch, &root.id, 50, None)]).await;
    unavailable(
        &relay,
        &mut alice,
        vec![
            thread(&ch, &root.id, 2, None),
            thread(&ch, &root.id, 2, None),
        ],
    )
    .await;
    // A channel window in the same query is discarded with the rest.
    unavailable(
        &relay,
        &mut alice,
        vec![window(&ch, 5, None), thread(&ch, &root.id, 50, None)],
    )
    .await;
    relay.stop().await;

    // Aux scans: hop 1 finds the reaction, so hop 2 would be a second scan.
    let (relay, mut alice, ch, root) =
        budget_relay(backend, name, json!({"thread_aux_scans": 1}), 1, true)
            .await
            .expect("backend available");
    let mut filter = thread(&ch, &root.id, 5, None);
    assert_eq!(alice.query(&relay, vec![filter.clone()]).await.len(), 2);
    filter["include_aux"] = json!(true);
    unavailable(&relay, &mut alice, vec![filter]).await;
    relay.stop().await;

    // Payload bytes (content plus serialized tags), charged before reconstruction.
    let (relay, mut alice, ch, root) = budget_relay(
        backend,
        name,
        json!({"thread_payload_bytes": 1_000}),
        4,
        false,
    )
    .await
    .expect("backend available");
    assert_eq!(
        alice
            .query(&relay, vec![thread(&ch, &root.id, 1, None)])
            .await
            .len(),
        2
    );
    unavailable(&relay, &mut alice, vec![thread(&ch, &root.id, 5, None)]).await;
    relay.stop().await;

    // Output bytes: an empty page (bounds only) fits, a page with a reply does not.
    let (relay, mut alice, ch, root) = budget_relay(
        backend,
        name,
        json!({"thread_output_bytes": 1_000}),
        2,
        false,
    )
    .await
    .expect("backend available");
    let past = (0, "0".repeat(64));
    let empty = alice
        .query(&relay, vec![thread(&ch, &root.id, 5, Some(&past))])
        .await;
    assert_eq!(empty.len(), 1, "bounds only");
    unavailable(&relay, &mut alice, vec![thread(&ch, &root.id, 1, None)]).await;
    relay.stop().await;

    // The deadline.
    let (relay, mut alice, ch, root) =
        budget_relay(backend, name, json!({"thread_deadline_ms": 0}), 1, false)
            .await
            .expect("backend available");
    unavailable(&relay, &mut alice, vec![thread(&ch, &root.id, 5, None)]).await;
    // Channel windows are not thread windows: no thread budget applies to them.
    assert_eq!(
        alice.query(&relay, vec![window(&ch, 5, None)]).await.len(),
        2
    );
    relay.stop().await;
}

/// `channel_windows` with the test seam installed: it removes the reader from every
/// channel between build and access refresh.
struct Revoking;

impl PluginManifest for Revoking {
    const NAME: &'static str = buzz_channel_windows::NAME;
    const ENABLED_BY_DEFAULT: bool = true;
    type Config = buzz_channel_windows::Config;

    fn build(config: Self::Config, services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
        revoking(config.budgets(), services)
    }
}

fn revoking(budgets: ThreadBudgets, services: &Services) -> anyhow::Result<Arc<dyn Plugin>> {
    let store = services.store.clone();
    let access = services.access.clone();
    let hook: AccessRefreshHook = Arc::new(move |ctx: &ConnCtx| {
        let store = store.clone();
        let access = access.clone();
        let reader = ctx.pubkey.clone().unwrap_or_default();
        Box::pin(async move {
            use buzz_core::store::schema::channel_members;
            use diesel::prelude::*;
            store
                .write(move |conn| {
                    buzz_core::with_conn!(conn, |c| diesel::delete(
                        channel_members::table.filter(channel_members::pubkey.eq(&reader))
                    )
                    .execute(c))?;
                    Ok(())
                })
                .await
                .expect("membership removed");
            // What committing a 9001 does: cached access facts are dropped.
            access.invalidate();
        })
    });
    Ok(Arc::new(
        ChannelWindows::new(services, budgets).with_before_access_refresh(hook),
    ))
}

async fn access_revoked_mid_request_is_unavailable(backend: TestBackend, name: &str) {
    let Some(relay) = relay_with(backend, name, PluginEntry::of::<Revoking>(), json!({})).await
    else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let mut bob = User::new(&relay).await;
    let private = alice.create_channel(true).await;
    alice.add_member(&private, &bob.pubkey()).await;
    let t = now() - 10;
    let root = alice.post_at(&private, "root", t).await;
    alice.post_reply(&private, &root, t + 1).await;
    // Bob can read it (a plain filter says so), but loses access while the window is
    // built: the batch is discarded, on either transport.
    let plain = json!({"#h": [private], "kinds": [9]});
    assert_eq!(bob.req(vec![plain.clone()]).await.map(|e| e.len()), Ok(2));
    let filter = thread(&private, &root.id, 5, None);
    let (status, body) = bob.http(&relay, vec![filter.clone()]).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(
        body.as_object().map(|o| o.len()),
        Some(1),
        "only the error: {body}"
    );
    // Now without access: an inaccessible channel, nothing at all.
    assert_eq!(bob.query(&relay, vec![filter.clone()]).await, vec![]);
    alice.add_member(&private, &bob.pubkey()).await;
    let closed = bob.req(vec![filter.clone()]).await.expect_err("CLOSED");
    assert!(closed.starts_with("error:"), "{closed}");
    assert_eq!(bob.req(vec![filter]).await, Ok(vec![]));
    relay.stop().await;
}

async fn malformed_stored_aux_is_an_internal_error(backend: TestBackend, name: &str) {
    let Some(relay) = relay(backend, name).await else {
        return;
    };
    let mut alice = User::new(&relay).await;
    let ch = alice.create_channel(false).await;
    let t = now() - 10;
    let root = alice.post_at(&ch, "root", t).await;
    alice.post_reply(&ch, &root, t + 1).await;
    let reaction = alice.react(&ch, &root, t + 2).await;
    corrupt_tags(&relay, &reaction.id).await;

    let mut thread_filter = thread(&ch, &root.id, 5, None);
    let mut channel_filter = window(&ch, 5, None);
    // Without the aux closure nothing reads the broken event.
    assert_eq!(
        alice.query(&relay, vec![thread_filter.clone()]).await.len(),
        2
    );
    assert_eq!(
        alice
            .query(&relay, vec![channel_filter.clone()])
            .await
            .len(),
        2
    );
    thread_filter["include_aux"] = json!(true);
    channel_filter["include_aux"] = json!(true);
    for filter in [thread_filter, channel_filter] {
        let (status, body) = alice.http(&relay, vec![filter.clone()]).await;
        assert_eq!(status, 500, "{filter}: {body}");
        assert_eq!(body, json!({"error": "error: internal error"}));
        let closed = alice.req(vec![filter]).await.expect_err("CLOSED");
        assert_eq!(closed, "error: internal error");
    }
    relay.stop().await;
}
