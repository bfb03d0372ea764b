//! How much the relay's memory grows, and how fast it goes, while it receives and then
//! serves large blobs: a relay with the media plugin on port 0 (SQLite, a temporary
//! directory), and clients in the same process that generate each blob chunk by chunk
//! (they never hold one) and write it to a plain TCP socket, `concurrent` at once. A
//! sampler thread reads this process's resident set (`VmRSS`) every 5 ms; the figure is
//! the peak during the transfers minus the resident set just before them. Prints, never
//! asserts (docs/plugins/media.md has the figures).
//!
//! `cargo run --release -p buzz-media --example upload_memory -- [MiB] [concurrent]
//! [s3 endpoint]` (default 100 MiB, 1, the fs store). With an endpoint (a moto or MinIO
//! server without auth checks), bucket `media-bench` is created there and used.

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

/// Chunk `i` of blob `seed`: cheap, deterministic, not compressible to nothing.
fn chunk(seed: usize, i: usize, buf: &mut [u8]) {
    for (j, b) in buf.iter_mut().enumerate() {
        *b = ((seed * 131 + i * 31 + j * 7) % 251) as u8;
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
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mib: usize = args.first().map(|a| a.parse()).transpose()?.unwrap_or(100);
    let concurrent: usize = args.get(1).map(|a| a.parse()).transpose()?.unwrap_or(1);
    let endpoint = args.get(2).cloned();
    let size = mib * 1024 * 1024;
    let chunks = size.div_ceil(CHUNK);
    if let Some(endpoint) = &endpoint {
        let created = reqwest::Client::new()
            .put(format!("{endpoint}/media-bench"))
            .send()
            .await?;
        anyhow::ensure!(
            created.status().is_success(),
            "creating the bucket: {}",
            created.status()
        );
    }
    let relay = TestRelay::start_with(
        TestBackend::Sqlite,
        "upload_memory",
        |s| {
            if let Some(section) = s.plugins.get_mut("media") {
                let options = &mut section.options;
                options.insert("max_blob_bytes".into(), (size as u64).into());
                options.insert("quota_bytes_per_pubkey".into(), 0.into());
                if let Some(endpoint) = endpoint {
                    for (key, value) in [
                        ("store", "s3"),
                        ("endpoint", endpoint.as_str()),
                        ("bucket", "media-bench"),
                        ("access_key_id", "bench"),
                        ("secret_access_key", "bench"),
                    ] {
                        options.insert(key.into(), value.into());
                    }
                    options.insert("path_style".into(), true.into());
                }
            }
        },
        vec![PluginEntry::of::<MediaPlugin>()],
    )
    .await
    .ok_or_else(|| anyhow::anyhow!("the relay did not start"))?;
    let keys = Keys::generate();
    let (addr, host) = (relay.addr, relay.host());

    // Hashes first, generating each blob once without keeping it.
    let hashes: Vec<String> = (0..concurrent)
        .map(|seed| {
            let mut hasher = Sha256::new();
            let mut buf = vec![0u8; CHUNK];
            for i in 0..chunks {
                let n = CHUNK.min(size - i * CHUNK);
                chunk(seed, i, &mut buf[..n]);
                hasher.update(&buf[..n]);
            }
            hex::encode(hasher.finalize())
        })
        .collect();
    let token = {
        use base64::Engine;
        let mut tags = vec![
            tag(&["t", "upload"]),
            tag(&["t", "get"]),
            tag(&["expiration", &(now() + 3600).to_string()]),
        ];
        tags.extend(hashes.iter().map(|h| tag(&["x", h])));
        let event = keys.sign(24242, tags, "upload_memory", now() - 1);
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!("Nostr {}", engine.encode(serde_json::to_vec(&event)?))
    };

    // Warm up (first request, first statements) so the baseline is a running relay's.
    let _ = send(addr, &host, &token, "PUT /upload", 4, |_, b| {
        b.copy_from_slice(b"warm")
    })
    .await;

    let uploads = futures_util::future::try_join_all((0..concurrent).map(|seed| {
        let (host, token) = (host.clone(), token.clone());
        async move {
            let status = send(addr, &host, &token, "PUT /upload", size, move |i, b| {
                chunk(seed, i, b)
            })
            .await?;
            anyhow::ensure!(
                status.starts_with("HTTP/1.1 201"),
                "upload answered {status}"
            );
            Ok(())
        }
    }));
    let (grew, took) = peak_growth(async { uploads.await.map(|_| ()) }).await?;
    report("upload", mib, concurrent, took, grew);

    let downloads = futures_util::future::try_join_all(
        hashes.iter().map(|sha| get(addr, &host, &token, sha, size)),
    );
    let (grew, took) = peak_growth(async { downloads.await.map(|_| ()) }).await?;
    report("download", mib, concurrent, took, grew);
    relay.stop().await;
    Ok(())
}

fn report(what: &str, mib: usize, concurrent: usize, took: Duration, grew: u64) {
    let total = (mib * concurrent) as f64 * 1048576.0;
    println!(
        "{what} {concurrent} x {mib} MiB: {:.1} s, {:.0} MB/s together, \
         relay+client RSS grew {:.1} MiB at peak",
        took.as_secs_f64(),
        total / 1e6 / took.as_secs_f64(),
        grew as f64 / 1048576.0
    );
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
