//! `ingest-bench`: how close does WebSocket ingest come to bare signature verification?
//!
//! Two figures, one run:
//! 1. **Bare verify**: BIP-340 verifications per second on one thread, over pre-signed
//!    events ([`buzz_nostr::event::verify_signature`], exactly what ingest calls).
//! 2. **Ingest**: a real relay with its default settings (SQLite in a temp dir by
//!    default, `synchronous = FULL`, the default Lua policies) on 127.0.0.1:0, fed
//!    pre-signed kind-1 events by N concurrent WebSocket publishers. Each publisher
//!    pipelines: it keeps up to `--inflight` EVENTs unanswered and sends the next as each
//!    `OK` arrives. The rate is wall-clock from the first send to the last `OK`, and
//!    every `OK` must be `true`.
//!
//! The target is ingest >= 50% of bare verify. Signing is client work and happens before
//! any clock starts.
//!
//! ```text
//! cargo run --release -p buzz-ingest-bench -- --publishers 8 --events 100000
//! ```
//!
//! `--database-url postgres://…` is used as an admin URL: the bench creates a scratch
//! database there and drops it afterwards. A `sqlite://` URL is used as given.
//!
//! External-process mode (`external.rs`): `--relay-bin target/release/buzz-relay` runs
//! the relay as separate processes (`--processes N` on one PostgreSQL database, with
//! `--redis-url`), this process being only the client, and prints relay CPU per
//! accepted event beside the bare-verify cost:
//!
//! ```text
//! cargo build --release -p buzz-relay -p buzz-ingest-bench
//! target/release/ingest-bench --relay-bin target/release/buzz-relay --publishers 8 \
//!     --database-url postgres://postgres@127.0.0.1:5432/postgres \
//!     --redis-url redis://127.0.0.1:6379 --processes 3
//! ```

mod external;

use anyhow::{bail, Context};
use buzz_core::relay::RelayBuilder;
use buzz_core::testkit::{now, BenchStorage};
use buzz_nostr::event::{verify_signature, EventLimits};
use buzz_nostr::keys::Keys;
use clap::Parser;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::Message;

/// The relay binary's allocator (src/main.rs), so the embedded relay runs as it does
/// in production.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(
    name = "ingest-bench",
    about = "Bare BIP-340 verify rate vs. WebSocket ingest rate"
)]
struct Args {
    /// Concurrent publisher connections.
    #[arg(long, default_value_t = 8)]
    publishers: usize,
    /// Events ingested in total (split evenly over the publishers).
    #[arg(long, default_value_t = 100_000)]
    events: usize,
    /// Signatures verified for the bare-verify figure.
    #[arg(long, default_value_t = 20_000)]
    verify_events: usize,
    /// Unanswered EVENTs each publisher keeps in flight (default: the relay's
    /// `limits.max_inflight_events` as set for this run).
    #[arg(long)]
    inflight: Option<usize>,
    /// The relay's `limits.max_inflight_events` for this run: EVENTs one connection may
    /// have in flight (default: the relay's own default). More lets a burst from few
    /// connections fill a larger group commit, at more memory per connection.
    #[arg(long)]
    relay_inflight: Option<usize>,
    /// Relay HTTP workers (0 = one per core, the relay's default).
    #[arg(long, default_value_t = 0)]
    workers: usize,
    /// Storage: sqlite://PATH, or a PostgreSQL admin URL (a scratch database is made).
    /// Default: SQLite in a temporary directory.
    #[arg(long)]
    database_url: Option<String>,
    /// Exit non-zero when the target is missed.
    #[arg(long)]
    require_target: bool,
    /// Events for the policy-cost comparison (0 skips it): authenticated publishers post
    /// kind-9 messages into one open channel, once with the default Lua policies and once
    /// with policies disabled.
    #[arg(long, default_value_t = 20_000)]
    policy_events: usize,
    /// Run the relay as separate `buzz-relay` processes from this binary (external
    /// client mode) instead of in this process.
    #[arg(long)]
    relay_bin: Option<std::path::PathBuf>,
    /// External mode: relay processes on one database (more than one needs PostgreSQL
    /// and --redis-url).
    #[arg(long, default_value_t = 1)]
    processes: usize,
    /// External mode: the Redis the relay processes share.
    #[arg(long)]
    redis_url: Option<String>,
}

