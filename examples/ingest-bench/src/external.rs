//! External-process mode (`--relay-bin PATH`): the relay runs as real `buzz-relay`
//! processes (one, or several on one PostgreSQL database and one Redis), and this
//! process is only the client, as operators and outside benchmarks run it. Publishers
//! are spread over the processes round-robin. Each process's CPU time is read from
//! `/proc/<pid>/stat` before and after the run, so the figure printed is relay CPU per
//! accepted event, beside the bare-verify cost measured in this same run.

use crate::inprocess::{presign, publish_all};
use crate::Args;
use anyhow::{bail, Context};
use buzz_core::testkit::BenchStorage;
use buzz_nostr::keys::Keys;
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Clock ticks per second of `/proc` times (`CLK_TCK`, 100 on Linux).
const TICKS: f64 = 100.0;

/// One relay process.
struct RelayProcess {
    child: Child,
    addr: SocketAddr,
}

impl Drop for RelayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What one external run measured.
pub(super) struct ExternalFigures {
    pub(super) events: usize,
    pub(super) wall: Duration,
    /// CPU seconds of each relay process during the run.
    pub(super) relay_cpu: Vec<f64>,
}

pub(super) async fn run(
    args: &Args,
    relay_bin: &Path,
    processes: usize,
) -> anyhow::Result<ExternalFigures> {
    if processes > 1 && args.redis_url.is_none() {
        bail!(
            "--processes > 1 needs --redis-url (the processes share fan-out and the replay guard)"
        );
    }
    let storage = BenchStorage::new(args.database_url.as_deref()).await?;
    if processes > 1 && storage.backend != "postgres" {
        bail!("--processes > 1 needs a postgres:// --database-url");
    }
    let settings = &storage.settings;
    let key = Keys::generate().secret_hex();
    let prefix = format!("ingest-bench-{}", &Keys::generate().pubkey()[..12]);
    let access = std::fs::canonicalize(&settings.policies.access).context("access policy")?;
    let moderation =
        std::fs::canonicalize(&settings.policies.moderation).context("moderation policy")?;

    let mut relays: Vec<RelayProcess> = Vec::with_capacity(processes);
    for n in 0..processes {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("a free port")?
            .port();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let data_dir = settings.relay.data_dir.join(format!("relay-{n}"));
        std::fs::create_dir_all(&data_dir)?;
        let mut command = Command::new(relay_bin);
        command
            .env("BUZZ__SERVER__BIND", addr.to_string())
            // Several processes on one host: each its own metrics port.
            .env("BUZZ__METRICS__BIND", "127.0.0.1:0")
            .env("DATABASE_URL", &settings.storage.database_url)
            .env("BUZZ_RELAY_PRIVATE_KEY", &key)
            .env("BUZZ__RELAY__DATA_DIR", &data_dir)
            .env("BUZZ__POLICIES__ACCESS", &access)
            .env("BUZZ__POLICIES__MODERATION", &moderation)
            .env("BUZZ__STORAGE__REDIS_PREFIX", &prefix)
            // `RUST_LOG` passes through (e.g. `buzz_core::store::writer=debug` logs
            // every batch's size and time); warnings only by default.
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        if let Some(redis) = &args.redis_url {
            command.env("REDIS_URL", redis);
        }
        if let Some(inflight) = args.relay_inflight {
            command.env("BUZZ__LIMITS__MAX_INFLIGHT_EVENTS", inflight.to_string());
        }
        let child = command
            .spawn()
            .with_context(|| format!("starting {}", relay_bin.display()))?;
        let mut relay = RelayProcess { child, addr };
        // One at a time: the first applies the migrations.
        wait_listening(&mut relay).await?;
        relays.push(relay);
    }

    let per_publisher = args.events / args.publishers;
    let keys: Vec<Keys> = (0..args.publishers).map(|_| Keys::generate()).collect();
    let frames = presign(&keys, per_publisher, None);
    let inflight = args.inflight.unwrap_or(64);
    let mut conns = Vec::with_capacity(args.publishers);
    for i in 0..args.publishers {
        let url = format!("ws://{}/", relays[i % relays.len()].addr);
        let (ws, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .context("connecting a publisher")?;
        conns.push(ws);
    }

    let before: Vec<u64> = relays.iter().map(|r| cpu_ticks(r.child.id())).collect();
    let start = Instant::now();
    let (last_ok, failures) = publish_all(conns, frames, inflight, start).await?;
    let wall = last_ok - start;
    let relay_cpu = relays
        .iter()
        .zip(&before)
        .map(|(r, before)| cpu_ticks(r.child.id()).saturating_sub(*before) as f64 / TICKS)
        .collect();
    drop(relays);
    if !failures.is_empty() {
        bail!(
            "{} events were refused; first: {}",
            failures.len(),
            failures[0]
        );
    }
    Ok(ExternalFigures {
        events: per_publisher * args.publishers,
        wall,
        relay_cpu,
    })
}

/// Wait until the relay accepts connections (or exits).
async fn wait_listening(relay: &mut RelayProcess) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if tokio::net::TcpStream::connect(relay.addr).await.is_ok() {
            return Ok(());
        }
        if let Some(status) = relay.child.try_wait()? {
            bail!("the relay exited at start: {status}");
        }
        if Instant::now() > deadline {
            bail!("the relay did not listen within 60 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// CPU time of one bare BIP-340 verification, in µs, measured as this thread's CPU time
/// (not wall time: on a shared box the wall clock also counts time the thread waited
/// for a core, which the relay's `/proc` CPU figure does not).
pub(super) fn verify_cpu_micros(n: usize) -> f64 {
    let keys: Vec<Keys> = (0..16).map(|_| Keys::generate()).collect();
    let t = buzz_core::testkit::now();
    let events: Vec<_> = (0..n.max(1))
        .map(|i| keys[i % keys.len()].sign(1, vec![], &format!("verify me #{i}"), t))
        .collect();
    let before = thread_ticks();
    for event in &events {
        if buzz_nostr::event::verify_signature(std::hint::black_box(event)).is_err() {
            return f64::NAN;
        }
    }
    let ticks = thread_ticks().saturating_sub(before);
    ticks as f64 / TICKS * 1e6 / events.len() as f64
}

fn thread_ticks() -> u64 {
    stat_ticks("/proc/thread-self/stat")
}

/// utime + stime of process `pid`, in clock ticks (0 when unreadable: not Linux).
fn cpu_ticks(pid: u32) -> u64 {
    stat_ticks(&format!("/proc/{pid}/stat"))
}

/// utime + stime from a `/proc` `stat` file, in clock ticks (0 when unreadable).
fn stat_ticks(path: &str) -> u64 {
    let Ok(stat) = std::fs::read_to_string(path) else {
        return 0;
    };
    let Some(close) = stat.rfind(')') else {
        return 0;
    };
    let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // After the comm: state is field 3; utime and stime are fields 14 and 15.
    field(11) + field(12)
}
