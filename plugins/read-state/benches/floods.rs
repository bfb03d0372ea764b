//! `floods`: the figures of three attack findings on the read-state plugin, printed so a
//! run before and after a change can be compared. Not a timed test: it only measures.
//!
//! - `threads`: an attacker posts K top-level messages that p-tag a victim and a reply
//!   to each (the victim follows every one of those threads, each with an unread
//!   reply); then the victim's sidebar row of that channel (`channel_ids=`) is fetched
//!   again and again: p50/p99, status, answer bytes, threads listed, and — when rows
//!   carry `threads_next_cursor` — what paging through every thread costs. K from
//!   `--threads` (default 4000,5000).
//! - `victims`: replies that p-tag 20 victims (`--victim-threads` threads); the 20
//!   victims then load their sidebars at once while an unrelated user sends REQs in
//!   another channel: the victims' sidebar p50 and the unrelated REQ p50, before and
//!   after the flood.
//! - `mentions`: messages with 1,999 p tags (plus the `h` tag: the relay's 2,000-tag
//!   limit), naming non-members and then channel members: relay CPU per message
//!   (this process's threads, the bench client's excluded; on PostgreSQL also the
//!   machine's postgres processes), the message's EVENT->OK, read-state rows written per
//!   message, and another connection's EVENT->OK p50/p99 alone and while one attacker
//!   connection keeps sending such messages.
//! - `plans` (PostgreSQL only): 10k top-level messages ingested on a fresh database whose
//!   tables have autovacuum off, so no statistics ever change; messages per second of
//!   the first and the last 1k, and sequential scans per table afterwards.
//!
//! ```text
//! cargo bench -p buzz-read-state --bench floods -- --case threads            # SQLite
//! cargo bench -p buzz-read-state --bench floods -- --case threads \
//!     --database-url postgres://postgres@127.0.0.1:5432/postgres              # PostgreSQL
//! cargo bench -p buzz-read-state --bench floods -- --case mentions [--database-url …]
//! cargo bench -p buzz-read-state --bench floods -- --case victims [--database-url …]
//! cargo bench -p buzz-read-state --bench floods -- --case plans \
//!     --database-url postgres://postgres@127.0.0.1:5432/postgres
//! ```
//!
//! The relay runs in this process on its own runtime; the bench client runs on threads
//! named `bench-client`, whose CPU is not counted as the relay's.

use anyhow::{bail, Context};
use buzz_core::config::PluginSection;
use buzz_core::event::Event;
use buzz_core::keys::Keys;
use buzz_core::plugin::PluginEntry;
use buzz_core::relay::{RelayBuilder, RunningRelay};
use buzz_core::testkit::{now, percentile, BenchStorage, WsClient};
use buzz_read_state::{ReadStatePlugin, NAME};
use buzz_read_state_client::{self as client, Client};
use clap::{Parser, ValueEnum};
use diesel::{Connection, QueryableByName, RunQueryDsl};
use serde_json::{json, Value};
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Case {
    Threads,
    Victims,
    Mentions,
    Plans,
}

