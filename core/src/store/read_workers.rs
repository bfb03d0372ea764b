//! The OS worker threads [`Store::read`](super::Store::read) runs on (NIP-10 threads are
//! `threads.rs`'s): as many as the pool has connections, kept for the store's whole life,
//! each read handed to the worker that went idle last.
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
//! waits in its client's lane (`read_lanes.rs`) instead of on a thread of its own, and
//! the lanes take turns.
//!
//! [`Store::read`](super::Store::read) arms the read deadline inside the job, so it runs
//! from when a thread takes the read, not from when it was queued.

use super::read_client::ReadClient;
use super::read_lanes::{Admission, Lanes, OverBound};
use super::read_slow::SlowReaders;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread::{self, Thread};
use tokio::sync::oneshot;

/// Hands a finished read's answer to its caller.
type Deliver = Box<dyn FnOnce() + Send>;
/// A read: runs on a read thread, returns how to deliver its answer.
type Job = Box<dyn FnOnce() -> Deliver + Send>;

pub(super) struct ReadWorkers {
    shared: Arc<Shared>,
}

struct Shared {
    state: Mutex<State>,
    /// Each read thread's handle, to wake it (index = the thread's number); set once
    /// all are started.
    threads: OnceLock<Vec<Thread>>,
}

struct State {
    /// Threads waiting for a read, the most recently idle last.
    idle: Vec<usize>,
    /// The read handed to each thread, taken by it when it wakes.
    handed: Vec<Option<(ReadClient, Job)>>,
    /// Reads waiting for a thread (every thread busy, or one left that a slow reader
    /// may not take), by client.
    lanes: Lanes<Job>,
    /// Who reads slowly, and how many of their reads run.
    slow: SlowReaders,
    /// Whether each thread's current read counts as a slow reader's.
    counted: Vec<bool>,
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

impl ReadWorkers {
    /// `threads` read threads; each client may have `per_client` reads in flight (0: no
    /// bound); a client whose read ran longer than `slow_read` (zero: never) is a slow
    /// reader for a while (`read_slow.rs`).
    pub(super) fn start(
        threads: usize,
        per_client: usize,
        slow_read: std::time::Duration,
    ) -> std::io::Result<ReadWorkers> {
        let count = threads.max(1);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                idle: Vec::new(),
                handed: (0..count).map(|_| None).collect(),
                lanes: Lanes::new(per_client),
                slow: SlowReaders::new(count, slow_read),
                counted: vec![false; count],
                closed: false,
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
        let threads = ReadWorkers { shared };
        match failed {
            // Dropping `threads` lets the ones already started exit.
            Some(e) => Err(e),
            None => Ok(threads),
        }
    }

    /// Run `f` on a read thread for `client`; its answer, or [`ReadLost`] if it
    /// panicked. Refused at once when `client` already has its bound of reads in flight.
    #[cfg(test)]
    pub(super) fn spawn<R, F>(
        &self,
        client: ReadClient,
        f: F,
    ) -> Result<impl std::future::Future<Output = Result<R, ReadLost>> + use<R, F>, OverBound>
    where
        R: Send + 'static,
        F: FnOnce() -> R + Send + 'static,
    {
        self.spawn_as(client, Admission::Bounded, f)
    }

    /// [`Self::spawn`], admitted as `admission` says (a continuing read passes the bound).
    pub(super) fn spawn_as<R, F>(
        &self,
        client: ReadClient,
        admission: Admission,
        f: F,
    ) -> Result<impl std::future::Future<Output = Result<R, ReadLost>> + use<R, F>, OverBound>
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
        state.lanes.admit_as(&client, admission)?;
        let idle = match state.slow.may_start(&client) {
            true => state.idle.pop(),
            false => None,
        };
        match idle {
            Some(thread) => {
                state.lanes.running(&client);
                state.counted[thread] = state.slow.started(&client);
                state.handed[thread] = Some((client, job));
                drop(state);
                self.shared.wake(thread);
            }
            None => state.lanes.queue(&client, job),
        }
        Ok(async move { rx.await.map_err(|_| ReadLost) })
    }
}

impl ReadWorkers {
    /// Reads waiting for a thread (every thread busy), all clients together.
    pub(super) fn waiting(&self) -> usize {
        self.shared.lock().lanes.queued()
    }
}

