//! `sync-bench`: an offline client catching up with a large channel. The relay holds a
//! channel of `--messages` messages (100,000); the client holds all but `--missing-pct`
//! percent (1%) — once lacking the newest ones (a client that was away), once lacking as
//! many scattered evenly through the channel (the hard case for range-based
//! reconciliation: nearly every range differs somewhere). Two ways to catch up, each
//! over a fresh authenticated WebSocket, each run `--runs` times:
//!
//! - **NIP-77**: `NEG-OPEN` with the client's fingerprint, `NEG-MSG` rounds until the
//!   client knows which ids it lacks, then one `REQ` by id for those (500 ids per
//!   subscription, the relay's `max_limit`);
//! - **full REQ**: what a client without sync does — page the whole channel with `REQ`
//!   (`limit` 500, `until` the oldest seen minus one).
//!
//! Printed: bytes on the wire each way (WebSocket text payloads), wall time, and the
//! relay's CPU: the process's CPU time during the reconciliation (from `NEG-OPEN` to the
//! last relay `NEG-MSG`) minus the client thread's own. The client runs on its own OS
//! thread and runtime, the relay on the main runtime. Messages are seeded through the
//! store's bulk insert (ingest's own insert; no thread metadata, which neither read
//! uses), signed on every core.
//!
//! ```sh
//! cargo run --release -p buzz-sync-bench -- --messages 100000 --missing-pct 1
//! cargo run --release -p buzz-sync-bench -- --database-url postgres://postgres@127.0.0.1:5432/postgres
//! ```

use anyhow::Context;
use buzz_core::plugin::{PluginCatalog, PluginEntry};
use buzz_core::relay::{RelayBuilder, RunningRelay};
use buzz_core::store::{insert_independent, Backend};
use buzz_core::stored::StoredEvent;
use buzz_core::testkit::{cpu_secs, BenchStorage};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use negentropy::{Id, Negentropy, NegentropyStorageVector};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(name = "sync-bench", about = "NIP-77 catch-up vs a full REQ download")]
struct Args {
    /// Messages in the channel.
    #[arg(long, default_value_t = 100_000)]
    messages: usize,
    /// Percent of them the client lacks (spread evenly).
    #[arg(long, default_value_t = 1.0)]
    missing_pct: f64,
    /// Timed runs of each way.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Storage: sqlite://PATH, or a PostgreSQL admin URL (a scratch database is made).
    #[arg(long)]
    database_url: Option<String>,
}

/// Kernel clock ticks per second of `/proc` CPU times (`CLK_TCK`, 100 on Linux).
/// Ids per REQ (the relay's default `max_limit`) and messages per page.
const PAGE: usize = 500;
const HOST: &str = "localhost";

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let storage = BenchStorage::new(args.database_url.as_deref()).await?;
    let catalog = PluginCatalog::new().with(PluginEntry::of::<buzz_sync::SyncPlugin>());
    let relay = RelayBuilder::new(storage.settings.clone())
        .catalog(catalog)
        .without_signal_handlers()
        .start()
        .await
        .context("relay starts")?;
    let keys = Keys::generate();
    let started = Instant::now();
    let channel = create_channel(relay.addr, &keys).await?;
    let events = seed(&relay, &keys, &channel, args.messages).await?;
    eprintln!(
        "seeded {} messages on {} in {:.1?}",
        events.len(),
        storage.backend,
        started.elapsed()
    );
    let lacking = ((events.len() as f64 * args.missing_pct / 100.0).round() as usize).max(1);
    // An offline client lacks what arrived while it was away: the newest messages.
    let newest = Holding::split(&events, |i| i >= events.len() - lacking);
    // The hard case for range-based reconciliation: the same number, spread evenly, so
    // nearly every range differs somewhere.
    let every = (events.len() / lacking).max(1);
    let scattered = Holding::split(&events, |i| i % every == 0);
    let (addr, runs, total) = (relay.addr, args.runs, events.len());
    // The client on a thread of its own, so its CPU can be told from the relay's.
    let client = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(measure(
            addr,
            keys,
            channel,
            [newest, scattered],
            total,
            runs,
        ))
    });
    let figures = tokio::task::spawn_blocking(move || client.join())
        .await?
        .map_err(|_| anyhow::anyhow!("the client thread panicked"))??;
    print(&args, storage.backend, &figures);
    relay.stop().await?;
    Ok(())
}

/// What one way of catching up cost.
#[derive(Default, Clone)]
struct Cost {
    sent: usize,
    received: usize,
    time: Duration,
    relay_cpu: Duration,
    rounds: usize,
    /// NIP-77 only: time of the reconciliation alone (without the fetch).
    reconcile_time: Duration,
    /// NIP-77 only: events fetched by id afterwards.
    fetched: usize,
}

