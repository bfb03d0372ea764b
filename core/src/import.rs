//! `buzz-relay import` (the one storage command that goes through the relay's pipelines
//! rather than SQL alone; export, copy and backup are `store::transfer`): JSON lines of signed events (our own export, strfry's or
//! nostr-rs-relay's: plain NIP-01 event objects) stored through the ingest pipeline as
//! the community owner's import.
//!
//! Three stages overlap: a thread reads lines, blocking-pool tasks parse and verify a
//! chunk each (shape, id, signature: the CPU), and this task hands the events to ingest
//! in file order. Ingest queues each write behind the ones before it without waiting
//! for its commit, so the writer commits thousands at a time; an event whose checks read
//! what earlier ones wrote (`Ingest::import_waits_for_earlier`: deletions, and kinds a
//! plugin's hook reads other rows for) first waits until every earlier one has
//! committed. Every event
//! is its own job in the group transaction, so a failing one rolls back alone: a line
//! is stored whole or not at all.
//!
//! Relay-derived events are taken one way only, never both: relay-authored kinds
//! (39000–39002, plugins' reserved kinds) are skipped and derived anew; the relay's
//! 9000/9001 after a join or leave are ordinary kinds, imported from the file, and an
//! imported join or leave derives none (`WriteCtx::imported`).

use crate::ctx::{ConnCtx, Transport};
use crate::error::Reason;
use crate::ingest::{CheckedEvent, PendingImport};
use crate::relay::OfflineRelay;
use crate::store::transfer::Progress;
use buzz_nostr::event::{Event, EventLimits};
use buzz_nostr::host::normalize_host;
use std::collections::VecDeque;
use std::io::BufRead;

/// Lines parsed and verified per blocking task.
const CHUNK: usize = 1_024;
/// Chunks verified ahead of the one being stored.
const CHUNKS_AHEAD: usize = 4;
/// Writes queued and not yet answered (the writer's batches form from these).
const WINDOW: usize = 4_096;
/// Longest line read; a longer one is reported and skipped without being held.
pub const MAX_LINE_BYTES: usize = 4 * 1024 * 1024;

/// What an import did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    /// Non-empty lines read.
    pub lines: u64,
    pub imported: u64,
    /// Already stored (or superseded by a newer version of the same replaceable event).
    pub duplicates: u64,
    /// Relay-signed state of the relay that exported the file (group state, markers):
    /// skipped, this relay derives its own from the events they describe.
    pub relay_authored: u64,
    /// Lines refused, each reported with its number.
    pub invalid: u64,
}

/// One line as read: its number and text, or why it cannot be used.
type Line = (u64, Result<String, String>);

/// A line after parsing and verification.
type Verified = (u64, Result<CheckedEvent, String>);

/// Read `input` in chunks of lines on a thread of its own.
fn spawn_reader(
    mut input: Box<dyn BufRead + Send>,
    progress_bytes: std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> tokio::sync::mpsc::Receiver<Result<Vec<Line>, String>> {
    let (tx, rx) = tokio::sync::mpsc::channel(CHUNKS_AHEAD);
    std::thread::spawn(move || {
        let mut number = 0u64;
        let mut chunk = Vec::with_capacity(CHUNK);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let read = std::io::Read::take(&mut input, MAX_LINE_BYTES as u64 + 1)
                .read_until(b'\n', &mut buf);
            let n = match read {
                Ok(n) => n,
                Err(e) => {
                    let _ = tx.blocking_send(Err(format!("reading the input: {e}")));
                    return;
                }
            };
            if n == 0 {
                break;
            }
            progress_bytes.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
            number += 1;
            if buf.len() > MAX_LINE_BYTES && buf.last() != Some(&b'\n') {
                // Skip the rest of the line without holding it.
                loop {
                    let mut rest = Vec::new();
                    match std::io::Read::take(&mut input, 64 * 1024).read_until(b'\n', &mut rest) {
                        Ok(0) => break,
                        Ok(m) => {
                            progress_bytes
                                .fetch_add(m as u64, std::sync::atomic::Ordering::Relaxed);
                            if rest.last() == Some(&b'\n') {
                                break;
                            }
                        }
                        Err(_) => break,
                    }
                }
                chunk.push((
                    number,
                    Err(format!("invalid: line longer than {MAX_LINE_BYTES} bytes")),
                ));
            } else {
                match std::str::from_utf8(&buf) {
                    // An empty line is no event and no error (it keeps its number).
                    Ok(text) if text.trim().is_empty() => continue,
                    Ok(text) => chunk.push((number, Ok(text.trim().to_owned()))),
                    Err(_) => chunk.push((number, Err("invalid: line is not UTF-8".into()))),
                }
            }
            if chunk.len() == CHUNK {
                let full = std::mem::replace(&mut chunk, Vec::with_capacity(CHUNK));
                if tx.blocking_send(Ok(full)).is_err() {
                    return;
                }
            }
        }
        if !chunk.is_empty() {
            let _ = tx.blocking_send(Ok(chunk));
        }
    });
    rx
}

