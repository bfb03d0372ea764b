//! Seeding large channels fast: real signed events (signed on every core), written
//! straight through the relay's `Store` in big writer jobs, as the rows ingest would
//! have stored for them: the event and tag rows by ingest's own insert
//! (`insert_independent`: on PostgreSQL the two-statement grouped insert of a group
//! commit, multi-row `UNNEST` arrays), the thread metadata ingest computes (counts, newest
//! reply, path) with its arrival columns (`last_reply_received_at` on roots,
//! `channels.last_timeline_received_at`), all as if each event arrived in the second it
//! is dated. Going through the WebSocket would measure ingest, not windows, and take an
//! hour for a million events.

use anyhow::Context;
use buzz_core::error::Reason;
use buzz_core::store::channel_state::note_timeline_arrival;
use buzz_core::store::threads::{insert_loaded, LoadedRow, ThreadRow};
use buzz_core::store::{insert_independent, Backend, InsertOutcome, Store};
use buzz_core::stored::StoredEvent;
use buzz_nostr::event::Event;
use buzz_nostr::keys::Keys;

/// Events per writer job on SQLite. A failing batch is rerun with a savepoint per job,
/// and with SQLite's in-memory sub-journal every statement costs time proportional to
/// what the savepoint has changed so far (`memjrnlTruncate`), so big jobs are quadratic.
/// Many small jobs in flight at once keep seeding linear; the writer group-commits them.
const SQLITE_EVENTS_PER_JOB: usize = 50;
/// Events per writer job on PostgreSQL: each job is two multi-row statements for the
/// events and their tags plus a few for the metadata, so big jobs mean few round trips.
const PG_EVENTS_PER_JOB: usize = 1_000;
/// Events signed at once (on every core) before they are written.
const SIGN_CHUNK: usize = 20_000;
/// Replies per thread in a seeded channel: 1 root + 9 replies = 90% replies.
pub(crate) const REPLIES_PER_ROOT: usize = 9;
/// The newest roots of a seeded channel that get a reaction (so aux has work to do).
const REACTED_ROOTS: usize = 60;

/// When a seeded event arrived (`received_at`, microseconds): in the second it is dated.
pub(crate) fn arrival(created_at: i64) -> i64 {
    created_at * 1_000_000
}

/// An event to sign.
struct Spec {
    author: usize,
    kind: u32,
    tags: Vec<Vec<String>>,
    content: String,
    created_at: i64,
}

/// One chunk of a seeded channel: signed events with the thread rows ingest would keep
/// for them (one each, in the same order), and reactions (no thread rows).
pub(crate) struct Planned {
    pub(crate) events: Vec<Event>,
    pub(crate) rows: Vec<LoadedRow>,
    pub(crate) reactions: Vec<Event>,
}

/// Writes seeded channels into one community.
pub(crate) struct Seeder {
    pub(crate) store: Store,
    pub(crate) community_id: i64,
    /// Authors of the seeded events (participants of the threads).
    pub(crate) authors: Vec<Keys>,
}

impl Seeder {
    fn events_per_job(&self) -> usize {
        match self.store.backend() {
            Backend::Sqlite => SQLITE_EVENTS_PER_JOB,
            Backend::Postgres => PG_EVENTS_PER_JOB,
        }
    }
}

fn tag(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|s| s.to_string()).collect()
}

/// Sign on every core, keeping the order.
fn sign_all(specs: Vec<Spec>, authors: &[Keys]) -> Vec<Event> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let chunk = specs.len().div_ceil(threads).max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = specs
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || {
                    part.iter()
                        .map(|s| {
                            authors[s.author].sign(s.kind, s.tags.clone(), &s.content, s.created_at)
                        })
                        .collect::<Vec<Event>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect()
    })
}

/// A thread root's row as ingest leaves it once all `replies` arrived.
pub(crate) fn root_row(
    community_id: i64,
    channel: &str,
    root: &Event,
    replies: &[Event],
) -> LoadedRow {
    let row = ThreadRow {
        community_id,
        event_id: root.id.clone(),
        channel_id: channel.to_owned(),
        pubkey: root.pubkey.clone(),
        created_at: root.created_at,
        parent_id: None,
        root_id: None,
        depth: 0,
        broadcast: false,
        path: "/".into(),
        deleted: false,
        reply_count: replies.len() as i64,
        descendant_count: replies.len() as i64,
        last_reply_at: replies.iter().map(|r| r.created_at).max(),
    };
    LoadedRow {
        row,
        last_reply_received_at: replies.iter().map(|r| arrival(r.created_at)).max(),
    }
}

