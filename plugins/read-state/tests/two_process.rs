//! Two relay processes on one PostgreSQL and one Redis act as one read-state service:
//! an intent on A is what a sidebar on B shows, and a NIP-98 token used on A is a replay
//! on B.

mod common;

use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{SharedStorage, TestRelay};
use buzz_read_state::{ReadStatePlugin, NAME};
use buzz_read_state_client::{self as client, Client};
use common::*;

async fn process(test: &str, storage: &SharedStorage) -> TestRelay {
    let enable = |s: &mut buzz_core::config::Settings| {
        if let Some(section) = s.plugins.get_mut(NAME) {
            section.enabled = Some(true);
        }
    };
    let plugins = vec![PluginEntry::of::<ReadStatePlugin>()];
    storage.process(test, enable, plugins).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intent_on_a_sidebar_on_b_replay_refused() {
    let test = "two_process::intent_on_a_sidebar_on_b_replay_refused";
    let Some(storage) = SharedStorage::create(test) else {
        return;
    };
    let a = process(test, &storage).await;
    let b = process(test, &storage).await;

    let mut alice = User::new(&a).await;
    let mut bob = User::new(&a).await;
    let ch = alice.create_channel("shared", "stream").await;
    bob.join(&ch).await;
    bob.start(&ch).await;
    let message = alice.post(&ch).await;

    // Bob's client on B, addressed by the same external host as on A.
    let on_b = Client::new(&format!("http://{}", b.addr), &a.host(), bob.keys.clone());
    let row = |answer: &client::Answer| answer.body["channels"][0].clone();
    let before = on_b.refresh(&[&ch]).await.expect("sidebar on B");
    assert_eq!(before.status, 200, "{}", before.body);
    assert_eq!(row(&before)["unread"], true);

    // The intent goes to A; B's sidebar shows it.
    bob.apply(client::mark_through(&ch, None, &message.id))
        .await;
    let after = on_b.refresh(&[&ch]).await.expect("sidebar on B");
    assert_eq!(row(&after)["unread"], false, "{}", after.body);
    assert_eq!(row(&after)["read_through_id"], message.id.as_str());

    // One token, used on A, is a replay on B.
    let path = "/buzz/v1/me/sidebar?limit=20";
    let auth = bob.api.authorization("GET", path, None);
    let first = bob.api.get_with(path, Some(&auth)).await.expect("A");
    assert_eq!(first.status, 200, "{}", first.body);
    let replay = on_b.get_with(path, Some(&auth)).await.expect("B");
    assert_api_error(&replay, 401, "unauthorized");

    a.stop().await;
    b.stop().await;
    drop(storage);
}
