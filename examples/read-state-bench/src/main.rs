//! `read-state-bench`: what the `/buzz/v1` sidebar costs as history grows, and how fast
//! marks are taken.
//!
//! For each history size (`--small`, `--large` messages per channel) a fresh relay and
//! database: `--channels` joined channels of that much history (90% thread replies),
//! the reader's account started, one followed thread per channel, then a small unread
//! tail (`--tail` messages per channel, one mentioning the reader, and a reply in the
//! followed thread). Then: sidebar GET p50/p99 (one page of all channels, NIP-98 signed
//! like any client) and the large/small ratio (target ≤ 1.5: the cost follows what is
//! unread, not history), and a burst of single-intent `mark_through` POSTs
//! (`--burst` of them, `--concurrency` at a time) as intents per second.
//!
//! ```text
//! cargo run --release -p buzz-read-state-bench                       # SQLite
//! cargo run --release -p buzz-read-state-bench -- \
//!     --database-url postgres://postgres@127.0.0.1:5432/postgres     # PostgreSQL
//! ```

mod seed;

use anyhow::{bail, Context};
use buzz_core::config::PluginSection;
use buzz_core::relay::RelayBuilder;
use buzz_core::testkit::{now, BenchStorage, WsClient};
use buzz_nostr::keys::Keys;
use buzz_read_state::{ReadStatePlugin, NAME};
use buzz_read_state_client::{self as client, Client};
use clap::Parser;
use futures_util::stream::{self, StreamExt};
use seed::Seeder;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "read-state-bench",
    about = "/buzz/v1 sidebar cost vs history size"
)]
struct Args {
    /// Messages of history per channel, small case.
    #[arg(long, default_value_t = 2_000)]
    small: usize,
    /// Messages of history per channel, large case.
    #[arg(long, default_value_t = 200_000)]
    large: usize,
    /// Joined channels (one sidebar page holds at most 20).
    #[arg(long, default_value_t = 20)]
    channels: usize,
    /// Unread messages per channel after the reader caught up.
    #[arg(long, default_value_t = 5)]
    tail: usize,
    /// Timed sidebar requests per size.
    #[arg(long, default_value_t = 200)]
    iterations: usize,
    /// mark_through POSTs in the burst.
    #[arg(long, default_value_t = 1_000)]
    burst: usize,
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// PostgreSQL admin URL (a scratch database is made there); default SQLite.
    #[arg(long)]
    database_url: Option<String>,
}

const WARMUP: usize = 20;
const TARGET_RATIO: f64 = 1.5;

struct Figures {
    p50: Duration,
    p99: Duration,
    burst_per_sec: f64,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.small < 10 || args.large < 10 || args.channels == 0 || args.channels > 20 {
        bail!("--small/--large need at least 10 messages; --channels is 1 to 20");
    }
    let command: Vec<String> = std::env::args().collect();
    println!("command: {}", command.join(" "));
    let small = run(&args, args.small).await?;
    let large = run(&args, args.large).await?;
    let ratio50 = small_ratio(&large.p50, &small.p50);
    let ratio99 = small_ratio(&large.p99, &small.p99);
    println!(
        "ratio {}/{} messages: p50 {ratio50:.2}  p99 {ratio99:.2}  (target <= {TARGET_RATIO}) {}",
        args.large,
        args.small,
        if ratio50 <= TARGET_RATIO {
            "OK"
        } else {
            "OVER"
        }
    );
    println!(
        "mark_through burst: {:.0} intents/s ({} messages), {:.0} intents/s ({} messages)",
        small.burst_per_sec, args.small, large.burst_per_sec, args.large
    );
    Ok(())
}

/// Publish and require acceptance.
async fn publish(
    ws: &mut WsClient,
    event: buzz_nostr::event::Event,
) -> anyhow::Result<buzz_nostr::event::Event> {
    let (ok, msg) = ws.publish(&event).await;
    if !ok {
        bail!("event {} refused: {msg}", event.id);
    }
    Ok(event)
}

fn small_ratio(large: &Duration, small: &Duration) -> f64 {
    large.as_secs_f64() / small.as_secs_f64().max(1e-9)
}

