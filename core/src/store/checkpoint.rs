//! WAL checkpoints beside the writer (SQLite only), and planner statistics as the tables
//! grow (`planner_stats.rs`).
//!
//! By default SQLite makes the connection that commits copy the WAL back into the
//! database file every 1,000 pages. Here that connection is the one writer, so every
//! event waiting for the next group commit would wait for the copy and its fsync too.
//! Instead the writer reports each commit and this thread runs `PASSIVE` checkpoints on a
//! connection of its own, at most every [`PACE`], so a page rewritten by several batches
//! is copied once.
//!
//! The writer keeps SQLite's automatic checkpoint as a backstop at a higher threshold
//! (`wal_autocheckpoint` in `pool.rs`): under sustained load this thread stays a batch
//! behind and the WAL can only start over once a checkpoint has caught up completely,
//! which the writer's own checkpoint then does cheaply, with little left to copy.

use super::planner_stats::PlannerStats;
use super::pool::Pool;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Shortest time between two checkpoints.
const PACE: Duration = Duration::from_millis(100);

#[derive(Default)]
struct State {
    /// Commits since the last checkpoint started.
    commits: u64,
    stopping: bool,
}

#[derive(Default)]
struct Shared {
    state: Mutex<State>,
    wake: Condvar,
}

/// Handle to the checkpoint thread. It exits, after one last checkpoint, when the
/// writer exits or [`Checkpointer::stop`] is called.
pub(crate) struct Checkpointer {
    shared: Arc<Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Checkpointer {
    pub(crate) fn start(pool: Pool) -> std::io::Result<Checkpointer> {
        let shared = Arc::new(Shared::default());
        let thread = std::thread::Builder::new()
            .name("buzz-store-checkpoint".into())
            .spawn({
                let shared = shared.clone();
                move || run(&pool, &shared)
            })?;
        Ok(Checkpointer {
            shared,
            thread: Mutex::new(Some(thread)),
        })
    }

    /// The writer committed a transaction: the WAL has grown.
    pub(crate) fn committed(&self) {
        if let Ok(mut state) = self.shared.state.lock() {
            state.commits += 1;
            self.shared.wake.notify_one();
        }
    }

    /// Ask the thread to checkpoint once more and exit (the writer does, as it exits).
    pub(crate) fn finish(&self) {
        if let Ok(mut state) = self.shared.state.lock() {
            state.stopping = true;
            self.shared.wake.notify_one();
        }
    }

    /// [`Checkpointer::finish`] and wait for the thread to exit (blocking).
    pub(crate) fn stop(&self) {
        self.finish();
        let handle = self.thread.lock().ok().and_then(|mut t| t.take());
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }
}

fn run(pool: &Pool, shared: &Shared) {
    let mut planner_stats = PlannerStats::default();
    loop {
        let stopping = {
            let Ok(mut state) = shared.state.lock() else {
                return;
            };
            while state.commits == 0 && !state.stopping {
                state = match shared.wake.wait(state) {
                    Ok(state) => state,
                    Err(_) => return,
                };
            }
            state.commits = 0;
            state.stopping
        };
        match pool.checkpoint() {
            Ok(()) => {}
            // The writer's backstop checkpoint is running: this one waits for the next
            // commit.
            Err(err) if err.transient().is_some() => {
                tracing::debug!(error = %err, "WAL checkpoint skipped");
            }
            // Not fatal: the writer's own automatic checkpoint still bounds the WAL.
            Err(err) => tracing::warn!(error = %err, "WAL checkpoint failed"),
        }
        if stopping {
            return;
        }
        // Beside the WAL, the planner's statistics follow the tables' growth.
        if let Err(err) = pool.refresh_planner_stats(&mut planner_stats) {
            // Not fatal: the next commit tries again; plans only get slower meanwhile.
            tracing::warn!(error = %err, "taking planner statistics failed");
        }
        // Let commits accumulate; a stop request cuts the pause short.
        if let Ok(state) = shared.state.lock() {
            let _ = shared.wake.wait_timeout_while(state, PACE, |s| !s.stopping);
        }
    }
}