#[derive(Parser, Debug)]
#[command(name = "floods", about = "read-state attack figures")]
struct Args {
    /// What to measure (repeatable).
    #[arg(long, value_enum, default_values_t = [Case::Threads])]
    case: Vec<Case>,
    /// PostgreSQL admin URL (a scratch database is made there); default SQLite.
    #[arg(long)]
    database_url: Option<String>,
    /// `threads`: attacker threads per run (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [4_000, 5_000])]
    threads: Vec<usize>,
    /// `victims`: attacker threads whose replies p-tag the 20 victims.
    #[arg(long, default_value_t = 1_000)]
    victim_threads: usize,
    /// Timed sidebar requests per run.
    #[arg(long, default_value_t = 50)]
    iterations: usize,
    /// `mentions`: timed 1,999-p-tag messages per variant.
    #[arg(long, default_value_t = 40)]
    mention_events: usize,
    /// `mentions`: p tags per message (the relay allows 2,000 tags with the `h` tag).
    #[arg(long, default_value_t = 1_999)]
    p_tags: usize,
    /// `mentions`: messages signed for the attacker's flood phase.
    #[arg(long, default_value_t = 600)]
    flood_events: usize,
    /// `mentions`: seconds of each EVENT->OK phase of the other connection.
    #[arg(long, default_value_t = 5)]
    phase_secs: u64,
    /// `plans`: top-level messages ingested.
    #[arg(long, default_value_t = 10_000)]
    roots: usize,
    /// `plans`: run without the read-state plugin (core's share alone).
    #[arg(long)]
    without_plugin: bool,
    /// Passed by `cargo bench`; ignored.
    #[arg(long, hide = true)]
    bench: bool,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let command: Vec<String> = std::env::args().collect();
    println!("command: {}", command.join(" "));
    // The relay's runtime; the client gets one of its own (threads named bench-client).
    let relay_rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("relay runtime")?;
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("bench-client")
        .enable_all()
        .build()
        .context("client runtime")?;
    let relay = Arc::new(relay_rt);
    client_rt.block_on(async {
        for case in &args.case {
            match case {
                Case::Threads => {
                    for &k in &args.threads {
                        threads_case(&args, &relay, k).await?;
                    }
                }
                Case::Victims => victims_case(&args, &relay).await?,
                Case::Mentions => mentions_case(&args, &relay).await?,
                Case::Plans => plans_case(&args, &relay).await?,
            }
        }
        Ok(())
    })
}

/// A relay in this process (on the relay runtime) over fresh storage.
struct Bench {
    relay: RunningRelay,
    host: String,
    database_url: String,
    backend: &'static str,
    _storage: BenchStorage,
}

impl Bench {
    async fn start(
        args: &Args,
        rt: &tokio::runtime::Runtime,
        plugin: bool,
    ) -> anyhow::Result<Bench> {
        let storage = BenchStorage::new(args.database_url.as_deref()).await?;
        let mut settings = storage.settings.clone();
        settings.plugins.insert(
            NAME.into(),
            PluginSection {
                enabled: Some(plugin),
                // The bench makes far more requests than a client's quota allows.
                options: [("quota_requests".to_owned(), json!(u32::MAX))]
                    .into_iter()
                    .collect(),
            },
        );
        let database_url = settings.storage.database_url.clone();
        let backend = storage.backend;
        let relay = rt
            .spawn(async move {
                RelayBuilder::new(settings)
                    .without_signal_handlers()
                    .plugin(PluginEntry::of::<ReadStatePlugin>())
                    .start()
                    .await
            })
            .await
            .context("relay task")?
            .context("starting the relay")?;
        let host = format!("localhost:{}", relay.addr.port());
        Ok(Bench {
            relay,
            host,
            database_url,
            backend,
            _storage: storage,
        })
    }

    fn addr(&self) -> SocketAddr {
        self.relay.addr
    }

    async fn user(&self, keys: &Keys) -> anyhow::Result<WsClient> {
        let mut ws = WsClient::connect(self.addr(), &self.host).await?;
        ws.timeout = Duration::from_secs(120);
        let (ok, msg) = ws.auth(keys).await;
        if !ok {
            bail!("AUTH refused: {msg}");
        }
        Ok(ws)
    }

    fn api(&self, keys: &Keys) -> Client {
        Client::new(&format!("http://{}", self.addr()), &self.host, keys.clone())
    }

    async fn stop(self, rt: &tokio::runtime::Runtime) -> anyhow::Result<()> {
        let relay = self.relay;
        rt.spawn(async move { relay.stop().await }).await??;
        Ok(())
    }

    /// Rows of the plugin's tables: (frontiers, mentions).
    fn plugin_rows(&self) -> anyhow::Result<(i64, i64)> {
        let count = |table: &str| -> anyhow::Result<i64> {
            let text = format!("SELECT COUNT(*) AS v FROM {table}");
            let rows: Vec<Count> = if self.backend == "postgres" {
                let mut c = diesel::PgConnection::establish(&self.database_url)?;
                diesel::sql_query(text).load(&mut c)?
            } else {
                let path = self
                    .database_url
                    .strip_prefix("sqlite://")
                    .unwrap_or(&self.database_url);
                let mut c = diesel::SqliteConnection::establish(path)?;
                diesel::sql_query(text).load(&mut c)?
            };
            Ok(rows.first().map_or(0, |r| r.v))
        };
        Ok((
            count("read_state_frontiers")?,
            count("read_state_mentions")?,
        ))
    }
}