/// What the client holds, and what it lacks.
struct Holding {
    held: Vec<(u64, String)>,
    missing: HashSet<String>,
}

impl Holding {
    fn split(events: &[Event], lacks: impl Fn(usize) -> bool) -> Holding {
        let mut holding = Holding {
            held: Vec::new(),
            missing: HashSet::new(),
        };
        for (i, e) in events.iter().enumerate() {
            if lacks(i) {
                holding.missing.insert(e.id.clone());
            } else {
                holding.held.push((e.created_at as u64, e.id.clone()));
            }
        }
        holding
    }
}

struct Figures {
    /// NIP-77 runs: the client lacking the newest messages, then scattered ones.
    sync: [Vec<Cost>; 2],
    full: Vec<Cost>,
}

async fn measure(
    addr: SocketAddr,
    keys: Keys,
    channel: String,
    holdings: [Holding; 2],
    total: usize,
    runs: usize,
) -> anyhow::Result<Figures> {
    let mut figures = Figures {
        sync: [Vec::new(), Vec::new()],
        full: Vec::new(),
    };
    for run in 0..runs {
        for (k, holding) in holdings.iter().enumerate() {
            let mut ws = Counted::connect(addr, &keys).await?;
            let cost = catch_up_by_sync(
                &mut ws,
                &channel,
                &holding.held,
                &holding.missing,
                run * 2 + k,
            )
            .await?;
            figures.sync[k].push(cost);
        }
        let mut ws = Counted::connect(addr, &keys).await?;
        let cost = full_download(&mut ws, &channel, total, run).await?;
        figures.full.push(cost);
    }
    Ok(figures)
}

async fn catch_up_by_sync(
    ws: &mut Counted,
    channel: &str,
    held: &[(u64, String)],
    missing: &HashSet<String>,
    run: usize,
) -> anyhow::Result<Cost> {
    // The client's own fingerprint is built before the clock starts: it keeps it.
    let mut storage = NegentropyStorageVector::with_capacity(held.len());
    for (at, id) in held {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(id, &mut bytes)?;
        storage.insert(*at, Id::from_byte_array(bytes))?;
    }
    storage.seal()?;
    let mut engine = Negentropy::owned(storage, 0)?;
    let first = engine.initiate()?;
    ws.reset();
    let cpu = CpuClock::start();
    let started = Instant::now();
    let sub = format!("sync{run}");
    ws.send(&json!(["NEG-OPEN", sub, {"kinds": [9], "#h": [channel]}, hex::encode(first)]))
        .await?;
    let mut need: Vec<String> = Vec::new();
    let mut rounds = 0;
    loop {
        let answer = ws.recv_for(&sub).await?;
        if answer[0] != "NEG-MSG" {
            anyhow::bail!("relay answered {answer}");
        }
        rounds += 1;
        let bytes = hex::decode(answer[2].as_str().unwrap_or_default())?;
        let (mut have, mut needed) = (Vec::new(), Vec::new());
        let next = engine.reconcile_with_ids(&bytes, &mut have, &mut needed)?;
        need.extend(needed.iter().map(|id| hex::encode(id.as_bytes())));
        match next {
            Some(next) => ws.send(&json!(["NEG-MSG", sub, hex::encode(next)])).await?,
            None => break,
        }
    }
    let reconcile_time = started.elapsed();
    let relay_cpu = cpu.relay();
    ws.send(&json!(["NEG-CLOSE", sub])).await?;
    let learned: HashSet<String> = need.iter().cloned().collect();
    anyhow::ensure!(
        learned == *missing,
        "NIP-77 learned {} ids, not the {} missing",
        learned.len(),
        missing.len()
    );
    // Fetch what it lacks, every REQ in flight at once.
    let subs: Vec<String> = need
        .chunks(PAGE)
        .enumerate()
        .map(|(i, _)| format!("get{run}-{i}"))
        .collect();
    for (ids, sub) in need.chunks(PAGE).zip(&subs) {
        ws.send(&json!(["REQ", sub, {"ids": ids}])).await?;
    }
    let mut fetched = 0;
    let mut open: HashSet<&String> = subs.iter().collect();
    while !open.is_empty() {
        let message = ws.recv().await?;
        match message[0].as_str() {
            Some("EVENT") => fetched += 1,
            Some("EOSE") => {
                let sub = message[1].as_str().unwrap_or_default().to_owned();
                open.retain(|s| **s != sub);
                ws.send(&json!(["CLOSE", sub])).await?;
            }
            Some("CLOSED") => anyhow::bail!("REQ refused: {message}"),
            _ => {}
        }
    }
    anyhow::ensure!(
        fetched == missing.len(),
        "fetched {fetched} of {}",
        missing.len()
    );
    Ok(Cost {
        sent: ws.sent,
        received: ws.received,
        time: started.elapsed(),
        relay_cpu,
        rounds,
        reconcile_time,
        fetched,
    })
}

