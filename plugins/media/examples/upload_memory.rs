//! How much the relay's memory grows while it receives and then serves one large blob:
//! a relay with the media plugin on port 0 (SQLite, a temporary directory), and a client
//! in the same process that generates the blob chunk by chunk (it never holds it) and
//! writes it to a plain TCP socket. A sampler thread reads this process's resident set
//! (`VmRSS`) every 5 ms; the figure is the peak during the transfer minus the resident
//! set just before it. Prints, never asserts (docs/plugins/media.md has the figures).
//!
//! `cargo run --release -p buzz-media --example upload_memory -- [MiB]` (default 100).

use buzz_core::plugin::PluginEntry;
use buzz_core::testkit::{now, tag, TestBackend, TestRelay};
use buzz_media::MediaPlugin;
use buzz_nostr::keys::Keys;
use sha2::{Digest, Sha256};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CHUNK: usize = 64 * 1024;

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// Chunk `i` of the blob: cheap, deterministic, not compressible to nothing.
fn chunk(i: usize, buf: &mut [u8]) {
    for (j, b) in buf.iter_mut().enumerate() {
        *b = ((i * 31 + j * 7) % 251) as u8;
    }
}

/// Peak resident set while `work` runs, minus the resident set before it.
async fn peak_growth<F: std::future::Future<Output = anyhow::Result<()>>>(
    work: F,
) -> anyhow::Result<(u64, Duration)> {
    let (stop, peak) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let before = rss_bytes();
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_bytes(), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let started = Instant::now();
    let outcome = work.await;
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let _ = sampler.join();
    outcome?;
    Ok((peak.load(Ordering::Relaxed).saturating_sub(before), took))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mib: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(100);
    let size = mib * 1024 * 1024;
    let chunks = size / CHUNK;
    let relay = TestRelay::start_with(
        TestBackend::Sqlite,
        "upload_memory",
        |s| {
            if let Some(section) = s.plugins.get_mut("media") {
                section
                    .options
                    .insert("max_blob_bytes".into(), (size as u64).into());
            }
        },
        vec![PluginEntry::of::<MediaPlugin>()],
    )
    .await
    .ok_or_else(|| anyhow::anyhow!("the relay did not start"))?;
    let keys = Keys::generate();

    // The hash first, generating the blob once without keeping it.
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; CHUNK];
    for i in 0..chunks {
        chunk(i, &mut buf);
        hasher.update(&buf);
    }
    let sha = hex::encode(hasher.finalize());
    let token = {
        use base64::Engine;
        let tags = vec![
            tag(&["t", "upload"]),
            tag(&["t", "get"]),
            tag(&["x", &sha]),
            tag(&["expiration", &(now() + 3600).to_string()]),
        ];
        let event = keys.sign(24242, tags, "upload_memory", now() - 1);
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!("Nostr {}", engine.encode(serde_json::to_vec(&event)?))
    };
    let (addr, host) = (relay.addr, relay.host());

    // Warm up (first request, first statements) so the baseline is a running relay's.
    let warm = send(addr, &host, &token, "PUT /upload", b"warm".len(), |_, b| {
        b.copy_from_slice(b"warm")
    });
    let _ = warm.await;

    let upload = send(addr, &host, &token, "PUT /upload", size, move |i, b| {
        chunk(i, b)
    });
    let (grew, took) = peak_growth(async {
        let status = upload.await?;
        anyhow::ensure!(
            status.starts_with("HTTP/1.1 201"),
            "upload answered {status}"
        );
        Ok(())
    })
    .await?;
    println!(
        "upload {mib} MiB: {:.1} s, {:.0} MB/s, relay+client RSS grew {:.1} MiB at peak",
        took.as_secs_f64(),
        size as f64 / 1e6 / took.as_secs_f64(),
        grew as f64 / 1048576.0
    );

    let download = get(addr, &host, &token, &sha, size);
    let (grew, took) = peak_growth(download).await?;
    println!(
        "download {mib} MiB: {:.1} s, {:.0} MB/s, relay+client RSS grew {:.1} MiB at peak",
        took.as_secs_f64(),
        size as f64 / 1e6 / took.as_secs_f64(),
        grew as f64 / 1048576.0
    );
    relay.stop().await;
    Ok(())
}

/// Send a request with a body of `len` bytes made chunk by chunk by `fill`; the status line.
async fn send(
    addr: std::net::SocketAddr,
    host: &str,
    token: &str,
    line: &str,
    len: usize,
    fill: impl Fn(usize, &mut [u8]),
) -> anyhow::Result<String> {
    let mut socket = tokio::net::TcpStream::connect(addr).await?;
    let head = format!(
        "{line} HTTP/1.1\r\nHost: {host}\r\nAuthorization: {token}\r\n\
         Content-Length: {len}\r\nConnection: close\r\n\r\n"
    );
    socket.write_all(head.as_bytes()).await?;
    let mut buf = vec![0u8; CHUNK.min(len)];
    let mut sent = 0;
    let mut i = 0;
    while sent < len {
        let n = CHUNK.min(len - sent);
        fill(i, &mut buf[..n]);
        socket.write_all(&buf[..n]).await?;
        sent += n;
        i += 1;
    }
    let mut answer = vec![0u8; 4096];
    let n = socket.read(&mut answer).await?;
    Ok(String::from_utf8_lossy(&answer[..n])
        .lines()
        .next()
        .unwrap_or_default()
        .to_owned())
}

/// Download the blob, counting (not keeping) its bytes.
async fn get(
    addr: std::net::SocketAddr,
    host: &str,
    token: &str,
    sha: &str,
    size: usize,
) -> anyhow::Result<()> {
    let mut socket = tokio::net::TcpStream::connect(addr).await?;
    let head = format!(
        "GET /{sha} HTTP/1.1\r\nHost: {host}\r\nAuthorization: {token}\r\nConnection: close\r\n\r\n"
    );
    socket.write_all(head.as_bytes()).await?;
    let mut buf = vec![0u8; CHUNK];
    let mut total = 0usize;
    loop {
        let n = socket.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        total += n;
    }
    anyhow::ensure!(total > size, "downloaded {total} bytes of {size}");
    Ok(())
}