#[derive(QueryableByName)]
struct Count {
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    v: i64,
}

fn tag(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

async fn publish(ws: &mut WsClient, event: Event) -> anyhow::Result<Event> {
    let (ok, msg) = ws.publish(&event).await;
    if !ok {
        bail!("kind {} refused: {msg}", event.kind);
    }
    Ok(event)
}

/// Send `events` in windows of `window` and require every OK.
async fn flood(ws: &mut WsClient, events: &[Event], window: usize) -> anyhow::Result<()> {
    for chunk in events.chunks(window) {
        let oks = ws.burst(chunk).await;
        if let Some(bad) = chunk
            .iter()
            .find(|e| !oks.get(&e.id).is_some_and(|(ok, _)| *ok))
        {
            bail!("event refused: {:?}", oks.get(&bad.id));
        }
    }
    Ok(())
}

/// Sign on every core (signing is the client's cost, done before anything is timed).
fn sign_all(specs: Vec<(Keys, u32, Vec<Vec<String>>, i64)>) -> Vec<Event> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = specs.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = specs
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|(keys, kind, tags, at)| {
                            keys.sign(*kind, tags.clone(), &uuid::Uuid::new_v4().to_string(), *at)
                        })
                        .collect::<Vec<Event>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

async fn create_channel(ws: &mut WsClient, owner: &Keys, name: &str) -> anyhow::Result<String> {
    let id = uuid::Uuid::new_v4().to_string();
    let tags = vec![
        tag(&["h", &id]),
        tag(&["name", name]),
        tag(&["channel_type", "stream"]),
    ];
    publish(ws, owner.sign(9007, tags, "", now())).await?;
    Ok(id)
}

async fn join(ws: &mut WsClient, keys: &Keys, channel: &str) -> anyhow::Result<()> {
    let nonce = uuid::Uuid::new_v4().to_string();
    publish(
        ws,
        keys.sign(9021, vec![tag(&["h", channel])], &nonce, now()),
    )
    .await?;
    Ok(())
}

/// The reader's first intent: a message of its own, marked read.
async fn start_account(
    ws: &mut WsClient,
    api: &Client,
    keys: &Keys,
    channel: &str,
) -> anyhow::Result<()> {
    let own = publish(ws, keys.sign(9, vec![tag(&["h", channel])], "hi", now())).await?;
    let answer = api
        .intents(&[client::mark_through(channel, None, &own.id)])
        .await?;
    if answer.status != 200 || answer.body["results"][0]["status"] != "applied" {
        bail!("starting the account: {} {}", answer.status, answer.body);
    }
    Ok(())
}

/// `count` attacker threads in `channel`: a top-level message p-tagging `root_p` and a
/// reply p-tagging `reply_p`, author times spread over the last ten minutes.
async fn attacker_threads(
    ws: &mut WsClient,
    attacker: &Keys,
    channel: &str,
    count: usize,
    root_p: &[String],
    reply_p: &[String],
) -> anyhow::Result<()> {
    let base = now() - 700;
    let span = 600.0 / count.max(1) as f64;
    let specs = (0..count)
        .map(|i| {
            let mut tags = vec![tag(&["h", channel])];
            tags.extend(root_p.iter().map(|p| tag(&["p", p])));
            (attacker.clone(), 9, tags, base + (i as f64 * span) as i64)
        })
        .collect();
    let roots = sign_all(specs);
    flood(ws, &roots, 200).await?;
    let specs = roots
        .iter()
        .map(|root| {
            let mut tags = vec![
                tag(&["h", channel]),
                tag(&["e", &root.id, "", "root"]),
                tag(&["e", &root.id, "", "reply"]),
            ];
            tags.extend(reply_p.iter().map(|p| tag(&["p", p])));
            (attacker.clone(), 9, tags, root.created_at + 30)
        })
        .collect();
    flood(ws, &sign_all(specs), 200).await
}

/// One sidebar row (`channel_ids=`), timed.
async fn timed_row(api: &Client, path: &str) -> anyhow::Result<(Duration, u16, usize, Value)> {
    let began = Instant::now();
    let answer = api.get(path).await?;
    let took = began.elapsed();
    let bytes = answer.body.to_string().len();
    Ok((took, answer.status, bytes, answer.body))
}

