//! `page_latency`: what one NIP-AR manifest page costs a client, for a capture of many
//! artifacts — every page request rechecks database authority over the whole frozen
//! scope, so its latency grows with the capture, not with the page.
//!
//! Tasks are created through the real ingest path (pipelined WebSocket `EVENT`s) on a
//! relay on 127.0.0.1:0 in this process; one reader starts a capture and then asks for
//! its pages over signed `POST /query`, as a client would: every page `--rounds` times
//! (a repeated cursor answers the same page), then again after ordinary updates of one
//! in a hundred captured tasks (they stay captured: pages must not reset), then
//! completion.
//!
//! ```text
//! cargo bench -p buzz-snapshot --bench page_latency -- [--artifacts 10000]
//!     [--channels 20] [--rounds 5] [--database-url URL] [--redis-url redis://127.0.0.1:6379]
//! ```

use anyhow::{bail, Context};
use buzz_core::plugin::PluginEntry;
use buzz_core::relay::RelayBuilder;
use buzz_core::testkit::{now, percentile, BenchStorage, HttpClient, WsClient};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use clap::Parser;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(name = "page_latency", about = "NIP-AR manifest page latency")]
struct Args {
    /// Tasks captured (there are as many documents beside them, not captured).
    #[arg(long, default_value_t = 10_000)]
    artifacts: usize,
    #[arg(long, default_value_t = 20)]
    channels: usize,
    /// Times each page is asked for.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// sqlite://PATH, or a PostgreSQL admin URL (a scratch database is made).
    #[arg(long)]
    database_url: Option<String>,
    /// Keep captures in this Redis (a key prefix of the run's own) instead of the database.
    #[arg(long)]
    redis_url: Option<String>,
    /// Keep the scratch PostgreSQL database after the run (its URL is printed), to
    /// inspect its plans.
    #[arg(long)]
    keep_database: bool,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

/// Events in flight per batch on one connection.
const PIPELINE: usize = 500;

fn tag(name: &str, value: &str) -> Vec<String> {
    vec![name.to_owned(), value.to_owned()]
}

/// Publish `events` pipelined, every one accepted.
async fn publish(ws: &mut WsClient, events: &[Event]) -> anyhow::Result<()> {
    for batch in events.chunks(PIPELINE) {
        for event in batch {
            ws.send(&json!(["EVENT", event])).await?;
        }
        for event in batch {
            let (ok, msg) = ws.wait_ok(&event.id).await;
            if !ok {
                bail!("refused: {msg}");
            }
        }
    }
    Ok(())
}

/// A revision of an artifact: `create` (no `prev`) or a later op naming `prev`.
fn revision(author: &Keys, d: &str, h: &str, kind: &str, op: &str, prev: Option<&str>) -> Event {
    let mut tags = vec![
        tag("ar", "1"),
        tag("d", d),
        tag("h", h),
        tag("type", kind),
        tag("title", &format!("{kind} {d}")),
        tag("op", op),
    ];
    if let Some(prev) = prev {
        tags.push(tag("prev", prev));
    }
    author.sign(45_010, tags, r#"{"version":1}"#, now())
}

async fn snapshot(http: &HttpClient, keys: &Keys, filter: Value) -> anyhow::Result<Value> {
    let body = json!([filter]).to_string();
    let (status, answer) = http.post_signed(keys, "/query", body.as_bytes()).await;
    if status != 200 {
        bail!("{status}: {answer}");
    }
    Ok(answer)
}

/// Every page of the capture `token` names, each asked `rounds` times: the latencies.
async fn time_pages(
    http: &HttpClient,
    reader: &Keys,
    token: &str,
    cursors: &[String],
    rounds: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut took = Vec::with_capacity(cursors.len() * rounds);
    for _ in 0..rounds {
        for cursor in cursors {
            let began = Instant::now();
            snapshot(
                http,
                reader,
                json!({"artifact": "snapshot", "action": "page", "token": token, "cursor": cursor}),
            )
            .await?;
            took.push(began.elapsed());
        }
    }
    took.sort();
    Ok(took)
}

fn print_latencies(what: &str, took: &[Duration]) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mean = took.iter().sum::<Duration>().as_secs_f64() * 1e3 / took.len().max(1) as f64;
    println!(
        "{what}: {} page requests, p50 {:.2} ms, p99 {:.2} ms, mean {mean:.2} ms",
        took.len(),
        ms(percentile(took, 50)),
        ms(percentile(took, 99)),
    );
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.artifacts == 0 || args.channels == 0 || args.rounds == 0 {
        bail!("--artifacts, --channels and --rounds must be at least 1");
    }
    let command: Vec<String> = std::env::args().collect();
    println!("command: {}", command.join(" "));
    let mut storage = BenchStorage::new(args.database_url.as_deref()).await?;
    let (owner, reader) = (Keys::generate(), Keys::generate());
    let mut settings = storage.settings.clone();
    // Owners are not held to the write quotas: seeding is not what is measured.
    for community in &mut settings.communities {
        community.owners.push(owner.pubkey().to_owned());
    }
    if let Some(url) = &args.redis_url {
        settings.storage.redis_url = url.clone();
        settings.storage.redis_prefix = format!("buzz-bench-{}", uuid::Uuid::new_v4().simple());
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
    let channels: Vec<String> = (0..args.channels)
        .map(|_| uuid::Uuid::new_v4().to_string())
        .collect();
    let creates: Vec<Event> = channels
        .iter()
        .enumerate()
        .map(|(i, id)| {
            owner.sign(
                9007,
                vec![tag("h", id), tag("name", &format!("c{i}"))],
                "",
                now(),
            )
        })
        .collect();
    publish(&mut ws, &creates).await?;
    let began = Instant::now();
    let mut tasks = Vec::with_capacity(args.artifacts);
    let mut seeded = Vec::with_capacity(args.artifacts * 2);
    for i in 0..args.artifacts * 2 {
        let kind = if i % 2 == 0 { "buzz.task" } else { "buzz.doc" };
        let d = uuid::Uuid::new_v4().to_string();
        let event = revision(
            &owner,
            &d,
            &channels[i % channels.len()],
            kind,
            "create",
            None,
        );
        if kind == "buzz.task" {
            tasks.push(event.clone());
        }
        seeded.push(event);
    }
    publish(&mut ws, &seeded).await?;
    println!(
        "seeded {} tasks and {} documents over {} channels in {:.1} s",
        args.artifacts,
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
    let began = Instant::now();
    let first = snapshot(
        &http,
        &reader,
        json!({"artifact": "snapshot", "action": "start",
               "query": {"artifact": "current", "#type": ["buzz.task"]}}),
    )
    .await?;
    println!("start: {:.0} ms", began.elapsed().as_secs_f64() * 1e3);
    let token = first["token"].as_str().context("token")?.to_owned();
    let mut cursors = Vec::new();
    let mut entries = first["entries"].as_array().map_or(0, Vec::len);
    let mut next = first["nextToken"].as_str().map(str::to_owned);
    while let Some(cursor) = next {
        let page = snapshot(
            &http,
            &reader,
            json!({"artifact": "snapshot", "action": "page", "token": token, "cursor": cursor}),
        )
        .await?;
        entries += page["entries"].as_array().map_or(0, Vec::len);
        next = page["nextToken"].as_str().map(str::to_owned);
        cursors.push(cursor);
    }
    if entries != args.artifacts {
        bail!("captured {entries} entries, expected {}", args.artifacts);
    }
    println!(
        "capture of {entries} entries in {} pages",
        cursors.len() + 1
    );
    if cursors.is_empty() {
        bail!("one page only: use more --artifacts");
    }
    let took = time_pages(&http, &reader, &token, &cursors, args.rounds).await?;
    print_latencies("nothing changed", &took);

    // Ordinary updates of one captured task in a hundred: the captured revisions stay
    // available, so every page still answers.
    let updates: Vec<Event> = tasks
        .iter()
        .step_by(100)
        .map(|t| {
            let get = |name: &str| t.tag_value(name).unwrap_or_default().to_owned();
            revision(
                &owner,
                &get("d"),
                &get("h"),
                "buzz.task",
                "update",
                Some(&t.id),
            )
        })
        .collect();
    publish(&mut ws, &updates).await?;
    let took = time_pages(&http, &reader, &token, &cursors, args.rounds).await?;
    print_latencies(&format!("after {} ordinary updates", updates.len()), &took);

    let began = Instant::now();
    let done = snapshot(
        &http,
        &reader,
        json!({"artifact": "snapshot", "action": "complete", "token": token}),
    )
    .await?;
    if done["complete"] != true {
        bail!("not complete: {done}");
    }
    println!("complete: {:.0} ms", began.elapsed().as_secs_f64() * 1e3);
    relay.stop().await?;
    if args.keep_database {
        if let Some(url) = storage.keep_database() {
            println!("kept the database: {url}");
        }
    }
    Ok(())
}
