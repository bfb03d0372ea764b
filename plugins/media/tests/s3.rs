//! The s3 store against a real S3-protocol server (moto in server mode, `pip install
//! "moto[server]"`, started by the test on a free port), on both backends: uploads land
//! in the bucket under `<community>/<sha256>` and nowhere else, downloads and ranges
//! stream back from it, refusals put nothing there, and the last owner's `DELETE` and
//! garbage collection take the object out. Skips with one `skipped:` line when
//! `moto_server` is not installed (a failure under `CI`).

mod common;

use buzz_core::both_backends;
use buzz_core::config::Settings;
use buzz_core::plugin::PluginEntry;
use buzz_core::store::Store;
use buzz_core::testkit::{tag, Member, SharedStorage, TestBackend};
use buzz_media::MediaPlugin;
use buzz_nostr::keys::Keys;
use common::*;
use serde_json::json;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

both_backends!(blobs_live_in_the_bucket_and_leave_it);

/// Two relay processes on one PostgreSQL + Redis and one bucket act as one Blossom
/// server: a blob uploaded through one is fetched through the other, and a ban given
/// on one cuts reads on the other at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_share_one_bucket() {
    let test = "s3::two_processes_share_one_bucket";
    let Some(storage) = SharedStorage::create(test) else {
        return;
    };
    let Some(moto) = Moto::start(test).await else {
        return;
    };
    let owner_keys = Keys::generate();
    let owner_hex = owner_keys.pubkey().to_owned();
    let tweak = moto.shared_bucket(Vec::new());
    let with_owner = move |s: &mut Settings| {
        s.communities[0].owners = vec![owner_hex.clone()];
        tweak(s);
    };
    let plugins = || vec![PluginEntry::of::<MediaPlugin>()];
    let a = storage.process(test, with_owner.clone(), plugins()).await;
    let b = storage.process(test, with_owner, plugins()).await;
    let mut owner = Member::with_keys(&a, owner_keys).await;
    let (alice, bob) = (Member::new(&a).await, Member::new(&b).await);
    let bytes = png(b"shared through the bucket");
    let sha = sha256(&bytes);
    assert_eq!(
        Blossom::new(&a)
            .upload(&alice.keys, &bytes, &[])
            .await
            .status,
        201
    );
    let on_b = Blossom::new(&b).get(&bob.keys, &sha).await;
    assert_eq!((on_b.status, on_b.body == bytes), (200, true));
    assert_eq!(
        Blossom::new(&b).upload(&bob.keys, &bytes, &[]).await.status,
        200
    );
    assert_eq!(moto.keys().await.len(), 1);

    let ban = owner.sign(9042, vec![tag(&["p", bob.keys.pubkey()])], "");
    owner.publish(ban).await;
    // Process b has heard of the ban once it closes bob's connection there.
    let mut bob = bob;
    let (code, reason) = bob.ws.close_frame().await.expect("a close frame");
    assert_eq!(code, 1008, "{reason}");
    Blossom::new(&b).get(&bob.keys, &sha).await.refused(404);
    a.stop().await;
    b.stop().await;
}

/// Two processes take uploads into one community at once: its quota holds across them
/// (each records under the community's lock on PostgreSQL, `rows.rs`).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_processes_keep_one_community_quota() {
    let test = "s3::two_processes_keep_one_community_quota";
    let Some(storage) = SharedStorage::create(test) else {
        return;
    };
    let Some(moto) = Moto::start(test).await else {
        return;
    };
    let blobs: Vec<Vec<u8>> = (0..8u8).map(|i| png(&[i; 4096])).collect();
    let size = blobs[0].len() as u64;
    // Room for one blob and a half: exactly one upload may pass.
    let tweak = moto.shared_bucket(vec![("quota_bytes_per_community", json!(size + size / 2))]);
    let plugins = || vec![PluginEntry::of::<MediaPlugin>()];
    let a = storage.process(test, tweak.clone(), plugins()).await;
    let b = storage.process(test, tweak, plugins()).await;
    let mut uploaders = Vec::new();
    for i in 0..blobs.len() {
        let relay = if i % 2 == 0 { &a } else { &b };
        uploaders.push((Member::new(relay).await, i % 2 == 0));
    }
    let uploads = uploaders.iter().zip(&blobs).map(|((member, on_a), bytes)| {
        let relay = if *on_a { &a } else { &b };
        async move {
            Blossom::new(relay)
                .upload(&member.keys, bytes, &[])
                .await
                .status
        }
    });
    let statuses = futures_util::future::join_all(uploads).await;
    let accepted = statuses.iter().filter(|s| **s == 201).count();
    assert_eq!(
        accepted, 1,
        "one upload fits the community's quota: {statuses:?}"
    );
    assert!(
        statuses.iter().all(|s| *s == 201 || *s == 429),
        "the others are refused for the quota: {statuses:?}"
    );
    assert_eq!(moto.keys().await.len(), 1, "only the accepted blob is kept");
    a.stop().await;
    b.stop().await;
}

const BUCKET: &str = "buzz-media-test";