async fn threads_case(args: &Args, rt: &tokio::runtime::Runtime, k: usize) -> anyhow::Result<()> {
    let bench = Bench::start(args, rt, true).await?;
    let (owner, victim, attacker) = (Keys::generate(), Keys::generate(), Keys::generate());
    let mut ows = bench.user(&owner).await?;
    let mut vws = bench.user(&victim).await?;
    let mut aws = bench.user(&attacker).await?;
    let ch = create_channel(&mut ows, &owner, "general").await?;
    join(&mut vws, &victim, &ch).await?;
    join(&mut aws, &attacker, &ch).await?;
    let api = bench.api(&victim);
    start_account(&mut vws, &api, &victim, &ch).await?;
    let began = Instant::now();
    let victim_pk = vec![victim.pubkey().to_owned()];
    attacker_threads(&mut aws, &attacker, &ch, k, &victim_pk, &[]).await?;
    println!(
        "{}: threads: {k} attacker threads (root p-tags the victim, one reply each) in {:.1} s",
        bench.backend,
        began.elapsed().as_secs_f64()
    );
    let path = format!("/buzz/v1/me/sidebar?channel_ids={ch}");
    for _ in 0..3 {
        timed_row(&api, &path).await?;
    }
    let mut took = Vec::new();
    let mut last = None;
    for _ in 0..args.iterations {
        let (t, status, bytes, body) = timed_row(&api, &path).await?;
        took.push(t);
        last = Some((status, bytes, body));
    }
    took.sort();
    let (status, bytes, body) = last.context("no request")?;
    let row = &body["channels"][0];
    let listed = row["threads"].as_array().map_or(0, Vec::len);
    println!(
        "  sidebar row: p50 {:.1} ms  p99 {:.1} ms  status {status}  {bytes} bytes  {listed} threads listed{}",
        ms(percentile(&took, 50)),
        ms(percentile(&took, 99)),
        if status == 200 {
            String::new()
        } else {
            format!("  ({})", body["error"]["message"])
        }
    );
    // Paging through every thread, when rows carry a cursor.
    if let Some(mut cursor) = row["threads_next_cursor"].as_str().map(str::to_owned) {
        let began = Instant::now();
        let (mut pages, mut seen) = (1usize, listed);
        loop {
            let next = format!(
                "{path}&threads_cursor={}",
                buzz_read_state_client::encode(&cursor)
            );
            let (_, status, _, body) = timed_row(&api, &next).await?;
            if status != 200 {
                bail!("threads page: {status} {body}");
            }
            pages += 1;
            let row = &body["channels"][0];
            seen += row["threads"].as_array().map_or(0, Vec::len);
            match row["threads_next_cursor"].as_str() {
                Some(c) => cursor = c.to_owned(),
                None => break,
            }
        }
        println!(
            "  paging every thread: {seen} threads in {pages} pages, {:.0} ms in all ({:.1} ms a page)",
            ms(began.elapsed()),
            ms(began.elapsed()) / (pages - 1).max(1) as f64
        );
    }
    for ws in [ows, vws, aws] {
        ws.close().await;
    }
    bench.stop(rt).await
}