impl Drop for ReadWorkers {
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
    let mut next = take_or_idle(shared, me, None);
    loop {
        let (client, job) = match next.take() {
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
        let started = std::time::Instant::now();
        let deliver = job();
        // Idle (or the next queued read) before the answer leaves, so the caller's next
        // read comes back to this thread.
        next = take_or_idle(shared, me, Some((&client, started.elapsed())));
        deliver();
    }
}

/// The next queued read, or `None` after putting `me` on top of the idle stack; first
/// counts the read `me` just finished for `done`.
fn take_or_idle(
    shared: &Shared,
    me: usize,
    done: Option<(&ReadClient, std::time::Duration)>,
) -> Option<(ReadClient, Job)> {
    let mut guard = shared.lock();
    let state = &mut *guard;
    if let Some((client, took)) = done {
        state.lanes.finished(client);
        state.slow.finished(client, state.counted[me], took);
        state.counted[me] = false;
    }
    let slow = &state.slow;
    if let Some(next) = state.lanes.next_where(|client| slow.may_start(client)) {
        state.counted[me] = state.slow.started(&next.0);
        return Some(next);
    }
    if state.closed {
        // Exit at the next wake-up check: never handed anything once closed.
        drop(guard);
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
        let threads = ReadWorkers::start(2, 0, Duration::ZERO).expect("start");
        let burst = || {
            let answers: Vec<_> = (0..16)
                .map(|_| {
                    threads
                        .spawn(ReadClient::Background, || {
                            thread::sleep(Duration::from_millis(5));
                            whoami()
                        })
                        .expect("admitted")
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
        let threads = ReadWorkers::start(8, 0, Duration::ZERO).expect("start");
        // Every thread has served once (as after a moment of concurrent reads).
        let burst: Vec<_> = (0..8)
            .map(|_| {
                threads
                    .spawn(ReadClient::Background, || {
                        thread::sleep(Duration::from_millis(20))
                    })
                    .expect("admitted")
            })
            .collect();
        for read in burst {
            read.await.expect("read");
        }
        let mut seen = HashSet::new();
        for _ in 0..50 {
            let (id, _) = threads
                .spawn(ReadClient::Background, whoami)
                .expect("admitted")
                .await
                .expect("read");
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
        let threads = ReadWorkers::start(1, 0, Duration::ZERO).expect("start");
        let lost = threads
            .spawn(ReadClient::Background, || -> u8 {
                panic!("a read that fails")
            })
            .expect("admitted")
            .await;
        assert!(lost.is_err());
        let next = threads.spawn(ReadClient::Background, || 7);
        assert_eq!(next.expect("admitted").await.expect("the next read"), 7);
    }

    fn client(last: u8) -> ReadClient {
        ReadClient::Anonymous(u64::from(last))
    }

    /// One thread; client A queues five reads behind a running one, then client B
    /// queues one: B's read runs right after A's running read, not after all of A's.
    #[tokio::test]
    async fn a_second_client_waits_for_at_most_one_read_of_the_first() {
        let threads = ReadWorkers::start(1, 0, Duration::ZERO).expect("start");
        let ran = Arc::new(Mutex::new(Vec::new()));
        let (release, held) = std::sync::mpsc::channel::<()>();
        let mut answers = Vec::new();
        let log = |who: &'static str, n: usize, held: Option<std::sync::mpsc::Receiver<()>>| {
            let ran = ran.clone();
            move || {
                if let Some(held) = held {
                    let _ = held.recv();
                }
                ran.lock().expect("log").push(format!("{who}{n}"));
            }
        };
        let running = threads.spawn(client(1), log("a", 0, Some(held)));
        answers.push(running.expect("admitted"));
        for n in 1..=5 {
            let read = threads.spawn(client(1), log("a", n, None));
            answers.push(read.expect("admitted"));
        }
        let other = threads.spawn(client(2), log("b", 0, None));
        answers.push(other.expect("admitted"));
        release.send(()).expect("release");
        for answer in answers {
            answer.await.expect("read");
        }
        let ran = ran.lock().expect("log").clone();
        assert_eq!(ran, ["a0", "b0", "a1", "a2", "a3", "a4", "a5"]);
    }

    /// A client with its bound of reads in flight (running or queued) is refused the
    /// next at once, naming the bound; once one is answered it may read again, and
    /// other clients were never held to its count.
    #[tokio::test]
    async fn the_read_past_a_clients_bound_is_refused() {
        let threads = ReadWorkers::start(1, 2, Duration::ZERO).expect("start");
        let (release, held) = std::sync::mpsc::channel::<()>();
        let running = threads
            .spawn(client(1), move || held.recv().is_ok())
            .expect("first");
        let queued = threads.spawn(client(1), || 2).expect("second");
        let refused = threads.spawn(client(1), || 3).err();
        assert_eq!(refused, Some(OverBound { bound: 2 }));
        let other = threads.spawn(client(2), || 4).expect("another client");
        release.send(()).expect("release");
        assert!(running.await.expect("read"));
        assert_eq!(queued.await.expect("read"), 2);
        assert_eq!(other.await.expect("read"), 4);
        let again = threads.spawn(client(1), || 5).expect("room again");
        assert_eq!(again.await.expect("read"), 5);
    }

    /// The next page of an answer already begun is never refused by its client's bound
    /// (the answer would be cut half-sent): it waits its turn and is served.
    #[tokio::test]
    async fn a_continuing_read_passes_the_bound_and_waits_its_turn() {
        let threads = ReadWorkers::start(1, 1, Duration::ZERO).expect("start");
        let (release, held) = std::sync::mpsc::channel::<()>();
        let running = threads
            .spawn(client(1), move || held.recv().is_ok())
            .expect("first");
        assert!(
            threads.spawn(client(1), || 2).is_err(),
            "a new read is refused"
        );
        let page = threads
            .spawn_as(client(1), Admission::Continuing, || 3)
            .expect("the next page is admitted past the bound");
        release.send(()).expect("release");
        assert!(running.await.expect("read"));
        assert_eq!(page.await.expect("read"), 3);
    }
}
