//! The reset matrix: for each reset cause NIP-AR names, capture → cause → complete →
//! 409 `snapshot_reset`; for each non-cause, complete → `true`. A wrong "complete"
//! deletes a user's local records, so every cause is its own case on a fresh relay.

use buzz_core::both_backends;
mod common;

use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_nostr::event::Event;
use buzz_snapshot::Captures;
use common::*;
use serde_json::json;

both_backends!(
    deletes_and_moves_reset_even_when_undone,
    redaction_resets,
    access_changes_reset_pages_and_completion,
    channel_changes_reset,
    later_activity_does_not_reset,
    community_removal_forgets_captures,
    pages_reset_when_a_captured_artifact_moved_or_vanished,
    pages_do_not_reset_on_later_updates,
);

/// A relay, its channel owner, a reader, an open channel with one task by the reader.
struct Case {
    relay: TestRelay,
    owner: User,
    reader: User,
    open: String,
    task: Event,
}

async fn case(backend: TestBackend, name: &str) -> Option<Case> {
    let relay = relay(backend, name).await?;
    let mut owner = User::new(&relay).await;
    let mut reader = User::new(&relay).await;
    let open = owner.create_channel(false).await;
    let task = reader.put(&Draft::create(&open, "task")).await;
    Some(Case {
        relay,
        owner,
        reader,
        open,
        task,
    })
}

impl Case {
    async fn capture(&self) -> String {
        let (token, entries) = capture(&self.relay, &self.reader, tasks()).await;
        assert!(!entries.is_empty());
        token
    }

    async fn completes(&self, token: &str, what: &str) {
        let answer = complete(&self.relay, &self.reader, token).await;
        assert_eq!(answer.0, 200, "{what}: {}", answer.1);
        assert_eq!(answer.1["complete"], true, "{what}");
    }

    async fn resets(&self, token: &str, what: &str) {
        let answer = complete(&self.relay, &self.reader, token).await;
        assert_eq!(answer.0, 409, "{what}: {}", answer.1);
        assert_code(&answer, 409, "snapshot_reset");
    }
}

fn moved(prev: &Event, to: &str) -> Draft {
    let mut d = Draft::after(prev, "move");
    d.h = to.to_owned();
    d
}

async fn deletes_and_moves_reset_even_when_undone(backend: TestBackend, name: &str) {
    // Delete.
    let Some(mut c) = case(backend, name).await else {
        return;
    };
    let token = c.capture().await;
    c.reader.put(&Draft::after(&c.task, "delete")).await;
    c.resets(&token, "delete").await;

    // Delete, then restore: the captured revision is no longer current in between.
    let Some(mut c) = case(backend, name).await else {
        return;
    };
    let token = c.capture().await;
    let gone = c.reader.put(&Draft::after(&c.task, "delete")).await;
    c.reader.put(&Draft::after(&gone, "restore")).await;
    c.resets(&token, "delete + restore").await;

    // Move to another readable channel.
    let Some(mut c) = case(backend, name).await else {
        return;
    };
    let other = c.owner.create_channel(false).await;
    let token = c.capture().await;
    c.reader.put(&moved(&c.task, &other)).await;
    c.resets(&token, "move").await;

    // Move, then move back: home is the captured channel again, still a reset.
    let Some(mut c) = case(backend, name).await else {
        return;
    };
    let other = c.owner.create_channel(false).await;
    let token = c.capture().await;
    let away = c.reader.put(&moved(&c.task, &other)).await;
    let open = c.open.clone();
    c.reader.put(&moved(&away, &open)).await;
    c.resets(&token, "move + move back").await;
}

