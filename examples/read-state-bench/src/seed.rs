//! Seeding history fast: real signed messages written straight through the relay's
//! `Store` in small writer jobs, with the thread metadata and channel arrival column
//! ingest would have kept. Arrival is the author time (as a relay with a true clock
//! stamps it). Going through the WebSocket would measure ingest, not the sidebar.

use anyhow::Context;
use buzz_core::store::channel_state::note_timeline_arrival;
use buzz_core::store::threads::{insert_rows, ThreadRow};
use buzz_core::store::{insert_event, Store};
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;
use futures_util::stream::{self, StreamExt, TryStreamExt};

/// Messages per writer job (small jobs keep SQLite's savepoint journal cheap; the writer
/// group-commits them).
const PER_JOB: usize = 50;
/// Jobs in flight.
const IN_FLIGHT: usize = 32;
/// Messages signed at once, on every core.
const SIGN_CHUNK: usize = 20_000;
/// Every tenth message is a thread root, the next nine its replies.
const PER_THREAD: usize = 10;

pub(crate) struct Seeder {
    pub(crate) store: Store,
    pub(crate) community_id: i64,
    pub(crate) authors: Vec<Keys>,
}

fn tag(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// What one message is before signing: (author, tags, author time).
type Spec = (usize, Vec<Vec<String>>, i64);

fn sign_all(specs: &[Spec], authors: &[Keys]) -> Vec<Event> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = specs.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = specs
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|(a, tags, at)| authors[*a].sign(9, tags.clone(), "history", *at))
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

fn row(cid: i64, channel: &str, event: &Event, root: Option<&str>) -> ThreadRow {
    ThreadRow {
        community_id: cid,
        event_id: event.id.clone(),
        channel_id: channel.to_owned(),
        pubkey: event.pubkey.clone(),
        created_at: event.created_at,
        parent_id: root.map(str::to_owned),
        root_id: root.map(str::to_owned),
        depth: i32::from(root.is_some()),
        broadcast: false,
        path: root.map_or_else(|| "/".to_owned(), |r| format!("/{r}/")),
        deleted: false,
        reply_count: 0,
        descendant_count: 0,
        last_reply_at: None,
    }
}

impl Seeder {
    /// `count` messages of history in `channel`, one second apart from `start`; returns
    /// the newest thread root.
    pub(crate) async fn channel(
        &self,
        channel: &str,
        count: usize,
        start: i64,
    ) -> anyhow::Result<Event> {
        let mut done = 0;
        let mut newest_root = None;
        while done < count {
            let n = SIGN_CHUNK.min(count - done);
            // Roots first (replies name them), then their replies.
            let roots: Vec<Spec> = (done..done + n)
                .step_by(PER_THREAD)
                .map(|i| {
                    (
                        i % self.authors.len(),
                        vec![tag(&["h", channel])],
                        start + i as i64,
                    )
                })
                .collect();
            let roots = sign_all(&roots, &self.authors);
            let mut replies: Vec<Spec> = Vec::new();
            for (t, root) in roots.iter().enumerate() {
                for r in 1..PER_THREAD {
                    let i = done + t * PER_THREAD + r;
                    if i >= done + n {
                        break;
                    }
                    replies.push((
                        i % self.authors.len(),
                        vec![
                            tag(&["h", channel]),
                            tag(&["e", &root.id, "", "root"]),
                            tag(&["e", &root.id, "", "reply"]),
                        ],
                        start + i as i64,
                    ));
                }
            }
            let replies = sign_all(&replies, &self.authors);
            let mut rows = Vec::with_capacity(n);
            let mut reply_iter = replies.into_iter();
            newest_root = roots.last().cloned().or(newest_root);
            for root in roots {
                let root_id = root.id.clone();
                rows.push((root, None));
                for _ in 1..PER_THREAD {
                    match reply_iter.next() {
                        Some(reply) => rows.push((reply, Some(root_id.clone()))),
                        None => break,
                    }
                }
            }
            let jobs: Vec<Vec<(Event, Option<String>)>> =
                rows.chunks(PER_JOB).map(<[_]>::to_vec).collect();
            stream::iter(jobs.into_iter().map(|job| self.write(channel, job)))
                .buffer_unordered(IN_FLIGHT)
                .try_collect::<Vec<()>>()
                .await?;
            done += n;
        }
        newest_root.context("no history seeded")
    }

    async fn write(&self, channel: &str, job: Vec<(Event, Option<String>)>) -> anyhow::Result<()> {
        let cid = self.community_id;
        let channel = channel.to_owned();
        self.store
            .write(move |conn| {
                let mut rows = Vec::with_capacity(job.len());
                let mut last_timeline = None;
                for (event, root) in &job {
                    let at = event.created_at * 1_000_000;
                    insert_event(conn, cid, event, Some(&channel), at)?;
                    rows.push(row(cid, &channel, event, root.as_deref()));
                    if root.is_none() {
                        last_timeline = Some(at);
                    }
                }
                insert_rows(conn, &rows)?;
                if let Some(at) = last_timeline {
                    note_timeline_arrival(conn, cid, &channel, at)?;
                }
                Ok(())
            })
            .await
            .map_err(|r| anyhow::anyhow!("seeding write failed: {r}"))
            .context("seeding")
    }
}