async fn full_download(
    ws: &mut Counted,
    channel: &str,
    total: usize,
    run: usize,
) -> anyhow::Result<Cost> {
    ws.reset();
    let cpu = CpuClock::start();
    let started = Instant::now();
    let mut seen = 0;
    let mut until: Option<i64> = None;
    let mut pages = 0;
    loop {
        let sub = format!("all{run}-{pages}");
        let mut filter = json!({"kinds": [9], "#h": [channel], "limit": PAGE});
        if let Some(until) = until {
            filter["until"] = json!(until);
        }
        ws.send(&json!(["REQ", sub, filter])).await?;
        pages += 1;
        let mut page = 0;
        loop {
            let message = ws.recv().await?;
            match message[0].as_str() {
                Some("EVENT") if message[1] == sub.as_str() => {
                    page += 1;
                    let at = message[2]["created_at"].as_i64().unwrap_or(0);
                    until = Some(until.map_or(at - 1, |u| u.min(at - 1)));
                }
                Some("EOSE") if message[1] == sub.as_str() => break,
                Some("CLOSED") => anyhow::bail!("REQ refused: {message}"),
                _ => {}
            }
        }
        ws.send(&json!(["CLOSE", sub])).await?;
        seen += page;
        if page < PAGE {
            break;
        }
    }
    anyhow::ensure!(seen == total, "the full download saw {seen} of {total}");
    Ok(Cost {
        sent: ws.sent,
        received: ws.received,
        time: started.elapsed(),
        relay_cpu: cpu.relay(),
        rounds: pages,
        reconcile_time: Duration::ZERO,
        fetched: 0,
    })
}