/// What one ingest run sends.
#[derive(Clone, Copy, Debug)]
struct Workload {
    /// Kind-9 messages into an open channel from authenticated publishers (else kind-1
    /// notes from anonymous ones).
    channel: bool,
    /// Run the community's Lua policies.
    policies: bool,
    events: usize,
}

/// Name of the client runtime's threads, to tell client CPU from relay CPU.
const CLIENT_THREAD: &str = "bench-client";

/// Give up on a publisher that has received no OK for this long.
const STALL_TIMEOUT: Duration = Duration::from_secs(60);

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.publishers == 0 || args.events < args.publishers || args.inflight == Some(0) {
        bail!("need --publishers >= 1, --events >= --publishers and --inflight >= 1");
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("buzz ingest benchmark ({cores} cores available)");

    let (verify_rate, check_rate) = bare_verify(args.verify_events);
    println!(
        "  bare BIP-340 verify, 1 core:      {:>9.0} verifications/s  ({} signatures)",
        verify_rate, args.verify_events
    );
    println!(
        "  id + signature check, 1 core:     {:>9.0} events/s         (EventLimits::check)",
        check_rate
    );

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name(CLIENT_THREAD)
        .build()
        .context("building the tokio runtime")?;
    if let Some(relay_bin) = &args.relay_bin {
        return external_report(&runtime, &args, relay_bin, verify_rate);
    }
    let workload = Workload {
        channel: false,
        policies: true,
        events: args.events,
    };
    let ingest = runtime.block_on(ingest(&args, workload))?;
    println!(
        "  ingest, {} publishers ({}):  {:>9.0} events/s         ({} events in {:.2} s, all OK true)",
        args.publishers,
        ingest.backend,
        ingest.rate(),
        ingest.events,
        ingest.wall.as_secs_f64()
    );
    println!(
        "    ({} EVENTs in flight per publisher, relay max_inflight_events {})",
        ingest.inflight, ingest.relay_inflight
    );
    if !ingest.cpu.is_empty() {
        let busy: f64 = ingest.cpu.iter().map(|(_, secs)| secs).sum();
        println!(
            "    CPU while ingesting: {:.2} cores busy in this process; per event:",
            busy / ingest.wall.as_secs_f64()
        );
        for (group, secs) in &ingest.cpu {
            let micros = secs * 1e6 / ingest.events as f64;
            println!("      {group:<34} {micros:>6.0} µs");
        }
    }
    let ratio = ingest.rate() / verify_rate;
    println!("  ratio ingest / bare verify:       {ratio:>9.2}");
    let pass = ratio >= 0.5;
    println!(
        "  target ingest >= 50% of bare verify: {}",
        if pass { "PASS" } else { "FAIL" }
    );
    if args.policy_events >= args.publishers {
        policy_cost(&runtime, &args)?;
    }
    if !pass && args.require_target {
        bail!(
            "target missed: ingest is {:.0}% of bare verify",
            ratio * 100.0
        );
    }
    Ok(())
}