/// Parse and verify one chunk (a blocking task).
fn verify(limits: EventLimits, now_secs: i64, lines: Vec<Line>) -> Vec<Verified> {
    lines
        .into_iter()
        .map(|(number, line)| {
            let checked = line.and_then(|text| {
                let event: Event = serde_json::from_str(&text)
                    .map_err(|e| format!("invalid: not a NIP-01 event object: {e}"))?;
                CheckedEvent::check(&limits, event, now_secs).map_err(|r| r.wire_text())
            });
            (number, checked)
        })
        .collect()
}

/// Counts, and the reporting of refused lines.
struct Tally<'a> {
    report: ImportReport,
    refused: &'a (dyn Fn(u64, &str) + Sync),
}

impl Tally<'_> {
    fn refuse(&mut self, number: u64, why: &str) {
        self.report.invalid += 1;
        (self.refused)(number, why);
    }

    fn answered(&mut self, number: u64, answer: Result<crate::ingest::Accepted, Reason>) {
        match answer {
            Ok(accepted) if accepted.message.starts_with("duplicate:") => {
                self.report.duplicates += 1
            }
            Ok(_) => self.report.imported += 1,
            Err(Reason::Duplicate(_)) => self.report.duplicates += 1,
            Err(reason) => self.refuse(number, &reason.wire_text()),
        }
    }
}

/// Import `input` into the community `host` of `relay` (see the module docs). Every
/// refused line is handed to `refused` with its number and the NIP-01 reason, as it is
/// found. `total_bytes`, when known, sizes the progress bar.
pub async fn import(
    relay: &OfflineRelay,
    host: &str,
    input: Box<dyn BufRead + Send>,
    total_bytes: Option<u64>,
    progress: &dyn Progress,
    refused: &(dyn Fn(u64, &str) + Sync),
) -> anyhow::Result<ImportReport> {
    let wanted = normalize_host(host);
    let community = relay
        .services
        .communities
        .iter()
        .find(|c| c.host == wanted)
        .cloned()
        .ok_or_else(|| {
            let known: Vec<&str> = relay
                .services
                .communities
                .iter()
                .map(|c| c.host.as_str())
                .collect();
            anyhow::anyhow!(
                "no community {wanted} in the configuration (known: {})",
                known.join(", ")
            )
        })?;
    let base = ConnCtx {
        community,
        pubkey: None,
        ip: None,
        transport: Transport::Http,
        host_header: wanted.clone(),
        authority: wanted,
    };
    let ingest = &relay.ingest;
    let limits = ingest.limits();
    let clock = relay.services.clock.clone();

    let bytes = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut chunks = spawn_reader(input, bytes.clone());
    let mut verifying: VecDeque<tokio::task::JoinHandle<Vec<Verified>>> = VecDeque::new();
    let mut pending: VecDeque<(u64, ConnCtx, PendingImport)> = VecDeque::new();
    let mut tally = Tally {
        report: ImportReport::default(),
        refused,
    };
    progress.begin("importing", total_bytes);
    let mut shown = 0u64;
    let mut input_done = false;
    loop {
        while !input_done && verifying.len() < CHUNKS_AHEAD {
            match chunks.recv().await {
                Some(Ok(lines)) => {
                    let now = clock.now_micros().div_euclid(1_000_000);
                    verifying.push_back(tokio::task::spawn_blocking(move || {
                        verify(limits, now, lines)
                    }));
                }
                Some(Err(e)) => anyhow::bail!(e),
                None => input_done = true,
            }
        }
        let Some(next) = verifying.pop_front() else {
            break;
        };
        let verified = next.await.map_err(|e| anyhow::anyhow!("verifying: {e}"))?;
        for (number, checked) in verified {
            tally.report.lines += 1;
            let checked = match checked {
                Ok(checked) => checked,
                Err(why) => {
                    tally.refuse(number, &why);
                    continue;
                }
            };
            if ingest.is_relay_authored(checked.event().kind) {
                tally.report.relay_authored += 1;
                continue;
            }
            if ingest.import_waits_for_earlier(checked.event()) {
                while let Some((n, ctx, p)) = pending.pop_front() {
                    tally.answered(n, ingest.settle_import(&ctx, p).await);
                }
            }
            let mut ctx = base.clone();
            ctx.pubkey = Some(checked.event().pubkey.clone());
            match ingest.queue_import(&ctx, checked).await {
                Ok(p) => pending.push_back((number, ctx, p)),
                Err(reason) => tally.refuse(number, &reason.wire_text()),
            }
            while pending.len() > WINDOW {
                if let Some((n, ctx, p)) = pending.pop_front() {
                    tally.answered(n, ingest.settle_import(&ctx, p).await);
                }
            }
        }
        let now = bytes.load(std::sync::atomic::Ordering::Relaxed);
        progress.advance(now - shown);
        shown = now;
    }
    while let Some((n, ctx, p)) = pending.pop_front() {
        tally.answered(n, ingest.settle_import(&ctx, p).await);
    }
    progress.end();
    // PostgreSQL plans by the statistics autovacuum takes, late or (when it is off) never:
    // a community imported whole would be planned as the empty table it was, and a read
    // of one channel sorted the channel (issue 39). SQLite's writer takes them itself as
    // the table grows (`store/planner_stats.rs`).
    if matches!(
        relay.services.store.backend(),
        crate::store::Backend::Postgres
    ) {
        relay
            .services
            .store
            .analyze()
            .await
            .map_err(|e| anyhow::anyhow!("refreshing planner statistics after the import: {e}"))?;
    }
    Ok(tally.report)
}