/// A direct reply's row (depth 1, not broadcast).
pub(crate) fn reply_row(
    community_id: i64,
    channel: &str,
    root: &Event,
    reply: &Event,
) -> LoadedRow {
    let row = ThreadRow {
        community_id,
        event_id: reply.id.clone(),
        channel_id: channel.to_owned(),
        pubkey: reply.pubkey.clone(),
        created_at: reply.created_at,
        parent_id: Some(root.id.clone()),
        root_id: Some(root.id.clone()),
        depth: 1,
        broadcast: false,
        path: format!("/{}/", root.id),
        deleted: false,
        reply_count: 0,
        descendant_count: 0,
        last_reply_at: None,
    };
    LoadedRow {
        row,
        last_reply_received_at: None,
    }
}

impl Seeder {
    fn reply_spec(&self, channel: &str, root: &Event, n: usize, at: i64) -> Spec {
        Spec {
            author: n % self.authors.len(),
            kind: 9,
            tags: vec![
                tag(&["h", channel]),
                tag(&["e", &root.id, "", "root"]),
                tag(&["e", &root.id, "", "reply"]),
            ],
            content: format!("reply {n}: a typical chat answer of a few dozen characters"),
            created_at: at,
        }
    }

    /// Write events and their metadata in one writer job, as ingest would have stored
    /// them (see the module comment).
    pub(crate) async fn write(
        &self,
        channel: &str,
        events: Vec<Event>,
        rows: Vec<LoadedRow>,
    ) -> anyhow::Result<()> {
        let community_id = self.community_id;
        let channel = channel.to_owned();
        let stored: Vec<StoredEvent> = events
            .into_iter()
            .map(|event| StoredEvent {
                community_id,
                channel: Some(channel.clone()),
                received_at: arrival(event.created_at),
                event,
            })
            .collect();
        // The channel timeline's newest arrival among these rows (ingest raises
        // `channels.last_timeline_received_at` for every top-level message).
        let timeline = rows
            .iter()
            .filter(|r| r.row.is_top_level())
            .map(|r| arrival(r.row.created_at))
            .max();
        self.store
            .write(move |conn| {
                let outcomes = insert_independent(conn, &stored)?;
                if let Some((event, outcome)) = stored
                    .iter()
                    .zip(&outcomes)
                    .find(|(_, o)| !matches!(o, InsertOutcome::Stored { .. }))
                {
                    return Err(Reason::Internal(anyhow::anyhow!(
                        "seeded event {} was not stored: {outcome:?}",
                        event.event.id
                    )));
                }
                insert_loaded(conn, &rows)?;
                if let Some(at) = timeline {
                    note_timeline_arrival(conn, community_id, &channel, at)?;
                }
                Ok(())
            })
            .await
            .map_err(|r| anyhow::anyhow!("seeding write failed: {r}"))
    }

    /// `events` events in `channel`, oldest at `start`: threads of one root and
    /// [`REPLIES_PER_ROOT`] replies in the following seconds; the newest roots get a
    /// reaction each.
    pub(crate) async fn channel(
        &self,
        channel: &str,
        events: usize,
        start: i64,
    ) -> anyhow::Result<()> {
        let threads = events / (REPLIES_PER_ROOT + 1);
        let threads_per_chunk = (SIGN_CHUNK / (REPLIES_PER_ROOT + 1)).max(1);
        let mut done = 0;
        while done < threads {
            let batch = threads_per_chunk.min(threads - done);
            let last = done + batch >= threads;
            let planned = self.plan(channel, done, batch, start, last);
            self.store_planned(channel, planned).await?;
            done += batch;
        }
        Ok(())
    }

