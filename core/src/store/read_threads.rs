//! The threads [`Store::read`](super::Store::read) runs on: as many as the pool has
//! connections, kept for the store's whole life.
//!
//! Why not `tokio::task::spawn_blocking`: that pool belongs to whichever runtime the caller
//! runs on (each actix worker has its own), lets an idle thread go after ten seconds, and
//! starts a new thread whenever none is idle at the instant of the call — which, for one
//! connection's back-to-back REQs, is often (the thread that just answered has not parked
//! yet). A new thread's first allocations fault in fresh memory and its first policy check
//! builds a Lua state: about 7 ms of a REQ's latency each time (`perf`: 60 % of the relay's
//! CPU in the kernel's page clearing during the first REQs, ~25 threads started for one
//! sequential reader). Here threads start at most once per connection and never idle out,
//! and a read beyond the pool's size waits in a queue instead of on a thread of its own.

use std::time::Duration;
use tokio::runtime::{Builder, Runtime};
use tokio::task::JoinHandle;

/// Effectively forever: a read thread is never let go while the store is open.
const KEEP_ALIVE: Duration = Duration::from_secs(365 * 24 * 3600);

pub(super) struct ReadThreads {
    /// `Some` until dropped.
    runtime: Option<Runtime>,
}

impl ReadThreads {
    pub(super) fn start(threads: usize) -> std::io::Result<ReadThreads> {
        let runtime = Builder::new_multi_thread()
            // Only blocking work is spawned here; the one async worker just idles.
            .worker_threads(1)
            .max_blocking_threads(threads.max(1))
            .thread_keep_alive(KEEP_ALIVE)
            .thread_name("buzz-store-read")
            .build()?;
        Ok(ReadThreads {
            runtime: Some(runtime),
        })
    }

    pub(super) fn spawn<R, F>(&self, f: F) -> JoinHandle<R>
    where
        R: Send + 'static,
        F: FnOnce() -> R + Send + 'static,
    {
        match &self.runtime {
            Some(runtime) => runtime.spawn_blocking(f),
            // Only `drop` takes it, and nothing can call this during or after `drop`.
            None => unreachable!("read threads used after drop"),
        }
    }
}

impl Drop for ReadThreads {
    /// Without waiting: a store may be dropped on an async thread, where blocking (as a
    /// runtime's ordinary drop does) is not allowed. Reads still running finish on their
    /// own and their answers go nowhere.
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// However many reads are queued at once, no more threads than connections run
    /// them, and the same threads serve the next burst.
    #[tokio::test]
    async fn reads_run_on_at_most_one_thread_per_connection_and_the_threads_stay() {
        let threads = ReadThreads::start(2).expect("start");
        let burst = || {
            let handles: Vec<_> = (0..16)
                .map(|_| {
                    threads.spawn(|| {
                        std::thread::sleep(Duration::from_millis(5));
                        let me = std::thread::current();
                        (me.id(), me.name().map(str::to_owned))
                    })
                })
                .collect();
            async move {
                let mut seen = Vec::new();
                for handle in handles {
                    seen.push(handle.await.expect("read task"));
                }
                seen
            }
        };
        let first = burst().await;
        let ids: HashSet<_> = first.iter().map(|(id, _)| *id).collect();
        assert!(ids.len() <= 2, "{} threads for a pool of 2", ids.len());
        assert!(first
            .iter()
            .all(|(_, name)| name.as_deref() == Some("buzz-store-read")));
        let second: HashSet<_> = burst().await.into_iter().map(|(id, _)| id).collect();
        assert!(
            second.is_subset(&ids),
            "the second burst started new threads"
        );
    }
}