async fn run(args: &Args, history: usize) -> anyhow::Result<Figures> {
    let storage = BenchStorage::new(args.database_url.as_deref()).await?;
    let backend = storage.backend;
    let mut settings = storage.settings.clone();
    settings.plugins.insert(
        NAME.into(),
        PluginSection {
            enabled: Some(true),
            // One reader makes every request here, far past a client's quota: the bench
            // measures the sidebar and marks, not the 429.
            options: [("quota_requests".to_owned(), serde_json::json!(u32::MAX))]
                .into_iter()
                .collect(),
        },
    );
    let relay = RelayBuilder::new(settings)
        .without_signal_handlers()
        .plugin(buzz_core::plugin::PluginEntry::of::<ReadStatePlugin>())
        .start()
        .await
        .context("starting the relay")?;
    let host = format!("localhost:{}", relay.addr.port());
    println!(
        "{backend}: {} channels x {history} messages of history, tail {}",
        args.channels, args.tail
    );

    let owner = Keys::generate();
    let reader = Keys::generate();
    let mut ows = WsClient::connect(relay.addr, &host).await?;
    let mut rws = WsClient::connect(relay.addr, &host).await?;
    if !ows.auth(&owner).await.0 || !rws.auth(&reader).await.0 {
        bail!("AUTH refused");
    }
    let tag = |parts: &[&str]| parts.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut channels = Vec::new();
    for i in 0..args.channels {
        let id = uuid::Uuid::new_v4().to_string();
        let name = format!("channel-{i}");
        publish(
            &mut ows,
            owner.sign(
                9007,
                vec![tag(&["h", &id]), tag(&["name", &name])],
                "",
                now(),
            ),
        )
        .await?;
        publish(
            &mut rws,
            reader.sign(9021, vec![tag(&["h", &id])], "", now()),
        )
        .await?;
        channels.push(id);
    }

    ows.close().await;
    rws.close().await;

    let store = relay.services.store.clone();
    let seeder = Seeder {
        community_id: store
            .ensure_community("localhost", "Local")
            .await
            .map_err(|r| anyhow::anyhow!("community: {r}"))?,
        store: store.clone(),
        authors: (0..16).map(|_| Keys::generate()).collect(),
    };
    let start = now() - history as i64 - 3_600;
    let began = Instant::now();
    let mut roots = Vec::new();
    for channel in &channels {
        roots.push(seeder.channel(channel, history, start).await?);
    }
    if backend == "postgres" {
        store
            .analyze()
            .await
            .map_err(|r| anyhow::anyhow!("analyze: {r}"))?;
    }
    println!(
        "  seeded {} messages in {:.1} s",
        history * channels.len(),
        began.elapsed().as_secs_f64()
    );

    // Seeding takes long enough for idle connections to miss heartbeats: connect afresh.
    let mut ows = WsClient::connect(relay.addr, &host).await?;
    let mut rws = WsClient::connect(relay.addr, &host).await?;
    if !ows.auth(&owner).await.0 || !rws.auth(&reader).await.0 {
        bail!("AUTH refused");
    }

    // The reader starts (first intent) and follows one thread per channel.
    let api = Client::new(&format!("http://{}", relay.addr), &host, reader.clone());
    let own = publish(
        &mut rws,
        reader.sign(9, vec![tag(&["h", &channels[0]])], "hi", now()),
    )
    .await?;
    let mut intents = vec![client::mark_through(&channels[0], None, &own.id)];
    intents.extend(
        channels
            .iter()
            .zip(&roots)
            .map(|(ch, root)| client::follow(ch, &root.id)),
    );
    let answer = api.intents(&intents).await?;
    if answer.status != 200
        || answer.body["results"]
            .as_array()
            .is_none_or(|r| r.iter().any(|o| o["status"] != "applied"))
    {
        bail!("starting the reader: {} {}", answer.status, answer.body);
    }

    // The unread tail.
    let mut latest = Vec::new();
    for (channel, root) in channels.iter().zip(&roots) {
        let mut last = None;
        for n in 0..args.tail {
            let mut tags = vec![tag(&["h", channel])];
            if n == 0 {
                tags.push(tag(&["p", reader.pubkey()]));
            }
            last = Some(publish(&mut ows, owner.sign(9, tags, "new", now())).await?);
        }
        let reply = vec![
            tag(&["h", channel]),
            tag(&["e", &root.id, "", "root"]),
            tag(&["e", &root.id, "", "reply"]),
        ];
        publish(&mut ows, owner.sign(9, reply, "new reply", now())).await?;
        latest.push((channel.clone(), last.context("--tail must be at least 1")?));
    }

    // Sidebar latency.
    let mut times = Vec::with_capacity(args.iterations);
    for i in 0..WARMUP + args.iterations {
        let began = Instant::now();
        let page = api.sidebar(20, None).await?;
        let took = began.elapsed();
        let rows = page.body["channels"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        if page.status != 200
            || rows.len() != channels.len()
            || rows.iter().any(|r| {
                r["unread"] != true
                    || r["mentions"] != 1
                    || r["threads"].as_array().map(Vec::len) != Some(1)
            })
        {
            bail!("unexpected sidebar: {} {}", page.status, page.body);
        }
        if i >= WARMUP {
            times.push(took);
        }
    }
    times.sort();
    let pick = |q: f64| times[((times.len() as f64 * q) as usize).min(times.len() - 1)];
    let (p50, p99) = (pick(0.50), pick(0.99));
    println!(
        "  sidebar ({} rows):  p50 {:>7.2} ms   p99 {:>7.2} ms",
        channels.len(),
        ms(p50),
        ms(p99)
    );

    // mark_through burst: single-intent POSTs, `concurrency` at a time.
    let began = Instant::now();
    let results: Vec<anyhow::Result<bool>> = stream::iter(0..args.burst)
        .map(|i| {
            let (channel, message) = &latest[i % latest.len()];
            let intent = client::mark_through(channel, None, &message.id);
            let api = api.clone();
            async move {
                let answer = api.intents(&[intent]).await?;
                Ok(answer.status == 200 && answer.body["results"][0]["status"] == "applied")
            }
        })
        .buffer_unordered(args.concurrency)
        .collect()
        .await;
    let elapsed = began.elapsed().as_secs_f64();
    let applied = results.iter().filter(|r| matches!(r, Ok(true))).count();
    if applied != args.burst {
        bail!("{} of {} marks applied", applied, args.burst);
    }
    let burst_per_sec = args.burst as f64 / elapsed;
    println!(
        "  mark_through burst: {} POSTs x 1 intent, {} at a time: {burst_per_sec:.0} intents/s",
        args.burst, args.concurrency
    );
    relay.stop().await.context("stopping")?;
    Ok(Figures {
        p50,
        p99,
        burst_per_sec,
    })
}
