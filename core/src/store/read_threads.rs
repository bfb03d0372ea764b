//! The threads [`Store::read`](super::Store::read) runs on: as many as the pool has
//! connections, kept for the store's whole life, each read handed to the thread that
//! went idle last.
//!
//! Why not `tokio::task::spawn_blocking`: that pool belongs to whichever runtime the caller
//! runs on (each actix worker has its own), lets an idle thread go after ten seconds, and
//! starts a new thread whenever none is idle at the instant of the call — which, for one
//! connection's back-to-back REQs, is often (the thread that just answered has not parked
//! yet). A new thread's first allocations fault in fresh memory and its first policy check
//! builds a Lua state: about 7 ms of a REQ's latency each time (`perf`: 60 % of the relay's
//! CPU in the kernel's page clearing during the first REQs, ~25 threads started for one
//! sequential reader).
//!
//! Why not a fixed tokio blocking pool either (what this was until 4 December): its idle
//! threads wait on one condition variable, so each read woke the thread that had waited
//! longest — a different, cache-cold thread for every REQ of a connection (`perf sched`),
//! and with eight of them the relay spent about a fifth more CPU per query than with a
//! single read thread (`read-load.mjs`, mixed load on 2 cores). Here the idle threads are
//! a stack: a read goes to the thread that finished last, which marks itself idle *before*
//! it hands its answer back, so a connection's next read finds it, often before it has
//! even parked. More threads wake only when reads overlap; a read beyond the pool's size
//! waits in a queue instead of on a thread of its own.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::{self, Thread};
use tokio::sync::oneshot;

/// Hands a finished read's answer to its caller.
type Deliver = Box<dyn FnOnce() + Send>;
/// A read: runs on a read thread, returns how to deliver its answer.
type Job = Box<dyn FnOnce() -> Deliver + Send>;

pub(super) struct ReadThreads {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Each read thread's handle, to wake it (index = the thread's number); set once
    /// all are started.
    threads: OnceLock<Vec<Thread>>,
}

#[derive(Default)]
struct State {
    /// Threads waiting for a read, the most recently idle last.
    idle: Vec<usize>,
    /// The read handed to each thread, taken by it when it wakes.
    handed: Vec<Option<Job>>,
    /// Reads waiting for a thread (every thread busy).
    queue: VecDeque<Job>,
    /// The store is gone: threads exit once idle.
    closed: bool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A read's panic is caught before it can poison this lock; the state stays valid.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn wake(&self, thread: usize) {
        if let Some(handle) = self.threads.get().and_then(|all| all.get(thread)) {
            handle.unpark();
        }
    }
}

/// The read panicked on its thread: its answer will never come.
#[derive(Debug, thiserror::Error)]
#[error("the read did not finish: it panicked on its read thread")]
pub(super) struct ReadLost;

impl ReadThreads {
    pub(super) fn start(threads: usize) -> std::io::Result<ReadThreads> {
        let count = threads.max(1);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                handed: (0..count).map(|_| None).collect(),
                ..State::default()
            }),
            threads: OnceLock::new(),
        });
        let mut handles = Vec::with_capacity(count);
        let mut failed = None;
        for me in 0..count {
            let mine = shared.clone();
            // Detached: a store may be dropped on an async thread, where joining is not
            // allowed; an idle thread exits once the store is closed.
            match thread::Builder::new()
                .name("buzz-store-read".into())
                .spawn(move || serve(&mine, me))
            {
                Ok(handle) => handles.push(handle.thread().clone()),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        // Set before anyone can call `spawn` (only the threads themselves ran so far,
        // and they never wake each other).
        let _ = shared.threads.set(handles);
        let threads = ReadThreads { shared };
        match failed {
            // Dropping `threads` lets the ones already started exit.
            Some(e) => Err(e),
            None => Ok(threads),
        }
    }

    /// Run `f` on a read thread; its answer, or [`ReadLost`] if it panicked.
    pub(super) fn spawn<R, F>(
        &self,
        f: F,
    ) -> impl std::future::Future<Output = Result<R, ReadLost>> + use<R, F>
    where
        R: Send + 'static,
        F: FnOnce() -> R + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let job: Job = Box::new(move || {
            // A panic drops `tx`: the caller gets `ReadLost`, the thread serves on.
            let answer = catch_unwind(AssertUnwindSafe(f)).ok();
            Box::new(move || {
                if let Some(answer) = answer {
                    let _ = tx.send(answer);
                }
            })
        });
        let mut state = self.shared.lock();
        match state.idle.pop() {
            Some(thread) => {
                state.handed[thread] = Some(job);
                drop(state);
                self.shared.wake(thread);
            }
            None => state.queue.push_back(job),
        }
        async move { rx.await.map_err(|_| ReadLost) }
    }
}

