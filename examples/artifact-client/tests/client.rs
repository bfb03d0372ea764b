//! The example client against a real relay: the whole walk, and what it lists.

use buzz_artifact_client::{ArtifactClient, Outcome};
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{TestBackend, TestRelay};
use buzz_nostr::keys::Keys;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_edit_move_delete_restore_list() {
    let relay = TestRelay::start_with(
        TestBackend::Sqlite,
        "artifact_client",
        |_| {},
        vec![PluginEntry::of::<buzz_artifacts::ArtifactsPlugin>()],
    )
    .await
    .expect("sqlite relay");
    let keys = Keys::generate();
    let me = keys.pubkey().to_owned();
    // As a newcomer addresses a local relay: 127.0.0.1 is the `localhost` community.
    let client = ArtifactClient::new(&format!("http://127.0.0.1:{}", relay.addr.port()), keys);
    let team = client.create_channel("team").await.expect("channel");
    let archive = client.create_channel("archive").await.expect("channel");
    let v1 = client.create(
        &team,
        "buzz.task",
        "t",
        &[("assignee", &me), ("status", "open")],
        &json!({"s": 1}),
    );
    assert_eq!(
        client.publish(&v1).await.expect("publish"),
        Outcome::Accepted
    );
    let v2 = client.next(&v1, "update", None, Some("t2"), &json!({"s": 2}));
    assert_eq!(
        client.publish(&v2).await.expect("publish"),
        Outcome::Accepted
    );
    let stale = client.next(&v1, "update", None, Some("stale"), &json!({"s": 0}));
    assert!(
        matches!(client.publish(&stale).await.expect("publish"), Outcome::Conflict(m) if m.starts_with("conflict:"))
    );
    let v3 = client.next(&v2, "move", Some(&archive), None, &json!({"s": 2}));
    assert_eq!(
        client.publish(&v3).await.expect("publish"),
        Outcome::Accepted
    );
    let v4 = client.next(&v3, "delete", None, None, &json!(null));
    assert_eq!(
        client.publish(&v4).await.expect("publish"),
        Outcome::Accepted
    );
    let d = v1.tag_value("d").expect("d").to_owned();
    assert!(client.current_of(&d).await.expect("query").is_none());
    let v5 = client.restore(&v4, &v3, &json!({"s": 3}));
    assert_eq!(
        client.publish(&v5).await.expect("publish"),
        Outcome::Accepted
    );
    // The restore carried the snapshot's title and client tags: it matches again.
    let mine = client
        .list_current(json!({"#assignee": [me], "#status": ["open"]}))
        .await
        .expect("list");
    assert_eq!(mine.len(), 1);
    assert_eq!(mine[0].tag_value("title"), Some("t2"));
    let all = client
        .list_current(json!({"#type": ["buzz.task"]}))
        .await
        .expect("list");
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].id, v5.id);
    assert_eq!(all[0].tag_value("h"), Some(archive.as_str()));
    relay.stop().await;
}
