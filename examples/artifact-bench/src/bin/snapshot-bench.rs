//! `snapshot-bench`: a NIP-AR stable capture of many artifacts — start latency, pages/s,
//! bodies/s, completion, the process's peak RSS, and the storage one capture is charged
//! (and, with `--redis-url`, what Redis reports for the hash) against the 64 MiB quota.
//!
//! Artifacts are created through the real ingest path (pipelined WebSocket), the
//! capture is read over signed `POST /query`, as a client would, against a relay on
//! 127.0.0.1:0 in this process.
//!
//! ```text
//! cargo run --release -p buzz-artifact-bench --bin snapshot-bench -- [--artifacts 50000]
//!     [--channels 100] [--captures 3] [--database-url URL] [--redis-url redis://127.0.0.1:6379]
//! ```

#[path = "../seed.rs"]
mod seed;

use anyhow::{bail, Context};
use buzz_core::plugin::PluginEntry;
use buzz_core::relay::RelayBuilder;
use buzz_core::testkit::{now, percentile, BenchStorage, HttpClient, WsClient};
use buzz_nostr::keys::Keys;
use clap::Parser;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "snapshot-bench",
    about = "NIP-AR stable capture of many artifacts"
)]
struct Args {
    #[arg(long, default_value_t = 50_000)]
    artifacts: usize,
    #[arg(long, default_value_t = 100)]
    channels: usize,
    /// Full captures to time (start, every page, every body, complete).
    #[arg(long, default_value_t = 3)]
    captures: usize,
    /// sqlite://PATH, or a PostgreSQL admin URL (a scratch database is made).
    #[arg(long)]
    database_url: Option<String>,
    /// Keep captures in this Redis (a key prefix of the run's own) instead of the database.
    #[arg(long)]
    redis_url: Option<String>,
}

fn tag(name: &str, value: &str) -> Vec<String> {
    vec![name.to_owned(), value.to_owned()]
}

/// Peak resident set of this process (relay and client together), in MiB.
fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|kb| kb.parse::<f64>().ok())
            })
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

async fn snapshot(http: &HttpClient, keys: &Keys, filter: Value) -> anyhow::Result<Value> {
    let body = json!([filter]).to_string();
    let (status, answer) = http.post_signed(keys, "/query", body.as_bytes()).await;
    if status != 200 {
        bail!("snapshot refused ({status}): {answer}");
    }
    Ok(answer)
}

struct Figures {
    start: Duration,
    pages: usize,
    paging: Duration,
    bodies: usize,
    fetching: Duration,
    complete: Duration,
}