impl Drop for ReadThreads {
    /// Without waiting: a store may be dropped on an async thread, where blocking is not
    /// allowed. Reads still running finish on their own and their answers go nowhere;
    /// idle threads exit.
    fn drop(&mut self) {
        let idle = {
            let mut state = self.shared.lock();
            state.closed = true;
            std::mem::take(&mut state.idle)
        };
        for thread in idle {
            self.shared.wake(thread);
        }
    }
}

/// One read thread's life: run what it is handed or finds queued, else wait on top of
/// the idle stack.
fn serve(shared: &Shared, me: usize) {
    let mut next = take_or_idle(shared, me);
    loop {
        let job = match next.take() {
            Some(job) => job,
            None => loop {
                thread::park();
                let mut state = shared.lock();
                if let Some(job) = state.handed[me].take() {
                    break job;
                }
                if state.closed {
                    return;
                }
                // A spurious wake-up: still on the idle stack, park again.
            },
        };
        let deliver = job();
        // Idle (or the next queued read) before the answer leaves, so the caller's next
        // read comes back to this thread.
        next = take_or_idle(shared, me);
        deliver();
    }
}

/// The next queued read, or `None` after putting `me` on top of the idle stack.
fn take_or_idle(shared: &Shared, me: usize) -> Option<Job> {
    let mut state = shared.lock();
    if let Some(job) = state.queue.pop_front() {
        return Some(job);
    }
    if state.closed {
        // Exit at the next wake-up check: never handed anything once closed.
        drop(state);
        thread::current().unpark();
        return None;
    }
    state.idle.push(me);
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::time::Duration;

    fn whoami() -> (thread::ThreadId, Option<String>) {
        let me = thread::current();
        (me.id(), me.name().map(str::to_owned))
    }

    /// However many reads are queued at once, no more threads than connections run
    /// them, and the same threads serve the next burst.
    #[tokio::test]
    async fn reads_run_on_at_most_one_thread_per_connection_and_the_threads_stay() {
        let threads = ReadThreads::start(2).expect("start");
        let burst = || {
            let answers: Vec<_> = (0..16)
                .map(|_| {
                    threads.spawn(|| {
                        thread::sleep(Duration::from_millis(5));
                        whoami()
                    })
                })
                .collect();
            async move {
                let mut seen = Vec::new();
                for answer in answers {
                    seen.push(answer.await.expect("read"));
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

    /// One caller's reads one after another all run on one thread (the one that went
    /// idle last), not in turn on every thread of the pool.
    #[tokio::test]
    async fn back_to_back_reads_stay_on_one_thread() {
        let threads = ReadThreads::start(8).expect("start");
        // Every thread has served once (as after a moment of concurrent reads).
        let burst: Vec<_> = (0..8)
            .map(|_| threads.spawn(|| thread::sleep(Duration::from_millis(20))))
            .collect();
        for read in burst {
            read.await.expect("read");
        }
        let mut seen = HashSet::new();
        for _ in 0..50 {
            let (id, _) = threads.spawn(whoami).await.expect("read");
            seen.insert(id);
            // Let the thread park, as between a client's REQs.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(
            seen.len(),
            1,
            "50 sequential reads ran on {} threads",
            seen.len()
        );
    }

    /// A read that panics is lost to its caller alone; its thread serves the next one.
    #[tokio::test]
    async fn a_panicking_read_is_lost_and_its_thread_serves_on() {
        let threads = ReadThreads::start(1).expect("start");
        let lost = threads
            .spawn(|| -> u8 { panic!("a read that fails") })
            .await;
        assert!(lost.is_err());
        assert_eq!(threads.spawn(|| 7).await.expect("the next read"), 7);
    }
}
