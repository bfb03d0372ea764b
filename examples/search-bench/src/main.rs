//! `search-bench`: NIP-50 search latency over many channel messages, index size per
//! message, backfill rate, and the ingest cost of keeping the index.
//!
//! 1. Seeds `--messages` signed kind-9 messages into one open channel with core's bulk
//!    insert (`store::insert_independent`, the rows ingest stores) on a relay *without*
//!    the search plugin, so nothing is indexed yet.
//! 2. Restarts with the plugin: its backfill indexes everything (timed).
//! 3. Searches over WebSocket as an authenticated member (`REQ` → `EOSE`, limit 50):
//!    a rare word (in 20 messages), a common word (in every second message), both.
//! 4. Ingest over WebSocket with search off vs on (fresh storage each, alternating runs,
//!    medians compared): authenticated publishers posting kind-9 messages into one channel.
//!
//! `--attack` instead measures issue 39's memory attack (`attack.rs`): large messages,
//! many-filter search REQs, the relay's resident memory while each is answered.
//! `--leak` measures issue 45's timing question (`leak.rs`): a word frequent in a scope
//! the reader cannot read against an absent word, p50 ratio.

mod attack;
mod leak;

use anyhow::Context;
use buzz_core::config::PluginSection;
use buzz_core::plugin::{PluginCatalog, PluginEntry};
use buzz_core::relay::{RelayBuilder, RunningRelay};
use buzz_core::store::insert_independent;
use buzz_core::stored::StoredEvent;
use buzz_core::testkit::{percentile, BenchStorage};
use buzz_core::testkit::{tag, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use buzz_search::SearchPlugin;
use clap::Parser;
use serde_json::json;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "search-bench",
    about = "NIP-50 search latency, index size, ingest cost"
)]
struct Args {
    /// Channel messages seeded before searching.
    #[arg(long, default_value_t = 1_000_000)]
    messages: usize,
    /// Storage: sqlite://PATH, or a PostgreSQL admin URL (a scratch database is made).
    /// Default: SQLite in a temporary directory.
    #[arg(long)]
    database_url: Option<String>,
    /// Searches timed per query.
    #[arg(long, default_value_t = 200)]
    samples: usize,
    /// Events per ingest run (0 skips the ingest comparison).
    #[arg(long, default_value_t = 20_000)]
    ingest_events: usize,
    /// Ingest runs with search off and as many with it on, alternating (compared by
    /// their medians).
    #[arg(long, default_value_t = 7)]
    ingest_rounds: usize,
    /// Concurrent publisher connections in the ingest runs.
    #[arg(long, default_value_t = 4)]
    publishers: usize,
    /// Run the memory attack of issue 39 instead (`attack.rs`).
    #[arg(long)]
    attack: bool,
    /// Messages of 250 KB the attack posts.
    #[arg(long, default_value_t = 300)]
    attack_messages: usize,
    /// Run the timing comparison of issue 45 instead (`leak.rs`).
    #[arg(long)]
    leak: bool,
    /// Private occurrences of the word the leak comparison searches for.
    #[arg(long, default_value_t = 5_000)]
    leak_occurrences: usize,
}

const RARE: &str = "zanzibar";
const RARE_COUNT: usize = 20;
const COMMON: &str = "status";
const VOCABULARY: usize = 20_000;
const WORDS_PER_MESSAGE: usize = 12;

/// A deterministic pseudo-random sequence (no dependency, same corpus every run).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
}

fn word(i: u64) -> String {
    // Letters only, 4-9 of them: "w" + base-26 of the index.
    let mut s = String::from("w");
    let mut n = i + 26 * 26;
    while n > 0 {
        s.push(char::from(b'a' + (n % 26) as u8));
        n /= 26;
    }
    s
}

/// Message `i`'s text: skewed vocabulary (squared uniform: a few words are frequent),
/// the common word in every second one, the rare word in `RARE_COUNT` of those.
fn text(i: usize, total: usize, rng: &mut Lcg) -> String {
    let mut words: Vec<String> = (0..WORDS_PER_MESSAGE)
        .map(|_| {
            let u = rng.next() % 1_000_000;
            word(u * u / 1_000_000 * VOCABULARY as u64 / 1_000_000)
        })
        .collect();
    if i.is_multiple_of(2) {
        words.push(COMMON.into());
    }
    if i % (total / RARE_COUNT).max(1) == 8 {
        words.push(RARE.into());
    }
    words.join(" ")
}