/// A moto server of this test's own, stopped when dropped.
struct Moto {
    child: Child,
    endpoint: String,
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    /// Settings that put `[plugins.media]` on this server's bucket, with `extra` keys.
    fn shared_bucket(
        &self,
        extra: Vec<(&'static str, serde_json::Value)>,
    ) -> impl Fn(&mut Settings) + Clone {
        let endpoint = self.endpoint.clone();
        move |s: &mut Settings| {
            if let Some(section) = s.plugins.get_mut("media") {
                let bucket = [
                    ("store", json!("s3")),
                    ("endpoint", json!(endpoint.clone())),
                    ("bucket", json!(BUCKET)),
                    ("access_key_id", json!("testing")),
                    ("secret_access_key", json!("testing")),
                    ("path_style", json!(true)),
                ];
                for (key, value) in bucket.into_iter().chain(extra.iter().cloned()) {
                    section.options.insert(key.into(), value);
                }
            }
        }
    }

    async fn start(test: &str) -> Option<Moto> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = match Command::new("moto_server")
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
        {
            Ok(child) => child,
            Err(e) => {
                if std::env::var_os("CI").is_some() {
                    panic!("{test}: CI is set but moto_server cannot start: {e}");
                }
                println!("skipped: {test}: moto_server is not installed ({e})");
                return None;
            }
        };
        let moto = Moto {
            child,
            endpoint: format!("http://127.0.0.1:{port}"),
        };
        // Ready when it answers; Python takes a few seconds to import moto.
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = reqwest::Client::new();
        loop {
            let url = format!("{}/{BUCKET}", moto.endpoint);
            if let Ok(answer) = client.put(&url).send().await {
                assert!(
                    answer.status().is_success(),
                    "creating the bucket: {}",
                    answer.status()
                );
                return Some(moto);
            }
            assert!(
                Instant::now() < deadline,
                "moto_server did not answer within 60 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The keys the bucket holds.
    async fn keys(&self) -> Vec<String> {
        let url = format!("{}/{BUCKET}?list-type=2", self.endpoint);
        let xml = reqwest::get(url)
            .await
            .expect("list")
            .text()
            .await
            .expect("xml");
        xml.split("<Key>")
            .skip(1)
            .filter_map(|rest| rest.split("</Key>").next())
            .map(str::to_owned)
            .collect()
    }
}

async fn blobs_live_in_the_bucket_and_leave_it(backend: TestBackend, name: &str) {
    let Some(moto) = Moto::start(name).await else {
        return;
    };
    let owner = Keys::generate();
    let media = json!({
        "store": "s3", "endpoint": moto.endpoint, "bucket": BUCKET, "region": "us-east-1",
        "access_key_id": "testing", "secret_access_key": "testing", "path_style": true,
    });
    let Some(relay) = relay(backend, name, &owner, media).await else {
        return;
    };
    let (alice, bob) = (Member::new(&relay).await, Member::new(&relay).await);
    let blossom = Blossom::new(&relay);
    let bytes = png(&[9u8; 300_000]);
    let sha = sha256(&bytes);

    assert_eq!(blossom.upload(&alice.keys, &bytes, &[]).await.status, 201);
    assert_eq!(blossom.upload(&bob.keys, &bytes, &[]).await.status, 200);
    let keys = moto.keys().await;
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert!(keys[0].ends_with(&format!("/{sha}")), "{keys:?}");
    assert_eq!((stored_files(&relay), temp_files(&relay)), (0, 0));

    let got = blossom.get(&bob.keys, &sha).await;
    assert_eq!(
        (got.status, got.header("content-type")),
        (200, Some("image/png"))
    );
    assert!(got.body == bytes, "the bucket's bytes are the upload's");
    let auth = token(&bob.keys, "get", &[], &[]);
    let path = format!("/{sha}");
    let part = blossom
        .send(
            "GET",
            &path,
            Some(&auth),
            &[("range", "bytes=100-199")],
            None,
        )
        .await;
    assert_eq!((part.status, part.body.as_slice()), (206, &bytes[100..200]));
    let head = blossom.send("HEAD", &path, Some(&auth), &[], None).await;
    assert_eq!(
        head.header("content-length"),
        Some(bytes.len().to_string().as_str())
    );

    // A refused upload puts nothing in the bucket.
    let other = png(b"other bytes");
    let wrong = token(
        &alice.keys,
        "upload",
        &[&sha256(&other), &sha256(b"x")],
        &[],
    );
    let refused = blossom
        .send(
            "PUT",
            "/upload",
            Some(&wrong),
            &[("x-sha-256", &sha256(b"x"))],
            Some(other),
        )
        .await;
    refused.refused(409);
    assert_eq!(moto.keys().await.len(), 1);

    // The last owner's DELETE takes the object out.
    assert_eq!(blossom.delete(&alice.keys, &sha).await.status, 204);
    assert_eq!(moto.keys().await.len(), 1);
    assert_eq!(blossom.delete(&bob.keys, &sha).await.status, 204);
    assert!(moto.keys().await.is_empty());
    blossom.get(&bob.keys, &sha).await.refused(404);

    // So does garbage collection (`buzz-relay media gc`, here with no grace).
    let orphan = b"nobody links to this".to_vec();
    assert_eq!(blossom.upload(&alice.keys, &orphan, &[]).await.status, 201);
    assert_eq!(moto.keys().await.len(), 1);
    let mut settings = relay.settings.clone();
    if let Some(section) = settings.plugins.get_mut("media") {
        section.options.insert("orphan_grace_secs".into(), json!(0));
    }
    let summary = tokio::task::spawn_blocking(move || {
        let entry = PluginEntry::of::<MediaPlugin>();
        let section = settings.plugin("media");
        Store::with_database(&settings.storage.database_url, |mut conn| {
            Ok(entry.run_command("gc", &section, &settings, &mut conn))
        })
    })
    .await
    .expect("gc thread")
    .expect("database")
    .expect("gc");
    assert!(summary.starts_with("media gc: 1 blobs"), "{summary}");
    assert!(moto.keys().await.is_empty());
    relay.stop().await;
}
