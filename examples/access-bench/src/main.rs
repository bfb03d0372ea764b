//! `access-bench`: what reading costs as a community grows. For a small and a large
//! community (10 vs 20,000 channels, a tenth of them private) it prints REQ p50/p99 over
//! WebSocket for a request naming one channel and for a community-wide request, the ratio
//! large/small, and the OK latency of creating a channel while many subscribers listen
//! (each refreshes what it may read).
//!
//! ```sh
//! cargo run --release -p buzz-access-bench -- --requests 300 --subscribers 200
//! ```

use anyhow::Context;
use buzz_core::relay::{RelayBuilder, RunningRelay};
use buzz_core::store::channel_state::{insert_rows, ChannelRow};
use buzz_core::testkit::{now, tag, BenchStorage, WsClient};
use buzz_nostr::keys::Keys;
use clap::Parser;
use serde_json::json;
use std::time::{Duration, Instant};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser, Debug)]
#[command(name = "access-bench", about = "REQ cost with few vs many channels")]
struct Args {
    /// Channels in the large community.
    #[arg(long, default_value_t = 20_000)]
    channels: usize,
    /// Channels in the small community.
    #[arg(long, default_value_t = 10)]
    few: usize,
    /// Timed REQs per figure.
    #[arg(long, default_value_t = 300)]
    requests: usize,
    /// Authenticated subscribers listening while channels are created.
    #[arg(long, default_value_t = 200)]
    subscribers: usize,
    /// Storage: sqlite://PATH, or a PostgreSQL admin URL (a scratch database is made).
    #[arg(long)]
    database_url: Option<String>,
}

fn uuid(n: usize) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(at).copied().unwrap_or_default()
}

struct Figures {
    named: (Duration, Duration),
    wide: (Duration, Duration),
    create_ok: Duration,
}

async fn seed(relay: &RunningRelay, channels: usize) -> anyhow::Result<()> {
    let community = relay.services.communities[0].id;
    let rows: Vec<ChannelRow> = (0..channels)
        .map(|n| ChannelRow {
            community_id: community,
            id: uuid(n),
            name: format!("seeded {n}"),
            about: String::new(),
            private: n % 10 == 0,
            channel_type: "stream".into(),
            archived: false,
            ttl_seconds: None,
            created_by: "ab".repeat(32),
            created_at: now() - 100,
            expires_at: None,
            deleted_at: None,
        })
        .collect();
    relay
        .services
        .store
        .write(move |conn| insert_rows(conn, &rows))
        .await
        .map_err(|r| anyhow::anyhow!("seeding channels: {r}"))
}

async fn client(relay: &RunningRelay, keys: &Keys) -> anyhow::Result<WsClient> {
    let mut ws = WsClient::connect(relay.addr, "localhost").await?;
    // A slow answer is a figure here, not a failure.
    ws.timeout = Duration::from_secs(300);
    let (ok, msg) = ws.auth(keys).await;
    anyhow::ensure!(ok, "auth refused: {msg}");
    Ok(ws)
}

async fn timed_reqs(
    ws: &mut WsClient,
    filter: serde_json::Value,
    n: usize,
) -> anyhow::Result<(Duration, Duration)> {
    let mut took = Vec::with_capacity(n);
    for _ in 0..n {
        // One subscription id: each REQ replaces the previous one.
        let started = Instant::now();
        ws.req("timed", vec![filter.clone()])
            .await
            .map_err(|e| anyhow::anyhow!("REQ refused: {e}"))?;
        took.push(started.elapsed());
    }
    took.sort();
    Ok((percentile(&took, 0.5), percentile(&took, 0.99)))
}