async fn redaction_resets(backend: TestBackend, name: &str) {
    // The captured revision removed by a moderator.
    let Some(mut c) = case(backend, name).await else {
        return;
    };
    let token = c.capture().await;
    let removal = c.owner.keys.sign(
        9005,
        vec![tag(&["h", &c.open]), tag(&["e", &c.task.id])],
        "",
        now(),
    );
    c.owner.publish(removal).await;
    c.resets(&token, "captured revision redacted").await;
    // Its bodies are refused too.
    let (status, _) = bodies(
        &c.relay,
        &c.reader,
        &token,
        std::slice::from_ref(&c.task.id),
    )
    .await;
    assert_eq!(status, 409);

    // A later revision redacted while current: the artifact is retired.
    let Some(mut c) = case(backend, name).await else {
        return;
    };
    let token = c.capture().await;
    let v2 = c.reader.put(&Draft::after(&c.task, "update")).await;
    let removal = c.owner.keys.sign(
        9005,
        vec![tag(&["h", &c.open]), tag(&["e", &v2.id])],
        "",
        now(),
    );
    c.owner.publish(removal).await;
    c.resets(&token, "artifact retired").await;
}

async fn access_changes_reset_pages_and_completion(backend: TestBackend, name: &str) {
    // Access lost to a captured private channel.
    let Some(mut c) = case(backend, name).await else {
        return;
    };
    let private = c.owner.create_channel(true).await;
    c.owner.add_member(&private, &c.reader.pubkey()).await;
    c.reader.put(&Draft::create(&private, "inside")).await;
    let first = start(&c.relay, &c.reader, tasks()).await;
    let token = first["token"].as_str().expect("token").to_owned();
    c.owner.remove_member(&private, &c.reader.pubkey()).await;
    c.resets(&token, "access lost").await;

    // Pages recheck the whole frozen scope too (one entry per page here).
    let Some(relay) = relay_with(backend, name, json!({"page_rows": 1})).await else {
        return;
    };
    let mut owner = User::new(&relay).await;
    let mut reader = User::new(&relay).await;
    let private = owner.create_channel(true).await;
    owner.add_member(&private, &reader.pubkey()).await;
    reader.put(&Draft::create(&private, "one")).await;
    reader.put(&Draft::create(&private, "two")).await;
    let first = start(&relay, &reader, tasks()).await;
    let token = first["token"].as_str().expect("token");
    owner.remove_member(&private, &reader.pubkey()).await;
    let next = page(
        &relay,
        &reader,
        token,
        first["nextToken"].as_str().expect("cursor"),
    )
    .await;
    assert_code(&next, 409, "snapshot_reset");

    // Access gained to a channel that existed at capture: its tasks are missing.
    let Some(mut c) = case(backend, name).await else {
        return;
    };
    let private = c.owner.create_channel(true).await;
    c.owner.put(&Draft::create(&private, "unseen")).await;
    let token = c.capture().await;
    c.owner.add_member(&private, &c.reader.pubkey()).await;
    c.resets(&token, "access gained").await;
}

async fn channel_changes_reset(backend: TestBackend, name: &str) {
    // The captured channel's row changes (here: renamed).
    let Some(mut c) = case(backend, name).await else {
        return;
    };
    let token = c.capture().await;
    let edit = c.owner.keys.sign(
        9002,
        vec![tag(&["h", &c.open]), tag(&["name", "renamed"])],
        "",
        now(),
    );
    c.owner.publish(edit).await;
    c.resets(&token, "captured channel changed").await;
}

async fn later_activity_does_not_reset(backend: TestBackend, name: &str) {
    let Some(mut c) = case(backend, name).await else {
        return;
    };
    let token = c.capture().await;
    // Channels below are created in a later second: one stamped with the capture's own
    // second counts as existing at capture (the conservative reading, see `scope.rs`).
    tokio::time::sleep(std::time::Duration::from_millis(1_100)).await;
    // A plain update of a captured artifact.
    c.reader.put(&Draft::after(&c.task, "update")).await;
    // A new artifact in the captured channel.
    let open = c.open.clone();
    c.reader.put(&Draft::create(&open, "new")).await;
    // Chat in the captured channel.
    c.reader.post(&open, "hello").await;
    // An unrelated TTL chat.
    let chat = uuid();
    let tags = vec![
        tag(&["h", &chat]),
        tag(&["name", "brief"]),
        tag(&["ttl", "600"]),
    ];
    c.owner
        .publish(c.owner.keys.sign(9007, tags, "", now()))
        .await;
    c.owner.post(&chat, "gone soon").await;
    // An unrelated new channel, with a task of its own.
    let fresh = c.owner.create_channel(false).await;
    c.owner.put(&Draft::create(&fresh, "elsewhere")).await;
    c.completes(&token, "later activity").await;
}

