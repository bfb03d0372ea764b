//! `history-attack`: what many concurrent artifact history queries cost a relay when one
//! artifact has many large revisions (issue #21, item 3) — the relay's peak RSS, each
//! answer's status and size.
//!
//! The relay runs as a real `buzz-relay` process (`--relay-bin`), so its memory is read
//! from `/proc/<pid>/status` apart from this client's; answers are read as a stream and
//! only counted, never held. One member writes `--revisions` updates of about
//! `--content-bytes` each on one artifact (over WebSocket, each naming the previous one),
//! then `--concurrent` clients ask for its history at once over signed `POST /query`:
//! the whole history in one request (`{"artifact":"history","#d":[d]}`), and, with
//! `--page-limit N`, page by page (`"limit": N`, then `"after": <last revision id>`),
//! each client checking it got every revision exactly once, in order.
//!
//! ```text
//! cargo build --release --bin buzz-relay
//! cargo run --release -p buzz-artifact-bench --bin history-attack -- \
//!     --relay-bin target/release/buzz-relay [--revisions 1000] [--content-bytes 260000] \
//!     [--concurrent 12] [--page-limit 16] [--plain] [--database-url URL]
//! ```

use anyhow::{bail, Context};
use buzz_core::testkit::{now, BenchStorage, WsClient};
use buzz_nostr::keys::Keys;
use buzz_nostr::nip98::authorization_header;
use clap::Parser;
use futures_util::future::join_all;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "history-attack",
    about = "relay RSS under concurrent artifact history queries"
)]
struct Args {
    /// The `buzz-relay` binary to run.
    #[arg(long)]
    relay_bin: PathBuf,
    #[arg(long, default_value_t = 1_000)]
    revisions: usize,
    /// Content bytes of each revision (the relay's default content limit is 262,144).
    #[arg(long, default_value_t = 260_000)]
    content_bytes: usize,
    #[arg(long, default_value_t = 12)]
    concurrent: usize,
    /// Also page the history with this `limit` (and `after`), all clients at once.
    #[arg(long)]
    page_limit: Option<usize>,
    /// sqlite://PATH, or a PostgreSQL admin URL (a scratch database is made).
    #[arg(long)]
    database_url: Option<String>,
    /// Also send the same number of plain NIP-01 filters for the revisions
    /// (`{"kinds":[45010],"#d":[d]}`, served by core, not by the artifact queries).
    #[arg(long)]
    plain: bool,
}