async fn victims_case(args: &Args, rt: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    const VICTIMS: usize = 20;
    let bench = Bench::start(args, rt, true).await?;
    let (owner, attacker, bystander) = (Keys::generate(), Keys::generate(), Keys::generate());
    let victims: Vec<Keys> = (0..VICTIMS).map(|_| Keys::generate()).collect();
    let mut ows = bench.user(&owner).await?;
    let mut aws = bench.user(&attacker).await?;
    let mut bws = bench.user(&bystander).await?;
    let ch = create_channel(&mut ows, &owner, "general").await?;
    let other = create_channel(&mut ows, &owner, "elsewhere").await?;
    join(&mut aws, &attacker, &ch).await?;
    join(&mut bws, &bystander, &other).await?;
    for _ in 0..20 {
        publish(
            &mut ows,
            owner.sign(9, vec![tag(&["h", &other])], "hello", now()),
        )
        .await?;
    }
    let mut apis = Vec::new();
    for v in &victims {
        let mut ws = bench.user(v).await?;
        join(&mut ws, v, &ch).await?;
        let api = bench.api(v);
        start_account(&mut ws, &api, v, &ch).await?;
        ws.close().await;
        apis.push(api);
    }
    let path = format!("/buzz/v1/me/sidebar?channel_ids={ch}");
    let before = victims_load(args, &apis, &path, &mut bws, &other).await?;
    let began = Instant::now();
    let pks: Vec<String> = victims.iter().map(|v| v.pubkey().to_owned()).collect();
    attacker_threads(&mut aws, &attacker, &ch, args.victim_threads, &[], &pks).await?;
    println!(
        "{}: victims: {} attacker threads, each reply p-tags {VICTIMS} victims, in {:.1} s",
        bench.backend,
        args.victim_threads,
        began.elapsed().as_secs_f64()
    );
    // The bystander's connection sat idle through the flood: connect afresh.
    bws.close().await;
    let mut bws = bench.user(&bystander).await?;
    let after = victims_load(args, &apis, &path, &mut bws, &other).await?;
    let refused = |load: &Load| {
        if load.refused.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = load
                .refused
                .iter()
                .map(|(status, n)| format!("{n} x {status}"))
                .collect();
            format!(" (not 200: {})", list.join(", "))
        }
    };
    println!(
        "  victims' sidebar p50: {:.1} ms before the flood{}, {:.1} ms after{}",
        ms(before.sidebar_p50),
        refused(&before),
        ms(after.sidebar_p50),
        refused(&after)
    );
    println!(
        "  unrelated REQ p50 while they load: {:.1} ms before the flood, {:.1} ms after",
        ms(before.req_p50),
        ms(after.req_p50)
    );
    for ws in [ows, aws, bws] {
        ws.close().await;
    }
    bench.stop(rt).await
}

/// Every victim loads its sidebar `iterations` times (at most 20), all at once, while
/// the bystander sends REQs one after another.
struct Load {
    /// Victims' sidebar requests, every status.
    sidebar_p50: Duration,
    /// Answers other than 200, by status.
    refused: Vec<(u16, usize)>,
    req_p50: Duration,
}

async fn victims_load(
    args: &Args,
    apis: &[Client],
    path: &str,
    bystander: &mut WsClient,
    other: &str,
) -> anyhow::Result<Load> {
    let mut tasks = Vec::new();
    for api in apis {
        let (api, path, n) = (api.clone(), path.to_owned(), args.iterations.min(20));
        tasks.push(tokio::spawn(async move {
            let mut took = Vec::new();
            for _ in 0..n {
                let (t, status, _, _) = timed_row(&api, &path).await?;
                took.push((t, status));
            }
            Ok::<_, anyhow::Error>(took)
        }));
    }
    let mut reqs = Vec::new();
    let mut n = 0u64;
    let all = async {
        let mut took = Vec::new();
        for task in tasks {
            took.extend(task.await??);
        }
        Ok::<_, anyhow::Error>(took)
    };
    tokio::pin!(all);
    let victims = loop {
        tokio::select! {
            result = &mut all => break result?,
            _ = async {
                n += 1;
                let filter = json!({"kinds": [9], "#h": [other], "limit": 20});
                let began = Instant::now();
                let got = bystander.req(&format!("r{n}"), vec![filter]).await;
                reqs.push(began.elapsed());
                let _ = bystander.send(&json!(["CLOSE", format!("r{n}")])).await;
                got
            } => {}
        }
    };
    let mut refused: Vec<(u16, usize)> = Vec::new();
    for (_, status) in victims.iter().filter(|(_, s)| *s != 200) {
        match refused.iter_mut().find(|(s, _)| s == status) {
            Some((_, count)) => *count += 1,
            None => refused.push((*status, 1)),
        }
    }
    let mut took: Vec<Duration> = victims.iter().map(|(t, _)| *t).collect();
    took.sort();
    reqs.sort();
    Ok(Load {
        sidebar_p50: percentile(&took, 50),
        refused,
        req_p50: percentile(&reqs, 50),
    })
}