async fn community_removal_forgets_captures(backend: TestBackend, name: &str) {
    let Some(c) = case(backend, name).await else {
        return;
    };
    let token = c.capture().await;
    let captures = Captures::of_relay(&c.relay.settings, c.relay.running().services.store.clone())
        .await
        .expect("capture store");
    let listed = captures.list().await.expect("list");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].reader, c.reader.pubkey());
    assert_eq!(
        (listed[0].entries, listed[0].pages, listed[0].pages_served),
        (1, 1, 1)
    );
    assert!(listed[0].bytes > 0);
    let community = listed[0].community;
    assert_eq!(
        captures
            .forget_community(community + 1)
            .await
            .expect("other"),
        0
    );
    assert_eq!(
        captures.forget_community(community).await.expect("forget"),
        1
    );
    assert!(captures.list().await.expect("list").is_empty());
    c.resets(&token, "community removed").await;
}

/// A capture of three tasks, one entry per page, its first page served: the relay, the
/// channel owner, the reader, the open channel of the tasks, another open channel and a
/// private one of the owner's (both made before the capture, so they are not news), the
/// first page's task, its token and the next cursor.
struct Paged {
    relay: TestRelay,
    owner: User,
    reader: User,
    open: String,
    other: String,
    hidden: String,
    first: Event,
    token: String,
    next: String,
}

/// `by_owner`: the first page's task is the channel owner's (who may move it where
/// the reader cannot follow), else the reader's.
async fn paged(backend: TestBackend, name: &str, by_owner: bool) -> Option<Paged> {
    paged_by(backend, name, by_owner, common::tasks()).await
}

/// [`paged`] with this capture query (the tasks are `status: open`).
async fn paged_by(
    backend: TestBackend,
    name: &str,
    by_owner: bool,
    query: serde_json::Value,
) -> Option<Paged> {
    let relay = relay_with(backend, name, json!({"page_rows": 1})).await?;
    let mut owner = User::new(&relay).await;
    let mut reader = User::new(&relay).await;
    let open = owner.create_channel(false).await;
    let other = owner.create_channel(false).await;
    let hidden = owner.create_channel(true).await;
    let mut tasks = Vec::new();
    for i in 0..3 {
        let author = if by_owner { &mut owner } else { &mut reader };
        let draft = Draft::create(&open, &format!("task {i}")).with("status", "open");
        tasks.push(author.put(&draft).await);
    }
    let answer = start(&relay, &reader, query).await;
    let listed = entries(&answer);
    assert_eq!(listed.len(), 1);
    let first = tasks
        .into_iter()
        .find(|t| t.id == listed[0].revision_id)
        .expect("the first page holds one of the tasks");
    Some(Paged {
        token: answer["token"].as_str().expect("token").to_owned(),
        next: answer["nextToken"].as_str().expect("cursor").to_owned(),
        relay,
        owner,
        reader,
        open,
        other,
        hidden,
        first,
    })
}

impl Paged {
    /// What the next page answers, asked twice (the same both times): the artifact that
    /// changed is on the already served first page, not on the page asked for.
    async fn next_page(&self) -> (u16, serde_json::Value) {
        let answer = page(&self.relay, &self.reader, &self.token, &self.next).await;
        let again = page(&self.relay, &self.reader, &self.token, &self.next).await;
        assert_eq!(again, answer, "a repeated cursor answers the same");
        answer
    }

    /// Every page after the first, each answered (the same when asked again): the
    /// revisions of all the capture's entries.
    async fn every_page(&self) -> Vec<String> {
        let mut cursor = self.next.clone();
        let mut seen = vec![self.first.id.clone()];
        loop {
            let answer = page(&self.relay, &self.reader, &self.token, &cursor).await;
            assert_eq!(answer.0, 200, "{}", answer.1);
            let again = page(&self.relay, &self.reader, &self.token, &cursor).await;
            assert_eq!(again, answer, "a repeated cursor answers the same page");
            seen.extend(entries(&answer.1).into_iter().map(|e| e.revision_id));
            match answer.1["nextToken"].as_str() {
                Some(next) => cursor = next.to_owned(),
                None => return seen,
            }
        }
    }
}