/// External-process mode: run and print events/s and relay CPU per accepted event.
fn external_report(
    runtime: &tokio::runtime::Runtime,
    args: &Args,
    relay_bin: &std::path::Path,
    verify_rate: f64,
) -> anyhow::Result<()> {
    if args.processes == 0 {
        bail!("need --processes >= 1");
    }
    let figures = runtime.block_on(external::run(args, relay_bin, args.processes))?;
    let rate = figures.events as f64 / figures.wall.as_secs_f64();
    let backend = match args.database_url.as_deref() {
        Some(url) if url.starts_with("postgres") => "postgres",
        _ => "sqlite",
    };
    println!(
        "  ingest, {} publishers -> {} buzz-relay process(es) ({backend}): {rate:>9.0} events/s  ({} events in {:.2} s, all OK true)",
        args.publishers,
        args.processes,
        figures.events,
        figures.wall.as_secs_f64()
    );
    // Measured as CPU time, like the relay's figure (ticks of 10 ms: use enough
    // signatures for a steady figure).
    let verify_us = external::verify_cpu_micros(args.verify_events.max(20_000));
    println!(
        "  bare verify CPU (this run):       {verify_us:>9.1} µs  (wall-clock rate {verify_rate:.0}/s)"
    );
    let total: f64 = figures.relay_cpu.iter().sum();
    let per_event_us = total * 1e6 / figures.events as f64;
    let split: Vec<String> = figures
        .relay_cpu
        .iter()
        .enumerate()
        .map(|(i, secs)| {
            format!(
                "process {i}: {:.2} cores",
                secs / figures.wall.as_secs_f64()
            )
        })
        .collect();
    println!("    relay CPU: {}", split.join(", "));
    println!(
        "  relay CPU per accepted event:     {per_event_us:>9.1} µs  = {:.2} x bare verify ({verify_us:.1} µs)",
        per_event_us / verify_us
    );
    println!(
        "  target relay CPU <= 2.5x bare verify: {}",
        if per_event_us <= 2.5 * verify_us {
            "PASS"
        } else {
            "FAIL"
        }
    );
    Ok(())
}

/// Channel-message ingest with the default policies vs with policies disabled, best of
/// three alternating rounds each (the machine is shared; the best round is the least
/// disturbed).
fn policy_cost(runtime: &tokio::runtime::Runtime, args: &Args) -> anyhow::Result<()> {
    let run = |policies: bool| -> anyhow::Result<f64> {
        let workload = Workload {
            channel: true,
            policies,
            events: args.policy_events,
        };
        Ok(runtime.block_on(ingest(args, workload))?.rate())
    };
    let (mut with, mut without) = (0f64, 0f64);
    for _ in 0..3 {
        with = with.max(run(true)?);
        without = without.max(run(false)?);
    }
    let slower = (1.0 - with / without) * 100.0;
    println!(
        "  channel messages, {} publishers, policies on:  {with:>7.0} events/s  (best of 3)",
        args.publishers
    );
    println!(
        "  channel messages, {} publishers, policies off: {without:>7.0} events/s  (best of 3)",
        args.publishers
    );
    println!(
        "  policy cost: {slower:.1}% slower; target <= 15%: {}",
        if slower <= 15.0 { "PASS" } else { "FAIL" }
    );
    Ok(())
}

/// Verifications/s of bare BIP-340 and of the full id + signature check, one thread.
fn bare_verify(n: usize) -> (f64, f64) {
    let keys: Vec<Keys> = (0..16).map(|_| Keys::generate()).collect();
    let t = now();
    let events: Vec<_> = (0..n.max(1))
        .map(|i| keys[i % keys.len()].sign(1, vec![], &format!("verify me #{i}"), t))
        .collect();

    let start = Instant::now();
    for event in &events {
        verify_signature(std::hint::black_box(event)).expect("pre-signed event verifies");
    }
    let verify = events.len() as f64 / start.elapsed().as_secs_f64();

    let limits = EventLimits::default();
    let start = Instant::now();
    for event in &events {
        limits
            .check(std::hint::black_box(event), t)
            .expect("pre-signed event passes");
    }
    let check = events.len() as f64 / start.elapsed().as_secs_f64();
    (verify, check)
}