    /// Threads `first..first + count` of a seeded channel (thread `t` starts at
    /// `start + 10 t`), signed, with their rows; with `react`, reactions to the newest
    /// of them.
    pub(crate) fn plan(
        &self,
        channel: &str,
        first: usize,
        count: usize,
        start: i64,
        react: bool,
    ) -> Planned {
        let per_thread = REPLIES_PER_ROOT + 1;
        let roots: Vec<Spec> = (first..first + count)
            .map(|t| Spec {
                author: t % self.authors.len(),
                kind: 9,
                tags: vec![tag(&["h", channel])],
                content: format!("topic {t}: something worth a thread, with a little detail"),
                created_at: start + (t * per_thread) as i64,
            })
            .collect();
        let roots = sign_all(roots, &self.authors);
        let mut specs = Vec::new();
        for (i, root) in roots.iter().enumerate() {
            for r in 1..=REPLIES_PER_ROOT {
                specs.push(self.reply_spec(
                    channel,
                    root,
                    first + i + r,
                    root.created_at + r as i64,
                ));
            }
        }
        let replies = sign_all(specs, &self.authors);
        // Thread by thread, so events and metadata rows line up (10 each).
        let mut events = Vec::with_capacity(count * per_thread);
        let mut rows = Vec::with_capacity(count * per_thread);
        for (root, replies) in roots.iter().zip(replies.chunks(REPLIES_PER_ROOT)) {
            events.push(root.clone());
            events.extend(replies.iter().cloned());
            rows.push(root_row(self.community_id, channel, root, replies));
            rows.extend(
                replies
                    .iter()
                    .map(|r| reply_row(self.community_id, channel, root, r)),
            );
        }
        let reactions = if react {
            // Reactions to the newest roots, in their thread's last second.
            let specs: Vec<Spec> = roots
                .iter()
                .rev()
                .take(REACTED_ROOTS)
                .enumerate()
                .map(|(i, root)| Spec {
                    author: i % self.authors.len(),
                    kind: 7,
                    tags: vec![tag(&["h", channel]), tag(&["e", &root.id])],
                    content: "+".into(),
                    created_at: root.created_at + REPLIES_PER_ROOT as i64,
                })
                .collect();
            sign_all(specs, &self.authors)
        } else {
            Vec::new()
        };
        Planned {
            events,
            rows,
            reactions,
        }
    }

    /// Store what [`Seeder::plan`] made, in jobs all in flight at once (the writer
    /// group-commits them); reactions last, after the events they target.
    pub(crate) async fn store_planned(
        &self,
        channel: &str,
        planned: Planned,
    ) -> anyhow::Result<()> {
        let per_job = self.events_per_job();
        let writes: Vec<_> = planned
            .events
            .chunks(per_job)
            .zip(planned.rows.chunks(per_job))
            .map(|(e, r)| self.write(channel, e.to_vec(), r.to_vec()))
            .collect();
        futures_util::future::try_join_all(writes)
            .await
            .with_context(|| format!("seeding {channel}"))?;
        if !planned.reactions.is_empty() {
            self.write(channel, planned.reactions, Vec::new())
                .await
                .with_context(|| format!("seeding reactions in {channel}"))?;
        }
        Ok(())
    }

    /// Refresh the planner statistics after a bulk load (PostgreSQL).
    pub(crate) async fn analyze(&self) -> anyhow::Result<()> {
        self.store
            .analyze()
            .await
            .map_err(|r| anyhow::anyhow!("ANALYZE failed: {r}"))
    }

    /// One root with `replies` direct replies in `channel`; returns the root id.
    pub(crate) async fn thread(
        &self,
        channel: &str,
        replies: usize,
        start: i64,
    ) -> anyhow::Result<String> {
        let root = sign_all(
            vec![Spec {
                author: 0,
                kind: 9,
                tags: vec![tag(&["h", channel])],
                content: "a very long thread".into(),
                created_at: start,
            }],
            &self.authors,
        )
        .remove(0);
        let specs: Vec<Spec> = (0..replies)
            .map(|n| self.reply_spec(channel, &root, n, start + 1 + n as i64))
            .collect();
        let replies = sign_all(specs, &self.authors);
        // The root first: replies reference it.
        self.write(
            channel,
            vec![root.clone()],
            vec![root_row(self.community_id, channel, &root, &replies)],
        )
        .await?;
        let writes = replies.chunks(self.events_per_job()).map(|chunk| {
            let rows = chunk
                .iter()
                .map(|r| reply_row(self.community_id, channel, &root, r))
                .collect();
            self.write(channel, chunk.to_vec(), rows)
        });
        futures_util::future::try_join_all(writes).await?;
        Ok(root.id)
    }
}