async fn pages_reset_when_a_captured_artifact_moved_or_vanished(backend: TestBackend, name: &str) {
    // Each cause on a fresh capture; the next page's answer to each.
    let mut answers = Vec::new();

    // Moved to another channel the reader can read.
    let Some(mut p) = paged(backend, name, false).await else {
        return;
    };
    let other = p.other.clone();
    p.reader.put(&moved(&p.first, &other)).await;
    answers.push(("move", p.next_page().await));
    // A body read checks only the requested channels and revisions (NIP-AR): both are
    // intact after a move, so the captured revision is still served, exactly.
    let (status, body) = bodies(
        &p.relay,
        &p.reader,
        &p.token,
        std::slice::from_ref(&p.first.id),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["events"][0]["id"], p.first.id.as_str());

    // Moved out of the captured scope: into a channel the reader cannot read.
    let Some(mut p) = paged(backend, name, true).await else {
        return;
    };
    let hidden = p.hidden.clone();
    p.owner.put(&moved(&p.first, &hidden)).await;
    answers.push(("move out of scope", p.next_page().await));

    // Moved away and back: home is the captured channel again.
    let Some(mut p) = paged(backend, name, false).await else {
        return;
    };
    let other = p.other.clone();
    let away = p.reader.put(&moved(&p.first, &other)).await;
    let open = p.open.clone();
    p.reader.put(&moved(&away, &open)).await;
    answers.push(("move + move back", p.next_page().await));

    // Deleted.
    let Some(mut p) = paged(backend, name, false).await else {
        return;
    };
    p.reader.put(&Draft::after(&p.first, "delete")).await;
    answers.push(("delete", p.next_page().await));

    // Deleted, then restored.
    let Some(mut p) = paged(backend, name, false).await else {
        return;
    };
    let gone = p.reader.put(&Draft::after(&p.first, "delete")).await;
    p.reader.put(&Draft::after(&gone, "restore")).await;
    answers.push(("delete + restore", p.next_page().await));

    // The captured revision removed by a moderator.
    let Some(mut p) = paged(backend, name, false).await else {
        return;
    };
    let removal = p.owner.keys.sign(
        9005,
        vec![tag(&["h", &p.open]), tag(&["e", &p.first.id])],
        "",
        now(),
    );
    p.owner.publish(removal).await;
    answers.push(("captured revision redacted", p.next_page().await));

    let reset = json!({"error": "snapshot_reset", "code": "snapshot_reset"});
    let wrong: Vec<String> = answers
        .iter()
        .filter(|(_, (status, body))| *status != 409 || *body != reset)
        .map(|(what, (status, _))| format!("{what}: {status}"))
        .collect();
    assert!(wrong.is_empty(), "pages that did not reset: {wrong:?}");
}

async fn pages_do_not_reset_on_later_updates(backend: TestBackend, name: &str) {
    let Some(mut p) = paged(backend, name, false).await else {
        return;
    };
    // An ordinary update of the served page's task, a new task, chat.
    p.reader.put(&Draft::after(&p.first, "update")).await;
    let open = p.open.clone();
    p.reader.put(&Draft::create(&open, "new")).await;
    p.reader.post(&open, "hello").await;
    let seen = p.every_page().await;
    assert_eq!(seen.len(), 3, "the captured entries, not the new task");
    let done = complete(&p.relay, &p.reader, &p.token).await;
    assert_eq!(done.0, 200, "{}", done.1);
    assert_eq!(done.1["complete"], true);

    // An update that takes the task out of the capture's query (status open → done):
    // still an ordinary update, no reset.
    let open_tasks = json!({"artifact": "current", "#type": [TASK], "#status": ["open"]});
    let Some(mut p) = paged_by(backend, name, false, open_tasks).await else {
        return;
    };
    let mut done = Draft::after(&p.first, "update");
    done.extra = vec![tag(&["status", "done"])];
    p.reader.put(&done).await;
    assert_eq!(p.every_page().await.len(), 3);
    let done = complete(&p.relay, &p.reader, &p.token).await;
    assert_eq!(done.0, 200, "{}", done.1);
    assert_eq!(done.1["complete"], true);
}