async fn one_capture(http: &HttpClient, keys: &Keys) -> anyhow::Result<Figures> {
    let began = Instant::now();
    let first = snapshot(
        http,
        keys,
        json!({"artifact": "snapshot", "action": "start",
        "query": {"artifact": "current", "#type": ["buzz.task"]}}),
    )
    .await?;
    let start = began.elapsed();
    let token = first["token"].as_str().context("token")?.to_owned();
    let mut entries: Vec<Value> = first["entries"].as_array().cloned().unwrap_or_default();
    let mut next = first["nextToken"].clone();
    let mut pages = 1;
    let began = Instant::now();
    while let Some(cursor) = next.as_str() {
        let page = snapshot(
            http,
            keys,
            json!({"artifact": "snapshot", "action": "page",
            "token": token, "cursor": cursor}),
        )
        .await?;
        entries.extend(page["entries"].as_array().cloned().unwrap_or_default());
        next = page["nextToken"].clone();
        pages += 1;
    }
    let paging = began.elapsed();
    let began = Instant::now();
    let mut bodies = 0;
    for chunk in entries.chunks(100) {
        let ids: Vec<&str> = chunk
            .iter()
            .filter_map(|e| e["revisionId"].as_str())
            .collect();
        let answer = snapshot(
            http,
            keys,
            json!({"artifact": "snapshot", "action": "bodies",
            "token": token, "revisionIds": ids}),
        )
        .await?;
        bodies += answer["events"].as_array().map_or(0, Vec::len);
    }
    let fetching = began.elapsed();
    let began = Instant::now();
    let done = snapshot(
        http,
        keys,
        json!({"artifact": "snapshot", "action": "complete", "token": token}),
    )
    .await?;
    if done["complete"] != true {
        bail!("not complete: {done}");
    }
    Ok(Figures {
        start,
        pages,
        paging,
        bodies,
        fetching,
        complete: began.elapsed(),
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.artifacts == 0 || args.channels == 0 || args.captures == 0 {
        bail!("--artifacts, --channels and --captures must be at least 1");
    }
    let command: Vec<String> = std::env::args().collect();
    println!("command: {}", command.join(" "));
    let storage = BenchStorage::new(args.database_url.as_deref()).await?;
    let owner = Keys::generate();
    // One reader per capture: a reader holds at most two captures per community, and a
    // finished capture stays charged until it expires.
    let readers: Vec<Keys> = (0..args.captures).map(|_| Keys::generate()).collect();
    let mut settings = storage.settings.clone();
    for community in &mut settings.communities {
        community.owners.push(owner.pubkey().to_owned());
        community
            .owners
            .extend(readers.iter().map(|r| r.pubkey().to_owned()));
    }
    let prefix = format!("buzz-bench-{}", uuid::Uuid::new_v4().simple());
    if let Some(url) = &args.redis_url {
        settings.storage.redis_url = url.clone();
        settings.storage.redis_prefix = prefix.clone();
    }
    let relay = RelayBuilder::new(settings)
        .without_signal_handlers()
        .plugin(PluginEntry::of::<buzz_snapshot::SnapshotPlugin>())
        .plugin(PluginEntry::of::<buzz_artifacts::ArtifactsPlugin>())
        .start()
        .await
        .context("starting the relay")?;
    let host = format!("localhost:{}", relay.addr.port());
    let store = if args.redis_url.is_some() {
        "Redis"
    } else {
        "the database"
    };
    println!(
        "relay on {} ({}), captures in {store}",
        relay.addr, storage.backend
    );

    let mut ws = WsClient::connect(relay.addr, &host).await?;
    if !ws.auth(&owner).await.0 {
        bail!("AUTH refused");
    }
    let mut channels = Vec::new();
    for i in 0..args.channels {
        let id = uuid::Uuid::new_v4().to_string();
        let create = owner.sign(
            9007,
            vec![tag("h", &id), tag("name", &format!("c{i}"))],
            "",
            now(),
        );
        let (ok, msg) = ws.publish(&create).await;
        if !ok {
            bail!("creating a channel: {msg}");
        }
        channels.push(id);
    }
    let began = Instant::now();
    // Half the seeded artifacts are tasks: seed twice the wanted number.
    seed::artifacts(
        &mut ws,
        &owner,
        &channels,
        &[owner.pubkey().to_owned()],
        0,
        args.artifacts * 2,
    )
    .await?;
    println!(
        "seeded {} artifacts ({} tasks) over {} channels in {:.1} s",
        args.artifacts * 2,
        args.artifacts,
        args.channels,
        began.elapsed().as_secs_f64()
    );
    relay
        .services
        .store
        .analyze()
        .await
        .map_err(|r| anyhow::anyhow!("{r}"))?;
    let http = HttpClient::new(relay.addr, &host);
    let rss_before = peak_rss_mib();
    let mut starts = Vec::new();
    for (n, reader) in readers.iter().enumerate() {
        let f = one_capture(&http, reader).await?;
        starts.push(f.start);
        println!(
            "capture {}: start {:.0} ms; {} pages in {:.0} ms ({:.0} pages/s); {} bodies in {:.0} ms ({:.0} bodies/s); complete {:.0} ms",
            n + 1,
            f.start.as_secs_f64() * 1e3,
            f.pages,
            f.paging.as_secs_f64() * 1e3,
            f.pages.saturating_sub(1) as f64 / f.paging.as_secs_f64().max(1e-9),
            f.bodies,
            f.fetching.as_secs_f64() * 1e3,
            f.bodies as f64 / f.fetching.as_secs_f64().max(1e-9),
            f.complete.as_secs_f64() * 1e3,
        );
    }
    starts.sort();
    println!(
        "start p50 {:.0} ms over {} captures",
        percentile(&starts, 50).as_secs_f64() * 1e3,
        starts.len()
    );
    let captures =
        buzz_snapshot::Captures::of_relay(&relay.services.settings, relay.services.store.clone())
            .await?;
    let listed = captures.list().await.map_err(|r| anyhow::anyhow!("{r}"))?;
    if let Some(c) = listed.iter().find(|c| c.registered) {
        let mib = c.bytes as f64 / (1024.0 * 1024.0);
        println!(
            "one capture of {} entries is charged {:.2} MiB: {} such captures fit the 64 MiB shared quota",
            c.entries,
            mib,
            (64.0 / mib).floor()
        );
    }
    if let Some(url) = &args.redis_url {
        let client = redis::Client::open(url.as_str())?;
        let mut conn = client.get_multiplexed_async_connection().await?;
        let key = format!("{prefix}:snapshot");
        let bytes: Option<i64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&key)
            .query_async(&mut conn)
            .await?;
        let registered = listed.iter().filter(|c| c.registered).count().max(1);
        println!(
            "Redis MEMORY USAGE of the capture hash: {:.2} MiB for {registered} captures ({:.2} MiB each)",
            bytes.unwrap_or(0) as f64 / (1024.0 * 1024.0),
            bytes.unwrap_or(0) as f64 / (1024.0 * 1024.0) / registered as f64
        );
        let _: () = redis::cmd("DEL").arg(&key).query_async(&mut conn).await?;
    }
    println!(
        "peak RSS of this process (relay + client): {:.0} MiB before the captures, {:.0} MiB after",
        rss_before,
        peak_rss_mib()
    );
    relay.stop().await?;
    Ok(())
}
