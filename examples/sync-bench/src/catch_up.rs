//! The two ways a client catches up, each over a fresh authenticated WebSocket: NIP-77
//! reconciliation then a REQ by id for what it lacks, or paging the whole channel.

use crate::client::{Counted, CpuClock};
use crate::{Cost, PAGE};
use negentropy::{Id, Negentropy, NegentropyStorageVector};
use serde_json::json;
use std::collections::HashSet;
use std::time::{Duration, Instant};

pub(crate) async fn catch_up_by_sync(
    ws: &mut Counted,
    channel: &str,
    held: &[(u64, String)],
    missing: &HashSet<String>,
    run: usize,
) -> anyhow::Result<Cost> {
    // The client's own fingerprint is built before the clock starts: it keeps it.
    let mut storage = NegentropyStorageVector::with_capacity(held.len());
    for (at, id) in held {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(id, &mut bytes)?;
        storage.insert(*at, Id::from_byte_array(bytes))?;
    }
    storage.seal()?;
    let mut engine = Negentropy::owned(storage, 0)?;
    let first = engine.initiate()?;
    ws.reset();
    let cpu = CpuClock::start();
    let started = Instant::now();
    let sub = format!("sync{run}");
    ws.send(&json!(["NEG-OPEN", sub, {"kinds": [9], "#h": [channel]}, hex::encode(first)]))
        .await?;
    let mut need: Vec<String> = Vec::new();
    let mut rounds = 0;
    loop {
        let answer = ws.recv_for(&sub).await?;
        if answer[0] != "NEG-MSG" {
            anyhow::bail!("relay answered {answer}");
        }
        rounds += 1;
        let bytes = hex::decode(answer[2].as_str().unwrap_or_default())?;
        let (mut have, mut needed) = (Vec::new(), Vec::new());
        let next = engine.reconcile_with_ids(&bytes, &mut have, &mut needed)?;
        need.extend(needed.iter().map(|id| hex::encode(id.as_bytes())));
        match next {
            Some(next) => ws.send(&json!(["NEG-MSG", sub, hex::encode(next)])).await?,
            None => break,
        }
    }
    let reconcile_time = started.elapsed();
    let relay_cpu = cpu.relay();
    ws.send(&json!(["NEG-CLOSE", sub])).await?;
    let learned: HashSet<String> = need.iter().cloned().collect();
    anyhow::ensure!(
        learned == *missing,
        "NIP-77 learned {} ids, not the {} missing",
        learned.len(),
        missing.len()
    );
    // Fetch what it lacks, every REQ in flight at once.
    let subs: Vec<String> = need
        .chunks(PAGE)
        .enumerate()
        .map(|(i, _)| format!("get{run}-{i}"))
        .collect();
    for (ids, sub) in need.chunks(PAGE).zip(&subs) {
        ws.send(&json!(["REQ", sub, {"ids": ids}])).await?;
    }
    let mut fetched = 0;
    let mut open: HashSet<&String> = subs.iter().collect();
    while !open.is_empty() {
        let message = ws.recv().await?;
        match message[0].as_str() {
            Some("EVENT") => fetched += 1,
            Some("EOSE") => {
                let sub = message[1].as_str().unwrap_or_default().to_owned();
                open.retain(|s| **s != sub);
                ws.send(&json!(["CLOSE", sub])).await?;
            }
            Some("CLOSED") => anyhow::bail!("REQ refused: {message}"),
            _ => {}
        }
    }
    anyhow::ensure!(
        fetched == missing.len(),
        "fetched {fetched} of {}",
        missing.len()
    );
    Ok(Cost {
        sent: ws.sent,
        received: ws.received,
        time: started.elapsed(),
        relay_cpu,
        rounds,
        reconcile_time,
        fetched,
    })
}

pub(crate) async fn full_download(
    ws: &mut Counted,
    channel: &str,
    total: usize,
    run: usize,
) -> anyhow::Result<Cost> {
    ws.reset();
    let cpu = CpuClock::start();
    let started = Instant::now();
    let mut seen = 0;
    let mut until: Option<i64> = None;
    let mut pages = 0;
    loop {
        let sub = format!("all{run}-{pages}");
        let mut filter = json!({"kinds": [9], "#h": [channel], "limit": PAGE});
        if let Some(until) = until {
            filter["until"] = json!(until);
        }
        ws.send(&json!(["REQ", sub, filter])).await?;
        pages += 1;
        let mut page = 0;
        loop {
            let message = ws.recv().await?;
            match message[0].as_str() {
                Some("EVENT") if message[1] == sub.as_str() => {
                    page += 1;
                    let at = message[2]["created_at"].as_i64().unwrap_or(0);
                    until = Some(until.map_or(at - 1, |u| u.min(at - 1)));
                }
                Some("EOSE") if message[1] == sub.as_str() => break,
                Some("CLOSED") => anyhow::bail!("REQ refused: {message}"),
                _ => {}
            }
        }
        ws.send(&json!(["CLOSE", sub])).await?;
        seen += page;
        if page < PAGE {
            break;
        }
    }
    anyhow::ensure!(seen == total, "the full download saw {seen} of {total}");
    Ok(Cost {
        sent: ws.sent,
        received: ws.received,
        time: started.elapsed(),
        relay_cpu: cpu.relay(),
        rounds: pages,
        reconcile_time: Duration::ZERO,
        fetched: 0,
    })
}