async fn measure(args: &Args, channels: usize) -> anyhow::Result<Figures> {
    let storage = BenchStorage::new(args.database_url.as_deref()).await?;
    let relay = RelayBuilder::new(storage.settings.clone())
        .without_signal_handlers()
        .start()
        .await
        .context("starting the relay")?;
    seed(&relay, channels).await?;
    let owner = Keys::generate();
    let mut owner_ws = client(&relay, &owner).await?;
    let channel = uuid(channels + 1);
    let create = owner.sign(
        9007,
        vec![tag(&["h", &channel]), tag(&["name", "bench"])],
        "",
        now(),
    );
    let (ok, msg) = owner_ws.publish(&create).await;
    anyhow::ensure!(ok, "channel refused: {msg}");
    for i in 0..50 {
        let event = owner.sign(
            9,
            vec![tag(&["h", &channel])],
            &format!("message {i}"),
            now(),
        );
        let (ok, msg) = owner_ws.publish(&event).await;
        anyhow::ensure!(ok, "message refused: {msg}");
    }

    let reader = Keys::generate();
    let mut ws = client(&relay, &reader).await?;
    let named = json!({"kinds": [9], "#h": [channel], "limit": 20});
    let wide = json!({"kinds": [9], "limit": 20});
    // Warm: the first community-wide read decides every channel once.
    timed_reqs(&mut ws, wide.clone(), 3).await?;
    let named = timed_reqs(&mut ws, named, args.requests).await?;
    let wide = timed_reqs(&mut ws, wide, args.requests).await?;

    // Subscribers listening on the community: each refreshes its scope per channel made.
    let mut listeners = Vec::new();
    let subscribing = Instant::now();
    for i in 0..args.subscribers {
        let keys = Keys::generate();
        let mut sub = client(&relay, &keys).await?;
        sub.req(&format!("live{i}"), vec![json!({"kinds": [9], "limit": 1})])
            .await
            .map_err(|e| anyhow::anyhow!("subscribe: {e}"))?;
        listeners.push(sub);
    }
    eprintln!(
        "{channels} channels: {} subscribers subscribed in {:?}",
        args.subscribers,
        subscribing.elapsed()
    );
    // A connection left unread this long has missed the relay's heartbeat pings and was
    // closed (`outbound_stall_secs`): the owner creates from a fresh one.
    owner_ws.close().await;
    let mut owner_ws = client(&relay, &owner).await?;
    let mut create_ok = Vec::new();
    for n in 0..10 {
        let id = uuid(channels + 10 + n);
        let event = owner.sign(
            9007,
            vec![tag(&["h", &id]), tag(&["name", "more"])],
            "",
            now(),
        );
        let started = Instant::now();
        let (ok, msg) = owner_ws.publish(&event).await;
        anyhow::ensure!(ok, "channel refused: {msg}");
        create_ok.push(started.elapsed());
        eprintln!(
            "{channels} channels: creation {n} OK after {:?}",
            started.elapsed()
        );
    }
    create_ok.sort();
    for sub in listeners {
        sub.close().await;
    }
    ws.close().await;
    owner_ws.close().await;
    relay.stop().await?;
    println!(
        "{:>6} channels ({}): REQ one channel p50 {:?} p99 {:?}; community-wide p50 {:?} p99 {:?}; create OK p50 with {} subscribers {:?}",
        channels,
        storage.backend,
        named.0,
        named.1,
        wide.0,
        wide.1,
        args.subscribers,
        percentile(&create_ok, 0.5),
    );
    Ok(Figures {
        named,
        wide,
        create_ok: percentile(&create_ok, 0.5),
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let small = measure(&args, args.few).await?;
    let large = measure(&args, args.channels).await?;
    let ratio = |a: Duration, b: Duration| a.as_secs_f64() / b.as_secs_f64().max(1e-9);
    println!(
        "ratio {} / {} channels: one-channel REQ p50 {:.2}, community-wide REQ p50 {:.2}, create OK {:.2} (target for REQs: <= 1.5)",
        args.channels,
        args.few,
        ratio(large.named.0, small.named.0),
        ratio(large.wide.0, small.wide.0),
        ratio(large.create_ok, small.create_ok),
    );
    Ok(())
}
