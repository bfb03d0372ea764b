//! No session affinity: a capture started on one relay process is paged, read and
//! completed on another (one PostgreSQL, one Redis). And a Redis outage is a service
//! failure: nothing is captured, nothing partial stays behind.

mod common;

use buzz_artifacts::ArtifactsPlugin;
use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{OwnRedis, SharedStorage, TestRelay};
use buzz_nostr::keys::Keys;
use buzz_snapshot::{Captures, SnapshotPlugin};
use common::*;

async fn process(test: &str, storage: &SharedStorage) -> TestRelay {
    process_tuned(test, storage, |_| {}).await
}

async fn process_tuned(
    test: &str,
    storage: &SharedStorage,
    tweak: impl FnOnce(&mut buzz_core::config::Settings),
) -> TestRelay {
    let plugins = vec![
        PluginEntry::of::<SnapshotPlugin>(),
        PluginEntry::of::<ArtifactsPlugin>(),
    ];
    storage.process(test, tweak, plugins).await
}

/// Two processes on one PostgreSQL (captures in Redis, or in that database): throwaway
/// keys of one community, starting captures at once on both, hold at most what the
/// other communities' reserves leave; readers of other communities start on either
/// process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn community_shares_hold_across_processes_in_redis() {
    community_shares_hold_across_processes("processes::shares_in_redis", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn community_shares_hold_across_processes_in_the_database() {
    community_shares_hold_across_processes("processes::shares_in_the_database", false).await;
}

async fn community_shares_hold_across_processes(test: &str, in_redis: bool) {
    let Some(storage) = SharedStorage::create(test) else {
        return;
    };
    let owner = Keys::generate();
    let tweak = |s: &mut buzz_core::config::Settings| {
        add_communities(s, owner.pubkey());
        if !in_redis {
            s.storage.redis_url = String::new();
        }
    };
    let a = process_tuned(test, &storage, tweak).await;
    let b = process_tuned(test, &storage, tweak).await;
    let mut owner = User::at(&b, CLOSED, owner.clone()).await;
    let member = Keys::generate();
    admit(&mut owner, member.pubkey()).await;
    let other = Keys::generate();

    // Forty starts at once, two per throwaway key, alternating processes (some are
    // refused by each process's bound on operations at once)...
    let mut burst = Vec::new();
    for i in 0..40 {
        let relay = if i % 2 == 0 { &a } else { &b };
        let (http, keys) = (relay.http(), Keys::generate());
        burst.push(tokio::spawn(async move {
            let body = serde_json::json!([start_filter(tasks())]).to_string();
            let mut held = 0;
            for _ in 0..2 {
                let (status, answer) = http.post_signed(&keys, "/query", body.as_bytes()).await;
                match status {
                    200 => held += 1,
                    503 => assert_eq!(answer["code"], "snapshot_unavailable"),
                    other => panic!("{other}: {answer}"),
                }
            }
            held
        }));
    }
    let mut held = 0;
    for task in burst {
        held += task.await.expect("burst");
    }
    // ...then one at a time until the community's part is surely full.
    let mut refused_in_a_row = 0;
    for i in 0..64 {
        if refused_in_a_row == 4 {
            break;
        }
        let relay = if i % 2 == 0 { &a } else { &b };
        let (status, answer) = ask(relay, &User::new(relay).await, start_filter(tasks())).await;
        if status == 200 {
            held += 1;
            refused_in_a_row = 0;
        } else {
            assert_code(&(status, answer), 503, "snapshot_unavailable");
            refused_in_a_row += 1;
        }
    }
    let listed = Captures::of_relay(&a.settings, a.running().services.store.clone())
        .await
        .expect("captures")
        .list()
        .await
        .expect("list");
    assert_eq!(listed.len(), held, "{listed:?}");
    println!("one community holds {held} captures over two processes");

    // Readers of the other communities, on either process.
    let answer = ask_at(&a, OTHER, &other, start_filter(tasks())).await;
    assert_eq!(answer.0, 200, "other community on A: {}", answer.1);
    let answer = ask_at(&b, CLOSED, &member, start_filter(tasks())).await;
    assert_eq!(answer.0, 200, "closed community on B: {}", answer.1);
    // What the two other communities' reserves leave.
    let limits = buzz_snapshot::Limits::default();
    assert_eq!(
        held,
        limits.max_captures - 2 * limits.captures_reserved_per_community
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_on_a_page_and_complete_on_b() {
    let test = "processes::start_on_a_page_and_complete_on_b";
    let Some(storage) = SharedStorage::create(test) else {
        return;
    };
    let a = process(test, &storage).await;
    let b = process(test, &storage).await;

    let mut reader = User::new(&a).await;
    let ch = reader.create_channel(false).await;
    for i in 0..3 {
        reader.put(&Draft::create(&ch, &format!("t{i}"))).await;
    }
    let (status, first) = ask(&a, &reader, start_filter(tasks())).await;
    assert_eq!(status, 200, "{first}");
    let token = first["token"].as_str().expect("token").to_owned();
    let all = entries(&first);
    assert_eq!(all.len(), 3);
    // The same reader, on B: same host, same token.
    let reader_on_b = User::with_keys(&b, reader.keys.clone()).await;
    let got = verified_bodies(&b, &reader_on_b, &token, &all).await;
    assert_eq!(got.len(), 3);
    let done = complete(&b, &reader_on_b, &token).await;
    assert_eq!(done.0, 200, "{}", done.1);
    // B sees A's capture in the shared store.
    let listed = Captures::of_relay(&b.settings, b.running().services.store.clone())
        .await
        .expect("captures")
        .list()
        .await
        .expect("list");
    assert_eq!(listed.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_is_a_service_failure() {
    let test = "processes::a_redis_outage_is_a_service_failure";
    let Some(storage) = SharedStorage::create(test) else {
        return;
    };
    let port = OwnRedis::free_port();
    let mut redis = OwnRedis::start(port).await;
    let storage = storage.with_redis(&redis.url());
    let relay = process(test, &storage).await;
    let mut reader = User::new(&relay).await;
    let ch = reader.create_channel(false).await;
    reader.put(&Draft::create(&ch, "t")).await;
    let first = start(&relay, &reader, tasks()).await;
    let token = first["token"].as_str().expect("token").to_owned();

    redis.kill();
    let (status, body) = ask(&relay, &reader, start_filter(tasks())).await;
    assert_eq!(status, 503, "{body}");
    let (status, body) = complete(&relay, &reader, &token).await;
    assert_eq!(status, 503, "{body}");

    // Redis comes back empty: the capture is gone (a reset), nothing half-registered.
    let _back = OwnRedis::start(port).await;
    let mut answer = complete(&relay, &reader, &token).await;
    for _ in 0..40 {
        if answer.0 != 503 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        answer = complete(&relay, &reader, &token).await;
    }
    assert_code(&answer, 409, "snapshot_reset");
    let listed = Captures::of_relay(&relay.settings, relay.running().services.store.clone())
        .await
        .expect("captures")
        .list()
        .await
        .expect("list");
    assert!(listed.is_empty(), "{listed:?}");
}

/// A statement held up inside PostgreSQL (the artifact heads locked by another session)
/// is cut by the bounds the relay sets on its session: 503, and nothing registered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_statement_is_unavailable_not_partial() {
    use diesel::{Connection, RunQueryDsl};
    let test = "processes::a_stalled_statement_is_unavailable_not_partial";
    let Some(relay) = relay(buzz_core::testkit::TestBackend::Postgres, test).await else {
        return;
    };
    let mut reader = User::new(&relay).await;
    let ch = reader.create_channel(false).await;
    reader.put(&Draft::create(&ch, "t")).await;
    let url = relay.settings.storage.database_url.clone();
    let (release, locked) = std::sync::mpsc::channel::<()>();
    let (held, hold) = std::sync::mpsc::channel::<()>();
    let blocker = std::thread::spawn(move || {
        let mut conn = diesel::PgConnection::establish(&url).expect("second session");
        conn.transaction::<_, diesel::result::Error, _>(|c| {
            diesel::sql_query("LOCK TABLE artifact_heads IN ACCESS EXCLUSIVE MODE").execute(c)?;
            let _ = held.send(());
            let _ = locked.recv_timeout(std::time::Duration::from_secs(30));
            Ok(())
        })
        .expect("lock held");
    });
    hold.recv().expect("lock taken");
    let began = std::time::Instant::now();
    let answer = ask(&relay, &reader, start_filter(tasks())).await;
    let waited = began.elapsed();
    let _ = release.send(());
    blocker.join().expect("blocker");
    assert_code(&answer, 503, "snapshot_unavailable");
    assert!(waited < std::time::Duration::from_secs(8), "{waited:?}");
    let listed = Captures::of_relay(&relay.settings, relay.running().services.store.clone())
        .await
        .expect("captures")
        .list()
        .await
        .expect("list");
    assert!(listed.is_empty(), "{listed:?}");
    // The lock gone, the same request succeeds.
    assert_eq!(ask(&relay, &reader, start_filter(tasks())).await.0, 200);
}

/// At most `concurrent_operations` snapshot operations run in one process: while one
/// is held up inside the database, the next is refused at once with a 503.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operations_beyond_the_process_bound_are_refused() {
    use diesel::{Connection, RunQueryDsl};
    let test = "processes::operations_beyond_the_process_bound_are_refused";
    let options = serde_json::json!({"concurrent_operations": 1});
    let Some(relay) = relay_with(buzz_core::testkit::TestBackend::Postgres, test, options).await
    else {
        return;
    };
    let mut reader = User::new(&relay).await;
    let ch = reader.create_channel(false).await;
    reader.put(&Draft::create(&ch, "t")).await;
    let url = relay.settings.storage.database_url.clone();
    let (release, locked) = std::sync::mpsc::channel::<()>();
    let (held, hold) = std::sync::mpsc::channel::<()>();
    let blocker = std::thread::spawn(move || {
        let mut conn = diesel::PgConnection::establish(&url).expect("second session");
        conn.transaction::<_, diesel::result::Error, _>(|c| {
            diesel::sql_query("LOCK TABLE artifact_heads IN ACCESS EXCLUSIVE MODE").execute(c)?;
            let _ = held.send(());
            let _ = locked.recv_timeout(std::time::Duration::from_secs(30));
            Ok(())
        })
        .expect("lock held");
    });
    hold.recv().expect("lock taken");
    let first = {
        let (keys, host, addr) = (reader.keys.clone(), relay.host(), relay.addr);
        tokio::spawn(async move {
            let body = serde_json::json!([start_filter(tasks())]).to_string();
            buzz_core::testkit::HttpClient::new(addr, &host)
                .post_signed(&keys, "/query", body.as_bytes())
                .await
        })
    };
    // Wait until the first request is waiting on the lock inside PostgreSQL.
    let url = relay.settings.storage.database_url.clone();
    let waiting = tokio::task::spawn_blocking(move || {
        #[derive(diesel::QueryableByName)]
        struct Waiting {
            #[diesel(sql_type = diesel::sql_types::BigInt)]
            n: i64,
        }
        let mut conn = diesel::PgConnection::establish(&url).expect("third session");
        for _ in 0..100 {
            let w: Waiting =
                diesel::sql_query("SELECT count(*) AS n FROM pg_locks WHERE NOT granted")
                    .get_result(&mut conn)
                    .expect("pg_locks");
            if w.n > 0 {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        false
    })
    .await
    .expect("join");
    assert!(waiting, "the first request reached the lock");
    let began = std::time::Instant::now();
    let second = ask(&relay, &reader, start_filter(tasks())).await;
    assert_code(&second, 503, "snapshot_unavailable");
    assert!(
        began.elapsed() < std::time::Duration::from_secs(1),
        "refused at once"
    );
    let _ = release.send(());
    blocker.join().expect("blocker");
    let (status, body) = first.await.expect("first request");
    assert!(status == 200 || status == 503, "{status} {body}");
    // The slot is free again.
    assert_eq!(ask(&relay, &reader, start_filter(tasks())).await.0, 200);
}
