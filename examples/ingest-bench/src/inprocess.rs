//! The in-process ingest run: a relay started in this process on 127.0.0.1:0, fed
//! pre-signed events by concurrent pipelining WebSocket publishers (the bench's second
//! figure; `external.rs` runs the relay as separate processes instead).

use crate::{cpu, setup, Args, Workload, STALL_TIMEOUT};
use anyhow::{bail, Context};
use buzz_core::relay::RelayBuilder;
use buzz_core::testkit::{now, BenchStorage};
use buzz_nostr::keys::Keys;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use tokio_tungstenite::tungstenite::Message;

pub(crate) struct IngestFigures {
    pub(crate) backend: &'static str,
    pub(crate) events: usize,
    pub(crate) wall: Duration,
    pub(crate) inflight: usize,
    pub(crate) relay_inflight: usize,
    /// CPU seconds per thread group during ingest (Linux; empty elsewhere).
    pub(crate) cpu: Vec<(&'static str, f64)>,
}

impl IngestFigures {
    pub(crate) fn rate(&self) -> f64 {
        self.events as f64 / self.wall.as_secs_f64()
    }
}

pub(crate) async fn ingest(args: &Args, workload: Workload) -> anyhow::Result<IngestFigures> {
    let storage = BenchStorage::new(args.database_url.as_deref()).await?;
    let backend = storage.backend;
    let mut settings = storage.settings.clone();
    settings.server.workers = args.workers;
    if let Some(relay_inflight) = args.relay_inflight {
        settings.limits.max_inflight_events = relay_inflight;
    }
    settings.policies.enabled = workload.policies;
    let relay_inflight = settings.limits.max_inflight_events;
    let inflight = args.inflight.unwrap_or(relay_inflight);
    let relay = RelayBuilder::new(settings)
        .without_signal_handlers()
        .start()
        .await
        .context("starting the relay")?;

    // Client work, before any clock: keys, signatures, serialized EVENT frames, and for
    // channel workloads AUTH and the channel itself.
    let per_publisher = workload.events / args.publishers;
    let total = per_publisher * args.publishers;
    let keys: Vec<Keys> = (0..args.publishers).map(|_| Keys::generate()).collect();
    let channel = workload.channel.then(|| uuid::Uuid::new_v4().to_string());
    let frames = presign(&keys, per_publisher, channel.as_deref());

    let relay_url = format!("ws://{}/", relay.addr);
    let mut conns = Vec::with_capacity(args.publishers);
    for publisher in &keys {
        let (mut ws, _) = tokio_tungstenite::connect_async(relay_url.as_str())
            .await
            .context("connecting a publisher")?;
        if workload.channel {
            setup::authenticate(&mut ws, publisher, &relay_url).await?;
        }
        conns.push(ws);
    }
    if let (Some(channel), Some(ws)) = (channel.as_deref(), conns.first_mut()) {
        setup::create_channel(ws, &keys[0], channel).await?;
    }

    let cpu_before = cpu::snapshot();
    let start = Instant::now();
    let (last_ok, failures) = publish_all(conns, frames, inflight, start).await?;
    let wall = last_ok - start;
    let cpu = cpu::snapshot().since(&cpu_before);
    relay.stop().await?;

    if !failures.is_empty() {
        bail!(
            "{} of {total} events were refused; first: {}",
            failures.len(),
            failures[0]
        );
    }
    Ok(IngestFigures {
        backend,
        events: total,
        wall,
        inflight,
        relay_inflight,
        cpu,
    })
}

/// One list of `["EVENT", …]` frames per publisher key: kind-1 notes, or kind-9 messages
/// into `channel`.
pub(crate) fn presign(
    keys: &[Keys],
    per_publisher: usize,
    channel: Option<&str>,
) -> Vec<Vec<String>> {
    let t = now();
    std::thread::scope(|scope| {
        let handles: Vec<_> = keys
            .iter()
            .enumerate()
            .map(|(p, keys)| {
                scope.spawn(move || {
                    (0..per_publisher)
                        .map(|i| {
                            let content = format!("benchmark note {i} from publisher {p}");
                            let event = match channel {
                                Some(ch) => {
                                    keys.sign(9, vec![vec!["h".into(), ch.into()]], &content, t)
                                }
                                None => keys.sign(
                                    1,
                                    vec![vec!["t".into(), "bench".into()]],
                                    &content,
                                    t,
                                ),
                            };
                            json!(["EVENT", event]).to_string()
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("signing thread"))
            .collect()
    })
}

pub(crate) struct PublisherOutcome {
    pub(crate) last_ok: Instant,
    /// `OK false` messages, verbatim.
    pub(crate) refused: Vec<String>,
}

pub(crate) type Ws =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Send `frames` keeping at most `inflight` unanswered, and collect every OK.
/// Every publisher at once, each with its frames; the last `OK` (or `start`) and every
/// refusal.
pub(crate) async fn publish_all(
    conns: Vec<Ws>,
    frames: Vec<Vec<String>>,
    inflight: usize,
    start: Instant,
) -> anyhow::Result<(Instant, Vec<String>)> {
    let tasks: Vec<_> = conns
        .into_iter()
        .zip(frames)
        .map(|(ws, frames)| tokio::spawn(publish(ws, frames, inflight)))
        .collect();
    let mut last_ok = start;
    let mut failures = Vec::new();
    for task in tasks {
        let outcome = task.await.context("publisher task")??;
        last_ok = last_ok.max(outcome.last_ok);
        failures.extend(outcome.refused);
    }
    Ok((last_ok, failures))
}

pub(crate) async fn publish(
    ws: Ws,
    frames: Vec<String>,
    inflight: usize,
) -> anyhow::Result<PublisherOutcome> {
    let expected = frames.len();
    let (mut sink, mut stream) = ws.split();
    // One permit per EVENT that may be unanswered; the reader returns a permit per OK.
    let window = Arc::new(Semaphore::new(inflight));

    let sender_window = window.clone();
    let sender = tokio::spawn(async move {
        for frame in frames {
            let permit = match sender_window.try_acquire() {
                Ok(permit) => permit,
                Err(_) => {
                    // Window full: push out what is buffered, then wait for an OK.
                    sink.flush().await?;
                    sender_window.acquire().await?
                }
            };
            permit.forget();
            sink.feed(Message::text(frame)).await?;
        }
        sink.flush().await?;
        anyhow::Ok(sink)
    });

    let mut answered = 0;
    let mut refused = Vec::new();
    let mut last_ok = Instant::now();
    while answered < expected {
        let msg = tokio::time::timeout(STALL_TIMEOUT, stream.next())
            .await
            .with_context(|| format!("no OK for {STALL_TIMEOUT:?} ({answered}/{expected})"))?
            .with_context(|| format!("relay closed the connection ({answered}/{expected})"))??;
        let text = match msg {
            Message::Text(text) => text,
            Message::Close(frame) => bail!(
                "relay closed the connection after {answered}/{expected} OKs: {}",
                frame.map_or_else(
                    || "no reason".to_owned(),
                    |f| format!("{} {}", f.code, f.reason)
                )
            ),
            _ => continue,
        };
        let value: Value = serde_json::from_str(&text).context("relay sent malformed JSON")?;
        if value[0] != "OK" {
            continue; // the AUTH challenge, notices
        }
        answered += 1;
        last_ok = Instant::now();
        window.add_permits(1);
        if value[2] != Value::Bool(true) {
            refused.push(text.to_string());
        }
    }
    let mut sink = sender.await.context("sender task")??;
    let _ = sink.close().await;
    Ok(PublisherOutcome { last_ok, refused })
}
