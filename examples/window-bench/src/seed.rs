//! Seeding large channels fast: real signed events (signed on every core), written
//! straight through the relay's `Store` in big writer jobs, with the thread metadata
//! ingest would have computed for them. Going through the WebSocket would measure
//! ingest, not windows, and take an hour for a million events.

use anyhow::Context;
use buzz_core::event::Event;
use buzz_core::keys::Keys;
use buzz_core::store::threads::{insert_rows, ThreadRow};
use buzz_core::store::{insert_event, Store};

/// Events per writer job. Each job runs in its own savepoint, and with SQLite's
/// in-memory sub-journal every statement costs time proportional to what the savepoint
/// has changed so far (`memjrnlTruncate`), so big jobs are quadratic. Many small jobs in
/// flight at once keep seeding linear; the writer group-commits them.
const EVENTS_PER_JOB: usize = 50;
/// Events signed at once (on every core) before they are written.
const SIGN_CHUNK: usize = 20_000;
/// Replies per thread in a seeded channel: 1 root + 9 replies = 90% replies.
pub(crate) const REPLIES_PER_ROOT: usize = 9;
/// The newest roots of a seeded channel that get a reaction (so aux has work to do).
const REACTED_ROOTS: usize = 60;

/// An event to sign.
struct Spec {
    author: usize,
    kind: u32,
    tags: Vec<Vec<String>>,
    content: String,
    created_at: i64,
}

/// Writes seeded channels into one community.
pub(crate) struct Seeder {
    pub(crate) store: Store,
    pub(crate) community_id: i64,
    /// Authors of the seeded events (participants of the threads).
    pub(crate) authors: Vec<Keys>,
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

fn root_row(community_id: i64, channel: &str, root: &Event, replies: &[Event]) -> ThreadRow {
    ThreadRow {
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
    }
}

fn reply_row(community_id: i64, channel: &str, root: &Event, reply: &Event) -> ThreadRow {
    ThreadRow {
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

    /// Write events and their metadata in one writer job.
    async fn write(
        &self,
        channel: &str,
        events: Vec<Event>,
        rows: Vec<ThreadRow>,
    ) -> anyhow::Result<()> {
        let community_id = self.community_id;
        let channel = channel.to_owned();
        self.store
            .write(move |conn| {
                for event in &events {
                    insert_event(
                        conn,
                        community_id,
                        event,
                        Some(&channel),
                        event.created_at * 1_000_000,
                    )?;
                }
                insert_rows(conn, &rows)
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
        let per_thread = REPLIES_PER_ROOT + 1;
        let threads = events / per_thread;
        let threads_per_chunk = (SIGN_CHUNK / per_thread).max(1);
        let mut done = 0;
        while done < threads {
            let batch = threads_per_chunk.min(threads - done);
            let roots: Vec<Spec> = (done..done + batch)
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
                        done + i + r,
                        root.created_at + r as i64,
                    ));
                }
            }
            let replies = sign_all(specs, &self.authors);
            // Thread by thread, so events and metadata rows line up (10 each).
            let mut events = Vec::with_capacity(batch * per_thread);
            let mut rows = Vec::with_capacity(batch * per_thread);
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
            let mut writes: Vec<_> = events
                .chunks(EVENTS_PER_JOB)
                .zip(rows.chunks(EVENTS_PER_JOB))
                .map(|(e, r)| self.write(channel, e.to_vec(), r.to_vec()))
                .collect();
            if done + batch >= threads {
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
                writes.push(self.write(channel, sign_all(specs, &self.authors), Vec::new()));
            }
            // All in flight at once: the writer group-commits them.
            futures_util::future::try_join_all(writes)
                .await
                .with_context(|| format!("seeding {channel}"))?;
            done += batch;
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
        let writes = replies.chunks(EVENTS_PER_JOB).map(|chunk| {
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
