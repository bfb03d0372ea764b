//! `search-bench --attack`: issue 39's memory attack, measured. An author posts
//! `--attack-messages` messages of about 250 KB holding one word in its own open channel,
//! then sends search REQs over them — 16 filters differing only in `since` (what the
//! attack sent), the most distinct filters allowed, 16 identical ones — and the relay
//! process's resident memory is sampled every 2 ms while each runs. The client counts
//! the answer's events and drops each as it arrives, so what grows is the relay's.

use crate::{authed, open_channel, start};
use buzz_core::testkit::{tag, BenchStorage};
use buzz_nostr::keys::Keys;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const WORD: &str = "quetzalcoatl";
/// The attack's message size (under `max_content_bytes`).
const MESSAGE_BYTES: usize = 250_000;

/// Resident memory of this process, bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Samples [`rss`] until dropped; `peak` is the highest seen.
struct Sampler {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    fn start() -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let peak = Arc::new(AtomicU64::new(rss()));
        let (s, p) = (stop.clone(), peak.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                p.fetch_max(rss(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        Sampler {
            stop,
            peak,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.peak.load(Ordering::Relaxed)
    }
}

pub(crate) async fn run(
    storage: &BenchStorage,
    backend: &str,
    messages: usize,
) -> anyhow::Result<()> {
    let relay = start(&storage.settings, true).await?;
    let author = Keys::generate();
    let mut ws = authed(&relay, &author).await?;
    let channel = open_channel(&mut ws, &author).await?;
    let filler = "lorem ipsum dolor sit amet ".repeat(MESSAGE_BYTES / 27);
    let base = buzz_core::testkit::now() - messages as i64;
    for i in 0..messages {
        let content = format!("{WORD} {i} {filler}");
        let event = author.sign(9, vec![tag(&["h", &channel])], &content, base + i as i64);
        let (ok, msg) = ws.publish(&event).await;
        anyhow::ensure!(ok, "message {i} refused: {msg}");
    }
    println!(
        "search-bench --attack: backend={backend} {messages} messages of {MESSAGE_BYTES} bytes; relay RSS {:.0} MB",
        rss() as f64 / 1e6
    );
    let since = |i: i64| json!({"search": WORD, "#h": [channel], "limit": 500, "since": base + i});
    let cases: Vec<(&str, Vec<Value>)> = vec![
        ("16 filters, since differs", (0..16).map(since).collect()),
        ("4 filters, since differs", (0..4).map(since).collect()),
        ("16 identical filters", vec![since(0); 16]),
    ];
    for (label, filters) in cases {
        let before = rss();
        let sampler = Sampler::start();
        let began = Instant::now();
        let mut msg = vec![json!("REQ"), json!("attack")];
        msg.extend(filters);
        ws.send(&Value::Array(msg)).await?;
        let mut events = 0usize;
        let outcome = loop {
            let Some(v) = ws.recv().await else {
                break "no answer in time".to_owned();
            };
            match v[0].as_str() {
                Some("EVENT") => events += 1,
                Some("EOSE") => break "EOSE".to_owned(),
                Some("CLOSED") => break format!("CLOSED {}", v[2]),
                _ => {}
            }
        };
        let took = began.elapsed();
        let peak = sampler.finish();
        println!(
            "  {label:<28} {outcome:<60} events {events:>4}  {took:>8.2?}  RSS peak +{:.0} MB",
            peak.saturating_sub(before) as f64 / 1e6
        );
        ws.send(&json!(["CLOSE", "attack"])).await?;
    }
    ws.close().await;
    relay.stop().await?;
    Ok(())
}