/// CPU ticks (1/100 s) of this process's threads: (relay's, bench client's).
fn cpu_ticks() -> (u64, u64) {
    let (mut relay, mut bench) = (0, 0);
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return (0, 0);
    };
    for entry in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((comm, ticks)) = stat_ticks(&stat) {
            if comm.starts_with("bench-client") {
                bench += ticks;
            } else {
                relay += ticks;
            }
        }
    }
    (relay, bench)
}

/// CPU ticks of every `postgres` process on the machine (others' work included).
fn postgres_ticks() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|s| stat_ticks(&s))
        .filter(|(comm, _)| comm == "postgres")
        .map(|(_, t)| t)
        .sum()
}

/// `(comm, utime + stime)` of a `/proc` stat line.
fn stat_ticks(stat: &str) -> Option<(String, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // After the comm: state is field 3; utime and stime are fields 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((comm, utime + stime))
}

/// Run `f`, returning its value, relay CPU ms and postgres CPU ms it took.
async fn with_cpu<T>(f: impl Future<Output = anyhow::Result<T>>) -> anyhow::Result<(T, f64, f64)> {
    let (relay0, _) = cpu_ticks();
    let pg0 = postgres_ticks();
    let out = f.await?;
    let (relay1, _) = cpu_ticks();
    let pg1 = postgres_ticks();
    Ok((
        out,
        (relay1 - relay0) as f64 * 10.0,
        (pg1.saturating_sub(pg0)) as f64 * 10.0,
    ))
}

/// Send `events` one at a time; each EVENT->OK.
async fn one_by_one(ws: &mut WsClient, events: &[Event]) -> anyhow::Result<Vec<Duration>> {
    let mut took = Vec::new();
    for event in events {
        let began = Instant::now();
        let (ok, msg) = ws.publish(event).await;
        if !ok {
            bail!("refused: {msg}");
        }
        took.push(began.elapsed());
    }
    Ok(took)
}

async fn mentions_case(args: &Args, rt: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    let bench = Bench::start(args, rt, true).await?;
    let (owner, attacker, other) = (Keys::generate(), Keys::generate(), Keys::generate());
    let mut ows = bench.user(&owner).await?;
    let mut aws = bench.user(&attacker).await?;
    let mut xws = bench.user(&other).await?;
    let ch = create_channel(&mut ows, &owner, "general").await?;
    join(&mut aws, &attacker, &ch).await?;
    join(&mut xws, &other, &ch).await?;
    // Channel members the owner adds (9000), to be p-tagged in the second variant.
    let members: Vec<Keys> = (0..args.p_tags).map(|_| Keys::generate()).collect();
    let adds = sign_all(
        members
            .iter()
            .map(|m| {
                let tags = vec![tag(&["h", &ch]), tag(&["p", m.pubkey()])];
                (owner.clone(), 9000, tags, now())
            })
            .collect(),
    );
    flood(&mut ows, &adds, 200).await?;
    // Connections idle through a long setup may have missed heartbeats: connect afresh.
    aws.close().await;
    xws.close().await;
    let mut aws = bench.user(&attacker).await?;
    let mut xws = bench.user(&other).await?;
    println!(
        "{}: mentions: {} members added; messages of {} p tags",
        bench.backend, args.p_tags, args.p_tags
    );
    let strangers: Vec<String> = (0..args.p_tags)
        .map(|_| Keys::generate().pubkey().to_owned())
        .collect();
    let member_pks: Vec<String> = members.iter().map(|m| m.pubkey().to_owned()).collect();
    let tagged = |pks: &[String], n: usize| {
        sign_all(
            (0..n)
                .map(|_| {
                    let mut tags = vec![tag(&["h", &ch])];
                    tags.extend(pks.iter().map(|p| tag(&["p", p])));
                    (attacker.clone(), 9, tags, now())
                })
                .collect(),
        )
    };
    let plain = |keys: &Keys, n: usize| {
        sign_all(
            (0..n)
                .map(|_| (keys.clone(), 9, vec![tag(&["h", &ch])], now()))
                .collect(),
        )
    };

    // Plain messages first: the reference cost.
    let events = plain(&attacker, args.mention_events * 5);
    let (took, cpu, pg) = with_cpu(one_by_one(&mut aws, &events)).await?;
    report_events("plain message", &took, cpu, pg, bench.backend, None);

    for (label, pks) in [
        ("p tags naming non-members", &strangers),
        ("p tags naming channel members", &member_pks),
    ] {
        let events = tagged(pks, args.mention_events);
        let rows0 = bench.plugin_rows()?;
        let (took, cpu, pg) = with_cpu(one_by_one(&mut aws, &events)).await?;
        let rows1 = bench.plugin_rows()?;
        let rows = (rows1.0 - rows0.0 + rows1.1 - rows0.1) as f64 / events.len() as f64;
        report_events(label, &took, cpu, pg, bench.backend, Some(rows));
    }

    // Another connection's EVENT->OK, alone and while the attacker floods.
    let alone = timed_phase(&mut xws, &other, &ch, args.phase_secs).await?;
    let stop = Arc::new(AtomicBool::new(false));
    let flooding = {
        let stop = stop.clone();
        // Signed beforehand: the client's signing must not slow the other connection.
        let events = tagged(&member_pks, args.flood_events);
        tokio::spawn(async move {
            let mut sent = 0usize;
            for chunk in events.chunks(4) {
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                sent += aws.burst(chunk).await.len();
            }
            let ran_out = !stop.load(Ordering::SeqCst);
            (aws, sent, ran_out)
        })
    };
    let during = timed_phase(&mut xws, &other, &ch, args.phase_secs).await?;
    stop.store(true, Ordering::SeqCst);
    let (aws, sent, ran_out) = flooding.await?;
    if ran_out {
        println!("  (the flood ran out of messages before the phase ended: raise --flood-events)");
    }
    println!(
        "  other connection EVENT->OK: alone p50 {:.1} ms p99 {:.1} ms; while one connection sends {}-p-tag messages ({sent} sent) p50 {:.1} ms p99 {:.1} ms",
        ms(percentile(&alone, 50)),
        ms(percentile(&alone, 99)),
        args.p_tags,
        ms(percentile(&during, 50)),
        ms(percentile(&during, 99)),
    );
    for ws in [ows, aws, xws] {
        ws.close().await;
    }
    bench.stop(rt).await
}