struct IngestFigures {
    backend: &'static str,
    events: usize,
    wall: Duration,
    inflight: usize,
    relay_inflight: usize,
    /// CPU seconds per thread group during ingest (Linux; empty elsewhere).
    cpu: Vec<(&'static str, f64)>,
}

impl IngestFigures {
    fn rate(&self) -> f64 {
        self.events as f64 / self.wall.as_secs_f64()
    }
}

async fn ingest(args: &Args, workload: Workload) -> anyhow::Result<IngestFigures> {
    let storage = BenchStorage::new(args.database_url.as_deref()).await?;
    let backend = storage.backend;
    let mut settings = storage.settings.clone();
    settings.server.workers = args.workers;
    if let Some(relay_inflight) = args.relay_inflight {
        settings.limits.max_inflight_events = relay_inflight;
    }
    settings.policies.enabled = workload.policies;
    let relay_inflight = settings.limits.max_inflight_events;
    let inflight = args.inflight.unwrap_or(relay_inflight);
    let relay = RelayBuilder::new(settings)
        .without_signal_handlers()
        .start()
        .await
        .context("starting the relay")?;

    // Client work, before any clock: keys, signatures, serialized EVENT frames, and for
    // channel workloads AUTH and the channel itself.
    let per_publisher = workload.events / args.publishers;
    let total = per_publisher * args.publishers;
    let keys: Vec<Keys> = (0..args.publishers).map(|_| Keys::generate()).collect();
    let channel = workload.channel.then(|| uuid::Uuid::new_v4().to_string());
    let frames = presign(&keys, per_publisher, channel.as_deref());

    let relay_url = format!("ws://{}/", relay.addr);
    let mut conns = Vec::with_capacity(args.publishers);
    for publisher in &keys {
        let (mut ws, _) = tokio_tungstenite::connect_async(relay_url.as_str())
            .await
            .context("connecting a publisher")?;
        if workload.channel {
            setup::authenticate(&mut ws, publisher, &relay_url).await?;
        }
        conns.push(ws);
    }
    if let (Some(channel), Some(ws)) = (channel.as_deref(), conns.first_mut()) {
        setup::create_channel(ws, &keys[0], channel).await?;
    }

    let cpu_before = cpu::snapshot();
    let start = Instant::now();
    let tasks: Vec<_> = conns
        .into_iter()
        .zip(frames)
        .map(|(ws, frames)| tokio::spawn(publish(ws, frames, inflight)))
        .collect();
    let mut last_ok = start;
    let mut failures = Vec::new();
    for task in tasks {
        let outcome = task.await.context("publisher task")??;
        last_ok = last_ok.max(outcome.last_ok);
        failures.extend(outcome.refused);
    }
    let wall = last_ok - start;
    let cpu = cpu::snapshot().since(&cpu_before);
    relay.stop().await?;

    if !failures.is_empty() {
        bail!(
            "{} of {total} events were refused; first: {}",
            failures.len(),
            failures[0]
        );
    }
    Ok(IngestFigures {
        backend,
        events: total,
        wall,
        inflight,
        relay_inflight,
        cpu,
    })
}

/// One list of `["EVENT", …]` frames per publisher key: kind-1 notes, or kind-9 messages
/// into `channel`.
fn presign(keys: &[Keys], per_publisher: usize, channel: Option<&str>) -> Vec<Vec<String>> {
    let t = now();
    std::thread::scope(|scope| {
        let handles: Vec<_> = keys
            .iter()
            .enumerate()
            .map(|(p, keys)| {
                scope.spawn(move || {
                    (0..per_publisher)
                        .map(|i| {
                            let content = format!("benchmark note {i} from publisher {p}");
                            let event = match channel {
                                Some(ch) => {
                                    keys.sign(9, vec![vec!["h".into(), ch.into()]], &content, t)
                                }
                                None => keys.sign(
                                    1,
                                    vec![vec!["t".into(), "bench".into()]],
                                    &content,
                                    t,
                                ),
                            };
                            json!(["EVENT", event]).to_string()
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("signing thread"))
            .collect()
    })
}

/// Untimed preparation of channel workloads.
mod setup {
    use super::{now, Keys, Ws};

    use anyhow::{bail, Context};
    use futures_util::{SinkExt, StreamExt};
    use serde_json::{json, Value};
    use tokio_tungstenite::tungstenite::Message;

    /// Next JSON message from the relay.
    async fn next(ws: &mut Ws) -> anyhow::Result<Value> {
        loop {
            match ws.next().await.context("relay closed during setup")?? {
                Message::Text(text) => return Ok(serde_json::from_str(&text)?),
                Message::Close(_) => bail!("relay closed during setup"),
                _ => continue,
            }
        }
    }

    /// Send `event` and require `OK true`.
    async fn publish(
        ws: &mut Ws,
        event: &buzz_nostr::event::Event,
        what: &str,
    ) -> anyhow::Result<()> {
        ws.send(Message::text(json!(["EVENT", event]).to_string()))
            .await?;
        loop {
            let v = next(ws).await?;
            if v[0] == "OK" && v[1] == event.id.as_str() {
                if v[2] == true {
                    return Ok(());
                }
                bail!("{what} refused: {}", v[3]);
            }
        }
    }

    /// NIP-42: answer the connection's challenge.
    pub(super) async fn authenticate(
        ws: &mut Ws,
        keys: &Keys,
        relay_url: &str,
    ) -> anyhow::Result<()> {
        let challenge = loop {
            let v = next(ws).await?;
            if v[0] == "AUTH" {
                break v[1].as_str().unwrap_or_default().to_owned();
            }
        };
        let auth = keys.sign(
            22_242,
            vec![
                vec!["relay".into(), relay_url.into()],
                vec!["challenge".into(), challenge],
            ],
            "",
            now(),
        );
        ws.send(Message::text(json!(["AUTH", auth]).to_string()))
            .await?;
        loop {
            let v = next(ws).await?;
            if v[0] == "OK" && v[1] == auth.id.as_str() {
                if v[2] == true {
                    return Ok(());
                }
                bail!("AUTH refused: {}", v[3]);
            }
        }
    }

    /// Create the open channel every publisher posts into.
    pub(super) async fn create_channel(
        ws: &mut Ws,
        keys: &Keys,
        channel: &str,
    ) -> anyhow::Result<()> {
        let create = keys.sign(
            9_007,
            vec![
                vec!["h".into(), channel.into()],
                vec!["name".into(), "bench".into()],
            ],
            "",
            now(),
        );
        publish(ws, &create, "channel creation").await
    }
}

struct PublisherOutcome {
    last_ok: Instant,
    /// `OK false` messages, verbatim.
    refused: Vec<String>,
}

type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Send `frames` keeping at most `inflight` unanswered, and collect every OK.
async fn publish(ws: Ws, frames: Vec<String>, inflight: usize) -> anyhow::Result<PublisherOutcome> {
    let expected = frames.len();
    let (mut sink, mut stream) = ws.split();
    // One permit per EVENT that may be unanswered; the reader returns a permit per OK.
    let window = Arc::new(Semaphore::new(inflight));

    let sender_window = window.clone();
    let sender = tokio::spawn(async move {
        for frame in frames {
            let permit = match sender_window.try_acquire() {
                Ok(permit) => permit,
                Err(_) => {
                    // Window full: push out what is buffered, then wait for an OK.
                    sink.flush().await?;
                    sender_window.acquire().await?
                }
            };
            permit.forget();
            sink.feed(Message::text(frame)).await?;
        }
        sink.flush().await?;
        anyhow::Ok(sink)
    });

    let mut answered = 0;
    let mut refused = Vec::new();
    let mut last_ok = Instant::now();
    while answered < expected {
        let msg = tokio::time::timeout(STALL_TIMEOUT, stream.next())
            .await
            .with_context(|| format!("no OK for {STALL_TIMEOUT:?} ({answered}/{expected})"))?
            .with_context(|| format!("relay closed the connection ({answered}/{expected})"))??;
        let text = match msg {
            Message::Text(text) => text,
            Message::Close(frame) => bail!(
                "relay closed the connection after {answered}/{expected} OKs: {}",
                frame.map_or_else(
                    || "no reason".to_owned(),
                    |f| format!("{} {}", f.code, f.reason)
                )
            ),
            _ => continue,
        };
        let value: Value = serde_json::from_str(&text).context("relay sent malformed JSON")?;
        if value[0] != "OK" {
            continue; // the AUTH challenge, notices
        }
        answered += 1;
        last_ok = Instant::now();
        window.add_permits(1);
        if value[2] != Value::Bool(true) {
            refused.push(text.to_string());
        }
    }
    let mut sink = sender.await.context("sender task")??;
    let _ = sink.close().await;
    Ok(PublisherOutcome { last_ok, refused })
}

/// Per-thread CPU time from `/proc/self/task` (Linux), grouped by thread name, so the
/// figures say where ingest time goes: the storage writer, the relay's workers (WebSocket,
/// verification), its blocking pool (reads, Lua policies) or the bench client itself.
mod cpu {
    use std::collections::HashMap;

    /// Clock ticks per second of `/proc` times (`CLK_TCK`, 100 on Linux).
    const TICKS: f64 = 100.0;

    const GROUPS: [(&str, &str); 5] = [
        ("buzz-store-writ", "relay storage writer thread"),
        ("buzz-store-chec", "relay WAL checkpoint thread"),
        ("actix-server wo", "relay workers (ws, verify, pipeline)"),
        ("tokio-rt-worker", "relay blocking pool (reads, policy)"),
        (super::CLIENT_THREAD, "bench client (publishers)"),
    ];

    pub(super) struct Snapshot(HashMap<u64, (String, u64)>);

    pub(super) fn snapshot() -> Snapshot {
        let mut threads = HashMap::new();
        let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
            return Snapshot(threads);
        };
        for entry in dir.flatten() {
            let Ok(tid) = entry.file_name().to_string_lossy().parse::<u64>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            if let Some(sample) = parse(&stat) {
                threads.insert(tid, sample);
            }
        }
        Snapshot(threads)
    }

    /// `(comm, utime + stime)` from a `stat` line.
    fn parse(stat: &str) -> Option<(String, u64)> {
        let open = stat.find('(')?;
        let close = stat.rfind(')')?;
        let comm = stat.get(open + 1..close)?.to_owned();
        let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
        // After the comm: state is field 3; utime and stime are fields 14 and 15.
        let utime: u64 = fields.get(11)?.parse().ok()?;
        let stime: u64 = fields.get(12)?.parse().ok()?;
        Some((comm, utime + stime))
    }

    impl Snapshot {
        /// CPU seconds per group since `before` (threads that exited meanwhile are lost).
        pub(super) fn since(&self, before: &Snapshot) -> Vec<(&'static str, f64)> {
            let mut by_group: HashMap<&'static str, u64> = HashMap::new();
            for (tid, (comm, ticks)) in &self.0 {
                let earlier = before.0.get(tid).map_or(0, |(_, t)| *t);
                let group = GROUPS
                    .iter()
                    .find(|(prefix, _)| comm.starts_with(prefix))
                    .map_or("other threads", |(_, name)| name);
                *by_group.entry(group).or_default() += ticks.saturating_sub(earlier);
            }
            let mut groups: Vec<(&'static str, f64)> = by_group
                .into_iter()
                .map(|(group, ticks)| (group, ticks as f64 / TICKS))
                .collect();
            groups.sort_by(|a, b| b.1.total_cmp(&a.1));
            groups
        }
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn stat_lines_parse_even_with_odd_thread_names() {
            let line = "4242 (actix-server wo) S 1 2 3 4 5 6 7 8 9 10 250 17 0 0 20 0";
            assert_eq!(super::parse(line), Some(("actix-server wo".into(), 267)));
            let odd = "7 (a) b (c)) R 1 2 3 4 5 6 7 8 9 10 3 4 0 0";
            assert_eq!(super::parse(odd), Some(("a) b (c)".into(), 7)));
            assert_eq!(super::parse("garbage"), None);
        }
    }
}