/// The relay child, killed when dropped.
struct RelayProcess {
    child: Child,
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A `/proc/<pid>/status` field in MiB (0 when unreadable).
fn status_mib(pid: u32, field: &str) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with(field)).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|kb| kb.parse::<f64>().ok())
            })
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// Reset the process's peak RSS (`VmHWM`) to its current RSS (Linux `clear_refs` 5).
fn reset_peak(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

fn tag(name: &str, value: &str) -> Vec<String> {
    vec![name.to_owned(), value.to_owned()]
}

/// One signed `POST /query`, its body read as a stream: (status, bytes, the body when
/// it is at most 64 MiB — an error or a page — else `None`).
async fn query(
    client: &reqwest::Client,
    addr: SocketAddr,
    host: &str,
    keys: &Keys,
    filter: &Value,
) -> anyhow::Result<(u16, usize, Option<String>)> {
    let body = json!([filter]).to_string();
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let auth = authorization_header(
        keys,
        "POST",
        &format!("http://{host}/query"),
        Some(body.as_bytes()),
        now(),
        Some(&nonce),
    );
    let mut resp = client
        .post(format!("http://{addr}/query"))
        .header("host", host)
        .header("content-type", "application/json")
        .header("authorization", auth)
        .body(body)
        .send()
        .await?;
    let status = resp.status().as_u16();
    const KEEP: usize = 64 * 1024 * 1024;
    let mut bytes = 0usize;
    let mut kept = Vec::new();
    while let Some(chunk) = resp.chunk().await? {
        bytes += chunk.len();
        if bytes <= KEEP {
            kept.extend_from_slice(&chunk);
        } else if !kept.is_empty() {
            kept = Vec::new();
        }
    }
    let text = (bytes <= KEEP).then(|| String::from_utf8_lossy(&kept).into_owned());
    Ok((status, bytes, text))
}

/// Ids of the events in a JSON array body.
fn event_ids(text: &str) -> anyhow::Result<Vec<String>> {
    let value: Value = serde_json::from_str(text).context("answer JSON")?;
    Ok(value
        .as_array()
        .context("an array")?
        .iter()
        .filter_map(|e| e["id"].as_str().map(str::to_owned))
        .collect())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let command: Vec<String> = std::env::args().collect();
    println!("command: {}", command.join(" "));
    let storage = BenchStorage::new(args.database_url.as_deref()).await?;
    let settings = &storage.settings;
    let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    let access = std::fs::canonicalize(&settings.policies.access).context("access policy")?;
    let moderation =
        std::fs::canonicalize(&settings.policies.moderation).context("moderation policy")?;
    let child = Command::new(&args.relay_bin)
        .env("BUZZ__SERVER__BIND", addr.to_string())
        .env("BUZZ__METRICS__BIND", "127.0.0.1:0")
        .env("DATABASE_URL", &settings.storage.database_url)
        .env("BUZZ__RELAY__DATA_DIR", &settings.relay.data_dir)
        .env("BUZZ__POLICIES__ACCESS", &access)
        .env("BUZZ__POLICIES__MODERATION", &moderation)
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
        )
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .with_context(|| format!("starting {}", args.relay_bin.display()))?;
    let mut relay = RelayProcess { child };
    let started = Instant::now();
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        if let Some(status) = relay.child.try_wait()? {
            bail!("the relay exited at start: {status}");
        }
        if started.elapsed() > Duration::from_secs(60) {
            bail!("the relay did not listen within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let pid = relay.child.id();
    let host = format!("localhost:{port}");
    println!(
        "relay {} on {addr} ({}), pid {pid}",
        args.relay_bin.display(),
        storage.backend
    );

    // One member, one channel, one artifact, many large revisions.
    let member = Keys::generate();
    let mut ws = WsClient::connect(addr, &host).await?;
    if !ws.auth(&member).await.0 {
        bail!("AUTH refused");
    }
    let channel = uuid::Uuid::new_v4().to_string();
    let (ok, msg) = ws
        .publish(&member.sign(
            9007,
            vec![tag("h", &channel), tag("name", "big")],
            "",
            now(),
        ))
        .await;
    if !ok {
        bail!("creating the channel: {msg}");
    }
    let d = uuid::Uuid::new_v4().to_string();
    let envelope = |op: &str, prev: Option<&str>| {
        let mut tags = vec![
            tag("ar", "1"),
            tag("d", &d),
            tag("h", &channel),
            tag("type", "buzz.doc"),
            tag("title", "a large document"),
            tag("op", op),
        ];
        if let Some(prev) = prev {
            tags.push(tag("prev", prev));
        }
        tags
    };
    let filler: String = "lorem ipsum dolor sit amet "
        .chars()
        .cycle()
        .take(args.content_bytes.saturating_sub(32))
        .collect();
    let seeding = Instant::now();
    let mut prev = member.sign(45_010, envelope("create", None), "{}", now());
    let (ok, msg) = ws.publish(&prev).await;
    if !ok {
        bail!("creating the artifact: {msg}");
    }
    let mut written = vec![prev.id.clone()];
    for i in 0..args.revisions {
        let content = json!({"v": i, "text": filler}).to_string();
        let next = member.sign(45_010, envelope("update", Some(&prev.id)), &content, now());
        let (ok, msg) = ws.publish(&next).await;
        if !ok {
            bail!("revision {i}: {msg}");
        }
        written.push(next.id.clone());
        prev = next;
    }
    println!(
        "  wrote {} revisions of {} content bytes in {:.1} s; relay RSS {:.0} MiB (peak so far {:.0} MiB)",
        args.revisions,
        args.content_bytes,
        seeding.elapsed().as_secs_f64(),
        status_mib(pid, "VmRSS:"),
        status_mib(pid, "VmHWM:")
    );

    let client = reqwest::Client::new();
    let sampling = Arc::new(AtomicBool::new(true));
    let sampled_peak_kib = Arc::new(AtomicU64::new(0));
    let sampler = {
        let (sampling, peak) = (sampling.clone(), sampled_peak_kib.clone());
        tokio::spawn(async move {
            while sampling.load(Ordering::Relaxed) {
                let kib = (status_mib(pid, "VmRSS:") * 1024.0) as u64;
                peak.fetch_max(kib, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };

    // The attack: every client asks for the whole history at once.
    let reset = reset_peak(pid);
    let before = status_mib(pid, "VmRSS:");
    let whole = json!({"artifact": "history", "#d": [d]});
    let began = Instant::now();
    let answers =
        join_all((0..args.concurrent).map(|_| query(&client, addr, &host, &member, &whole))).await;
    let took = began.elapsed();
    let mut by_status: BTreeMap<u16, (usize, usize, Option<String>)> = BTreeMap::new();
    for answer in answers {
        let (status, bytes, text) = answer?;
        let entry = by_status.entry(status).or_insert((0, 0, None));
        entry.0 += 1;
        entry.1 = entry.1.max(bytes);
        if entry.2.is_none() && status != 200 {
            entry.2 = text;
        }
    }
    println!(
        "  {} concurrent whole-history queries in {:.2} s; relay RSS before {before:.0} MiB, peak {:.0} MiB{}",
        args.concurrent,
        took.as_secs_f64(),
        status_mib(pid, "VmHWM:"),
        if reset { "" } else { " (VmHWM not reset: peak since start)" }
    );
    for (status, (count, bytes, text)) in &by_status {
        println!(
            "    {count} × HTTP {status}, largest body {bytes} bytes{}",
            text.as_deref()
                .map(|t| format!(": {}", t.chars().take(240).collect::<String>()))
                .unwrap_or_default()
        );
    }

    if let Some(limit) = args.page_limit {
        let reset = reset_peak(pid);
        let before = status_mib(pid, "VmRSS:");
        let began = Instant::now();
        let runs = join_all((0..args.concurrent).map(|_| {
            let (client, host, member, d) = (&client, &host, &member, &d);
            async move {
                let mut got: Vec<String> = Vec::new();
                let (mut pages, mut retries) = (0usize, 0usize);
                loop {
                    let mut filter = json!({"artifact": "history", "#d": [d], "limit": limit});
                    if let Some(last) = got.last() {
                        filter["after"] = json!(last);
                    }
                    let (status, _, text) = query(client, addr, host, member, &filter).await?;
                    let text = text.context("a page over 64 MiB")?;
                    match status {
                        200 => {}
                        503 => {
                            retries += 1;
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                        other => bail!("page {pages}: HTTP {other}: {text}"),
                    }
                    let ids = event_ids(&text)?;
                    pages += 1;
                    let done = ids.len() < limit;
                    got.extend(ids);
                    if done {
                        return Ok::<_, anyhow::Error>((got, pages, retries));
                    }
                }
            }
        }))
        .await;
        let took = began.elapsed();
        let (mut pages, mut retries) = (0, 0);
        for run in runs {
            let (got, p, r) = run?;
            if got != written {
                bail!(
                    "a paged history differs from what was written ({} of {} revisions)",
                    got.len(),
                    written.len()
                );
            }
            pages += p;
            retries += r;
        }
        println!(
            "  {} concurrent paged histories (limit {limit}): each all {} revisions in order, {pages} pages, {retries} 503 retries, {:.2} s; relay RSS before {before:.0} MiB, peak {:.0} MiB{}",
            args.concurrent,
            written.len(),
            took.as_secs_f64(),
            status_mib(pid, "VmHWM:"),
            if reset { "" } else { " (VmHWM not reset)" }
        );
    }
    if args.plain {
        let reset = reset_peak(pid);
        let before = status_mib(pid, "VmRSS:");
        let plain = json!({"kinds": [45_010], "#d": [d]});
        let began = Instant::now();
        let answers =
            join_all((0..args.concurrent).map(|_| query(&client, addr, &host, &member, &plain)))
                .await;
        let mut statuses: BTreeMap<u16, (usize, usize)> = BTreeMap::new();
        for answer in answers {
            let (status, bytes, _) = answer?;
            let entry = statuses.entry(status).or_insert((0, 0));
            entry.0 += 1;
            entry.1 = entry.1.max(bytes);
        }
        println!(
            "  {} concurrent plain kind-45010 #d filters (core's path) in {:.2} s: {statuses:?} (status: count, largest body); relay RSS before {before:.0} MiB, peak {:.0} MiB{}",
            args.concurrent,
            began.elapsed().as_secs_f64(),
            status_mib(pid, "VmHWM:"),
            if reset { "" } else { " (VmHWM not reset)" }
        );
    }
    sampling.store(false, Ordering::Relaxed);
    let _ = sampler.await;
    println!(
        "  highest sampled relay RSS (every 10 ms) over the queries: {:.0} MiB",
        sampled_peak_kib.load(Ordering::Relaxed) as f64 / 1024.0
    );
    drop(relay);
    Ok(())
}