fn sign_all(specs: Vec<(usize, String, i64)>, authors: &[Keys], channel: &str) -> Vec<Event> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = specs.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = specs
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|(author, content, at)| {
                            authors[*author].sign(9, vec![tag(&["h", channel])], content, *at)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

async fn start(
    settings: &buzz_core::config::Settings,
    with_search: bool,
) -> anyhow::Result<RunningRelay> {
    let catalog = if with_search {
        PluginCatalog::new().with(PluginEntry::of::<SearchPlugin>())
    } else {
        PluginCatalog::new()
    };
    RelayBuilder::new(settings.clone())
        .catalog(catalog)
        .without_signal_handlers()
        .start()
        .await
        .context("starting the relay")
}

async fn authed(relay: &RunningRelay, keys: &Keys) -> anyhow::Result<WsClient> {
    let host = format!("localhost:{}", relay.addr.port());
    let mut ws = WsClient::connect(relay.addr, &host).await?;
    let (ok, msg) = ws.auth(keys).await;
    anyhow::ensure!(ok, "AUTH refused: {msg}");
    Ok(ws)
}

async fn open_channel(ws: &mut WsClient, keys: &Keys) -> anyhow::Result<String> {
    let channel = uuid::Uuid::new_v4().to_string();
    let create = keys.sign(
        9007,
        vec![tag(&["h", &channel]), tag(&["name", "bench"])],
        "",
        buzz_core::testkit::now(),
    );
    let (ok, msg) = ws.publish(&create).await;
    anyhow::ensure!(ok, "channel refused: {msg}");
    Ok(channel)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let storage = BenchStorage::new(args.database_url.as_deref()).await?;
    let backend = storage.backend;
    let settings = storage.settings.clone();
    if args.attack {
        return attack::run(&storage, backend, args.attack_messages).await;
    }
    if args.leak {
        return leak::run(&storage, backend, args.leak_occurrences, args.samples).await;
    }

    // 1. Seed without the plugin.
    let relay = start(&settings, false).await?;
    let owner = Keys::generate();
    let mut ws = authed(&relay, &owner).await?;
    let channel = open_channel(&mut ws, &owner).await?;
    ws.close().await;
    let store = relay.services.store.clone();
    let community = store.ensure_community("localhost", "Local").await?;
    let authors: Vec<Keys> = (0..20).map(|_| Keys::generate()).collect();
    let seeding = Instant::now();
    let base = buzz_core::testkit::now() - args.messages as i64 - 10;
    let mut rng = Lcg(42);
    let per_job = if backend == "sqlite" { 50 } else { 1_000 };
    for start_at in (0..args.messages).step_by(50_000) {
        let end = (start_at + 50_000).min(args.messages);
        let specs: Vec<(usize, String, i64)> = (start_at..end)
            .map(|i| {
                (
                    i % authors.len(),
                    text(i, args.messages, &mut rng),
                    base + i as i64,
                )
            })
            .collect();
        let events = sign_all(specs, &authors, &channel);
        let mut jobs = tokio::task::JoinSet::new();
        for part in events.chunks(per_job) {
            let rows: Vec<StoredEvent> = part
                .iter()
                .map(|e| StoredEvent {
                    event: e.clone(),
                    community_id: community,
                    channel: Some(channel.clone()),
                    received_at: e.created_at * 1_000_000,
                })
                .collect();
            let store = store.clone();
            jobs.spawn(async move {
                store
                    .write(move |conn| insert_independent(conn, &rows).map(|_| ()))
                    .await
            });
            while jobs.len() >= 64 {
                if let Some(done) = jobs.join_next().await {
                    done??;
                }
            }
        }
        while let Some(done) = jobs.join_next().await {
            done??;
        }
    }
    let seeded = seeding.elapsed();
    eprintln!("seeded {} messages in {:.1?}", args.messages, seeded);
    relay.stop().await?;

    // 2. Enable search: the backfill indexes what is there.
    let relay = start(&settings, true).await?;
    let store = relay.services.store.clone();
    let backfilling = Instant::now();
    loop {
        let progress = store
            .read(|mut conn| buzz_search::backfill_progress(&mut conn))
            .await?;
        if let Some((through, target)) = progress {
            if target > 0 && through >= target {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let backfill = backfilling.elapsed();
    store.analyze().await?;
    let (documents, bytes) = store
        .read(|mut conn| buzz_search::index_size(&mut conn))
        .await?;

    // 3. Search as the channel's owner.
    let mut ws = authed(&relay, &owner).await?;
    println!(
        "search-bench: backend={backend} messages={} seeded={:.1?} backfill={:.1?} ({:.0} msg/s)",
        args.messages,
        seeded,
        backfill,
        args.messages as f64 / backfill.as_secs_f64()
    );
    println!(
        "  index: {documents} documents, {bytes} bytes, {:.1} bytes/message",
        bytes as f64 / args.messages.max(1) as f64
    );
    for (label, query) in [
        ("rare word", RARE.to_owned()),
        ("common word", COMMON.to_owned()),
        ("rare + common", format!("{RARE} {COMMON}")),
        ("prefix", "zanzi*".to_owned()),
    ] {
        let mut times = Vec::with_capacity(args.samples);
        let mut found = 0;
        for _ in 0..args.samples {
            // One subscription id, replaced by each REQ: no CLOSE frame, which would sit
            // in the client's Nagle buffer beside the next REQ.
            let sub = "s";
            let began = Instant::now();
            let events = ws
                .req(sub, vec![json!({"search": query, "limit": 50})])
                .await
                .map_err(|e| anyhow::anyhow!("search refused: {e}"))?;
            times.push(began.elapsed());
            found = events.len();
        }
        times.sort();
        println!(
            "  {label:<14} {query:<16} found {found:>3}  p50 {:>8.2?}  p99 {:>8.2?}",
            percentile(&times, 50),
            percentile(&times, 99)
        );
    }
    ws.close().await;
    relay.stop().await?;
    drop(storage);

    // 4. Ingest with search off vs on, alternating, fresh storage each run. One run on
    // this kind of machine moves by ±20 % with whatever else it is doing, so the
    // comparison is of medians over the rounds; the best run of each is printed too.
    if args.ingest_events > 0 {
        let mut rates: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        let mut cpus: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for round in 0..args.ingest_rounds * 2 {
            let on = round % 2 == 1;
            let (rate, cpu) = ingest(&args, on).await?;
            eprintln!(
                "ingest round {round}: search {} {rate:.0} events/s, {:.1} µs CPU/event",
                if on { "on" } else { "off" },
                cpu * 1e6
            );
            rates[usize::from(on)].push(rate);
            cpus[usize::from(on)].push(cpu);
        }
        let [off, on] = rates.map(|mut r| {
            r.sort_by(f64::total_cmp);
            r
        });
        let [cpu_off, cpu_on] = cpus.map(|mut c| {
            c.sort_by(f64::total_cmp);
            c
        });
        println!(
            "  ingest ({} rounds each): search off median {:.0} events/s (best {:.0}), on median {:.0} (best {:.0}): cost {:+.1}% by medians, {:+.1}% by bests",
            args.ingest_rounds,
            median(&off),
            off.last().copied().unwrap_or_default(),
            median(&on),
            on.last().copied().unwrap_or_default(),
            (median(&off) / median(&on) - 1.0) * 100.0,
            (off.last().copied().unwrap_or_default() / on.last().copied().unwrap_or(1.0) - 1.0) * 100.0,
        );
        // CPU is what a busy relay runs out of.
        println!(
            "  ingest CPU (this process: relay and client): search off median {:.1} µs/event, on {:.1} µs/event, cost {:+.1}%",
            median(&cpu_off) * 1e6,
            median(&cpu_on) * 1e6,
            (median(&cpu_on) / median(&cpu_off) - 1.0) * 100.0
        );
    }
    Ok(())
}

/// The middle of sorted `values` (the mean of the two middle ones for an even count).
fn median(values: &[f64]) -> f64 {
    match values.len() {
        0 => 0.0,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// Events/s ingesting kind-9 messages over WebSocket, search on or off, fresh storage,
/// and this process's CPU seconds per event meanwhile.
async fn ingest(args: &Args, search: bool) -> anyhow::Result<(f64, f64)> {
    let storage = BenchStorage::new(args.database_url.as_deref()).await?;
    let mut settings = storage.settings.clone();
    if !search {
        settings.plugins.insert(
            buzz_search::NAME.into(),
            PluginSection {
                enabled: Some(false),
                options: Default::default(),
            },
        );
    }
    let relay = start(&settings, true).await?;
    let owner = Keys::generate();
    let mut ws = authed(&relay, &owner).await?;
    let channel = open_channel(&mut ws, &owner).await?;
    let per = args.ingest_events / args.publishers.max(1);
    let mut rng = Lcg(7);
    let mut conns = Vec::new();
    for p in 0..args.publishers {
        let keys = Keys::generate();
        let ws = authed(&relay, &keys).await?;
        let now = buzz_core::testkit::now();
        let events: Vec<Event> = (0..per)
            .map(|i| {
                let content = format!("{} {p} {i}", text(i, per, &mut rng));
                keys.sign(9, vec![tag(&["h", &channel])], &content, now)
            })
            .collect();
        conns.push((ws, events));
    }
    let began = Instant::now();
    let cpu_before = buzz_core::testkit::cpu_secs("/proc/self/stat");
    let mut tasks = tokio::task::JoinSet::new();
    for (mut ws, events) in conns {
        tasks.spawn(async move {
            let mut accepted = 0usize;
            for chunk in events.chunks(100) {
                let oks = ws.burst(chunk).await;
                for (ok, message) in oks.values() {
                    if *ok {
                        accepted += 1;
                    } else {
                        eprintln!("refused: {message}");
                    }
                }
                if oks.len() < chunk.len() {
                    eprintln!("{} OKs missing", chunk.len() - oks.len());
                }
            }
            accepted
        });
    }
    let mut accepted = 0;
    while let Some(done) = tasks.join_next().await {
        accepted += done?;
    }
    let elapsed = began.elapsed();
    let cpu = buzz_core::testkit::cpu_secs("/proc/self/stat") - cpu_before;
    anyhow::ensure!(
        accepted == per * args.publishers,
        "only {accepted} accepted"
    );
    relay.stop().await?;
    Ok((
        accepted as f64 / elapsed.as_secs_f64(),
        cpu / accepted.max(1) as f64,
    ))
}