fn print(args: &Args, backend: &str, figures: &Figures) {
    let median = |costs: &[Cost], f: fn(&Cost) -> f64| {
        let mut v: Vec<f64> = costs.iter().map(f).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let bytes = |c: &Cost| (c.sent + c.received) as f64;
    let ms = |c: &Cost| c.time.as_secs_f64() * 1e3;
    let cpu = |c: &Cost| c.relay_cpu.as_secs_f64() * 1e3;
    let rounds = |c: &Cost| c.rounds as f64;
    let f = &figures.full;
    println!(
        "sync-bench: {} messages on {backend}, client missing {}% ({} ids), median of {} runs",
        args.messages,
        args.missing_pct,
        figures.sync[0].first().map_or(0, |c| c.fetched),
        args.runs
    );
    for (label, s) in [
        ("NIP-77, newest missing", &figures.sync[0]),
        ("NIP-77, scattered missing", &figures.sync[1]),
    ] {
        println!(
            "  {label:<26} {:>11.0} bytes ({:.0} up, {:.0} down), {:>8.1} ms, {} NEG-MSG rounds \
             (reconciliation {:.1} ms, relay CPU {:.0} ms), then REQ by id; {:.1}x fewer bytes, \
             {:.1}x less time than the full download",
            median(s, bytes),
            median(s, |c| c.sent as f64),
            median(s, |c| c.received as f64),
            median(s, ms),
            median(s, rounds),
            median(s, |c| c.reconcile_time.as_secs_f64() * 1e3),
            median(s, cpu),
            median(f, bytes) / median(s, bytes).max(1.0),
            median(f, ms) / median(s, ms).max(1e-9),
        );
    }
    println!(
        "  {:<26} {:>11.0} bytes ({:.0} up, {:.0} down), {:>8.1} ms, {} REQ pages; relay CPU {:.0} ms",
        "full REQ download",
        median(f, bytes),
        median(f, |c| c.sent as f64),
        median(f, |c| c.received as f64),
        median(f, ms),
        median(f, rounds),
        median(f, cpu),
    );
}

/// Process CPU minus this thread's, from `/proc` (clock-tick resolution).
struct CpuClock {
    process: f64,
    thread: f64,
}

impl CpuClock {
    fn start() -> CpuClock {
        CpuClock {
            process: cpu_secs("/proc/self/stat"),
            thread: cpu_secs("/proc/thread-self/stat"),
        }
    }

    /// CPU the relay spent since [`Self::start`]: everything but this (client) thread.
    fn relay(&self) -> Duration {
        let process = cpu_secs("/proc/self/stat") - self.process;
        let thread = cpu_secs("/proc/thread-self/stat") - self.thread;
        Duration::from_secs_f64((process - thread).max(0.0))
    }
}

/// A WebSocket client that counts the text bytes it sends and receives.
struct Counted {
    stream: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    sent: usize,
    received: usize,
}

impl Counted {
    /// Connect and authenticate (NIP-42) as `keys`.
    async fn connect(addr: SocketAddr, keys: &Keys) -> anyhow::Result<Counted> {
        let mut request = format!("ws://{addr}/").into_client_request()?;
        request.headers_mut().insert("host", HOST.parse()?);
        let (stream, _) = tokio_tungstenite::connect_async(request).await?;
        let mut ws = Counted {
            stream,
            sent: 0,
            received: 0,
        };
        let challenge = loop {
            let message = ws.recv().await?;
            if message[0] == "AUTH" {
                break message[1].as_str().unwrap_or_default().to_owned();
            }
        };
        let auth = keys.sign(
            22_242,
            vec![
                vec!["relay".into(), format!("ws://{HOST}/")],
                vec!["challenge".into(), challenge],
            ],
            "",
            now(),
        );
        ws.send(&json!(["AUTH", auth])).await?;
        let ok = ws.recv().await?;
        anyhow::ensure!(ok[0] == "OK" && ok[2] == true, "AUTH refused: {ok}");
        Ok(ws)
    }

    fn reset(&mut self) {
        self.sent = 0;
        self.received = 0;
    }

    async fn send(&mut self, value: &Value) -> anyhow::Result<()> {
        let text = value.to_string();
        self.sent += text.len();
        self.stream.send(Message::text(text)).await?;
        Ok(())
    }

    async fn recv(&mut self) -> anyhow::Result<Value> {
        loop {
            let next = tokio::time::timeout(Duration::from_secs(60), self.stream.next())
                .await
                .context("no message from the relay within 60 s")?
                .context("the relay closed the connection")??;
            if let Message::Text(text) = next {
                self.received += text.len();
                return Ok(serde_json::from_str(&text)?);
            }
        }
    }

    /// The next message for NIP-77 subscription `sub`.
    async fn recv_for(&mut self, sub: &str) -> anyhow::Result<Value> {
        loop {
            let message = self.recv().await?;
            if message[1] == sub {
                return Ok(message);
            }
        }
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

async fn create_channel(addr: SocketAddr, keys: &Keys) -> anyhow::Result<String> {
    let mut ws = Counted::connect(addr, keys).await?;
    let channel = format!("00000000-0000-4000-8000-{:012x}", now());
    let event = keys.sign(
        9007,
        vec![
            vec!["h".into(), channel.clone()],
            vec!["name".into(), "bench".into()],
        ],
        "",
        now(),
    );
    ws.send(&json!(["EVENT", event])).await?;
    let ok = ws.recv().await?;
    anyhow::ensure!(ok[0] == "OK" && ok[2] == true, "channel refused: {ok}");
    Ok(channel)
}

/// `n` messages in `channel`, one second apart ending now, signed on every core and
/// written through the store's bulk insert.
async fn seed(
    relay: &RunningRelay,
    keys: &Keys,
    channel: &str,
    n: usize,
) -> anyhow::Result<Vec<Event>> {
    let start = now() - n as i64 - 1;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let per = n.div_ceil(threads).max(1);
    let mut handles = Vec::new();
    for part in 0..threads {
        let (keys, channel) = (keys.clone(), channel.to_owned());
        let range = (part * per)..((part + 1) * per).min(n);
        handles.push(std::thread::spawn(move || {
            range
                .map(|i| {
                    keys.sign(
                        9,
                        vec![vec!["h".into(), channel.clone()]],
                        &format!(
                            "message {i}: a line of ordinary team chat, about as long as most of them are."
                        ),
                        start + i as i64,
                    )
                })
                .collect::<Vec<Event>>()
        }));
    }
    let mut events = Vec::with_capacity(n);
    for handle in handles {
        events.extend(
            handle
                .join()
                .map_err(|_| anyhow::anyhow!("a signing thread panicked"))?,
        );
    }
    let store = relay.services.store.clone();
    let community_id = relay.services.communities[0].id;
    let per_job = match store.backend() {
        Backend::Sqlite => 50,
        Backend::Postgres => 1_000,
    };
    let jobs = events.chunks(per_job).map(|chunk| {
        let stored: Vec<StoredEvent> = chunk
            .iter()
            .map(|event| StoredEvent {
                event: event.clone(),
                community_id,
                channel: Some(channel.to_owned()),
                received_at: event.created_at * 1_000_000,
            })
            .collect();
        let store = store.clone();
        async move {
            store
                .write(move |conn| insert_independent(conn, &stored).map(|_| ()))
                .await
        }
    });
    let results: Vec<_> = futures_util::stream::iter(jobs)
        .buffer_unordered(32)
        .collect()
        .await;
    for result in results {
        result.map_err(|reason| anyhow::anyhow!("seeding: {reason}"))?;
    }
    store
        .analyze()
        .await
        .map_err(|r| anyhow::anyhow!("analyze: {r}"))?;
    Ok(events)
}
