//! `search-bench --leak`: issue 45's timing question. Does how often a word occurs where
//! a reader cannot read change how long that reader's search takes?
//!
//! An owner posts `--leak-occurrences` messages holding a private word in a private
//! channel (and a few in an open one, so readers have a scope to search). Then, times
//! alternating, searches for the private word and for a word that occurs nowhere:
//! - a non-member of the private channel, authenticated in the same community;
//! - an anonymous reader on another community's host (`kinds: [1]`, what it may ask).
//!
//! Both answers are empty for both words; the p50 ratio (private word / absent word) is
//! what leaks. The acceptance asks for < 2.

use crate::{authed, open_channel};
use buzz_core::config::CommunitySettings;
use buzz_core::testkit::{percentile, tag, BenchStorage, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const PRIVATE_WORD: &str = "xylophonist";
const ABSENT_WORD: &str = "quixotically";
const OTHER_HOST: &str = "other.test";

pub(crate) async fn run(
    storage: &BenchStorage,
    backend: &str,
    occurrences: usize,
    samples: usize,
) -> anyhow::Result<()> {
    let mut settings = storage.settings.clone();
    settings.communities.push(CommunitySettings {
        host: OTHER_HOST.into(),
        name: "Other".into(),
        owners: vec![],
        open: true,
        policies: Default::default(),
    });
    let relay = crate::start(&settings, true).await?;
    let owner = Keys::generate();
    let mut ws = authed(&relay, &owner).await?;
    let open = open_channel(&mut ws, &owner).await?;
    let secret = uuid::Uuid::new_v4().to_string();
    let create = owner.sign(
        9007,
        vec![
            tag(&["h", &secret]),
            tag(&["name", "secret"]),
            tag(&["private"]),
        ],
        "",
        buzz_core::testkit::now(),
    );
    let (ok, msg) = ws.publish(&create).await;
    anyhow::ensure!(ok, "private channel refused: {msg}");
    let now = buzz_core::testkit::now();
    let messages: Vec<Event> = (0..occurrences)
        .map(|i| {
            owner.sign(
                9,
                vec![tag(&["h", &secret])],
                &format!("{PRIVATE_WORD} note {i}"),
                now,
            )
        })
        .chain(
            (0..50)
                .map(|i| owner.sign(9, vec![tag(&["h", &open])], &format!("open note {i}"), now)),
        )
        .collect();
    for chunk in messages.chunks(200) {
        let oks = ws.burst(chunk).await;
        anyhow::ensure!(
            oks.values().all(|(ok, _)| *ok) && oks.len() == chunk.len(),
            "a message was refused"
        );
    }
    ws.close().await;
    relay.services.store.analyze().await?;

    let stranger = Keys::generate();
    let mut member_less = authed(&relay, &stranger).await?;
    let host = format!("{OTHER_HOST}:{}", relay.addr.port());
    let mut anonymous = WsClient::connect(relay.addr, &host).await?;
    println!(
        "search-bench --leak: backend={backend} {occurrences} private occurrences of one word, {samples} samples each"
    );
    for (label, ws, extra) in [
        ("non-member, same community", &mut member_less, json!({})),
        (
            "anonymous, other community",
            &mut anonymous,
            json!({"kinds": [1]}),
        ),
    ] {
        let (private, absent) = timed(ws, &extra, samples).await?;
        let (p, a) = (percentile(&private, 50), percentile(&absent, 50));
        println!(
            "  {label:<28} private word p50 {p:>9.2?}  absent word p50 {a:>9.2?}  ratio {:.2}",
            p.as_secs_f64() / a.as_secs_f64().max(1e-9)
        );
    }
    relay.stop().await?;
    Ok(())
}

/// `samples` searches for each word, alternating; each answer must be empty.
async fn timed(
    ws: &mut WsClient,
    extra: &Value,
    samples: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let mut times = [Vec::new(), Vec::new()];
    for i in 0..samples * 2 {
        let word = if i % 2 == 0 {
            PRIVATE_WORD
        } else {
            ABSENT_WORD
        };
        let mut filter = json!({"search": word, "limit": 50});
        if let (Some(f), Some(more)) = (filter.as_object_mut(), extra.as_object()) {
            f.extend(more.clone());
        }
        let began = Instant::now();
        let events = ws
            .req("s", vec![filter])
            .await
            .map_err(|e| anyhow::anyhow!("search refused: {e}"))?;
        times[i % 2].push(began.elapsed());
        anyhow::ensure!(events.is_empty(), "a private message was found");
    }
    let [mut private, mut absent] = times;
    private.sort();
    absent.sort();
    Ok((private, absent))
}