fn report_events(
    label: &str,
    took: &[Duration],
    cpu_ms: f64,
    pg_ms: f64,
    backend: &str,
    rows: Option<f64>,
) {
    let mut sorted = took.to_vec();
    sorted.sort();
    let n = took.len().max(1) as f64;
    let pg = if backend == "postgres" {
        format!("  postgres CPU {:.2} ms/msg", pg_ms / n)
    } else {
        String::new()
    };
    let rows = rows.map_or(String::new(), |r| format!("  {r:.0} read-state rows/msg"));
    println!(
        "  {label}: {} msgs, relay CPU {:.2} ms/msg{pg}  EVENT->OK p50 {:.1} ms p99 {:.1} ms{rows}",
        took.len(),
        cpu_ms / n,
        ms(percentile(&sorted, 50)),
        ms(percentile(&sorted, 99)),
    );
}

/// Plain messages one at a time for `secs`: each EVENT->OK, sorted.
async fn timed_phase(
    ws: &mut WsClient,
    keys: &Keys,
    channel: &str,
    secs: u64,
) -> anyhow::Result<Vec<Duration>> {
    let end = Instant::now() + Duration::from_secs(secs);
    let mut took = Vec::new();
    while Instant::now() < end {
        let event = keys.sign(
            9,
            vec![tag(&["h", channel])],
            &uuid::Uuid::new_v4().to_string(),
            now(),
        );
        let began = Instant::now();
        let (ok, msg) = ws.publish(&event).await;
        if !ok {
            bail!("refused: {msg}");
        }
        took.push(began.elapsed());
    }
    took.sort();
    Ok(took)
}

#[derive(QueryableByName)]
struct TableStat {
    #[diesel(sql_type = diesel::sql_types::Text)]
    relname: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    seq_scan: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    seq_tup_read: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    idx_scan: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    idx_tup_fetch: i64,
}

#[derive(QueryableByName)]
struct IndexStat {
    #[diesel(sql_type = diesel::sql_types::Text)]
    indexrelname: String,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    idx_scan: i64,
    #[diesel(sql_type = diesel::sql_types::BigInt)]
    idx_tup_read: i64,
}

async fn plans_case(args: &Args, rt: &tokio::runtime::Runtime) -> anyhow::Result<()> {
    if args.database_url.is_none() {
        bail!("--case plans needs --database-url (PostgreSQL)");
    }
    // Migrations run at start; autovacuum is switched off right after, before the first
    // message, so every statement is planned on empty, never-analyzed tables.
    let bench = Bench::start(args, rt, !args.without_plugin).await?;
    let mut pg = diesel::PgConnection::establish(&bench.database_url)?;
    #[derive(QueryableByName)]
    struct Name {
        #[diesel(sql_type = diesel::sql_types::Text)]
        relname: String,
    }
    let tables: Vec<Name> = diesel::sql_query(
        "SELECT relname::TEXT AS relname FROM pg_stat_user_tables WHERE schemaname = 'public'",
    )
    .load(&mut pg)?;
    for t in &tables {
        diesel::sql_query(format!(
            "ALTER TABLE public.\"{}\" SET (autovacuum_enabled = off, toast.autovacuum_enabled = off)",
            t.relname
        ))
        .execute(&mut pg)?;
    }
    diesel::sql_query("SELECT pg_stat_reset()").execute(&mut pg)?;
    let author = Keys::generate();
    let owner = Keys::generate();
    let mut ows = bench.user(&owner).await?;
    let mut ws = bench.user(&author).await?;
    let ch = create_channel(&mut ows, &owner, "general").await?;
    join(&mut ws, &author, &ch).await?;
    let events = sign_all(
        (0..args.roots)
            .map(|_| (author.clone(), 9, vec![tag(&["h", &ch])], now()))
            .collect(),
    );
    println!(
        "{}: plans: {} top-level messages, autovacuum off for {} tables, read-state plugin {}",
        bench.backend,
        args.roots,
        tables.len(),
        if args.without_plugin { "off" } else { "on" }
    );
    let mut rates = Vec::new();
    for (i, block) in events.chunks(1_000).enumerate() {
        let began = Instant::now();
        flood(&mut ws, block, 50).await?;
        let rate = block.len() as f64 / began.elapsed().as_secs_f64();
        println!("  block {:>2}: {rate:.0} msgs/s", i + 1);
        rates.push(rate);
    }
    if let (Some(first), Some(last)) = (rates.first(), rates.last()) {
        println!(
            "  first 1k {first:.0} msgs/s, last 1k {last:.0} msgs/s (last/first {:.2})",
            last / first
        );
    }
    // Statistics are flushed within a second of a transaction's end.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let stats: Vec<TableStat> = diesel::sql_query(
        "SELECT relname::TEXT AS relname, COALESCE(seq_scan, 0) AS seq_scan, \
         COALESCE(seq_tup_read, 0) AS seq_tup_read, COALESCE(idx_scan, 0) AS idx_scan, \
         COALESCE(idx_tup_fetch, 0) AS idx_tup_fetch \
         FROM pg_stat_user_tables WHERE schemaname = 'public' ORDER BY seq_tup_read DESC",
    )
    .load(&mut pg)?;
    println!(
        "  table                          seq_scan   seq_tup_read     idx_scan  idx_tup_fetch"
    );
    for s in stats.iter().filter(|s| s.seq_scan > 0 || s.idx_scan > 0) {
        println!(
            "  {:<28} {:>10} {:>14} {:>12} {:>14}",
            s.relname, s.seq_scan, s.seq_tup_read, s.idx_scan, s.idx_tup_fetch
        );
    }
    let indexes: Vec<IndexStat> = diesel::sql_query(
        "SELECT indexrelname::TEXT AS indexrelname, COALESCE(idx_scan, 0) AS idx_scan, \
         COALESCE(idx_tup_read, 0) AS idx_tup_read FROM pg_stat_user_indexes \
         WHERE schemaname = 'public' AND idx_scan > 0 ORDER BY idx_tup_read DESC",
    )
    .load(&mut pg)?;
    println!("  index                                    idx_scan   idx_tup_read");
    for i in &indexes {
        println!(
            "  {:<38} {:>10} {:>14}",
            i.indexrelname, i.idx_scan, i.idx_tup_read
        );
    }
    ws.close().await;
    ows.close().await;
    bench.stop(rt).await
}
