//! Slow readers never take every read thread. A client whose read ran longer than
//! `storage.slow_read_ms` counts as a slow reader for the next [`MEMORY`]; slow
//! readers' reads together run on all the read threads but one, so the one left is
//! there for everyone else's short reads. Lanes (`read_lanes.rs`) make clients take
//! turns but cannot help a short read when every thread is busy with a long one: eight
//! clients looping one heavy read each would otherwise hold all eight threads, and the
//! next short read would wait for one of them to finish.

use super::read_client::ReadClient;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a slow read marks its client.
pub(super) const MEMORY: Duration = Duration::from_secs(10);

/// Clients remembered at most; past it the expired ones are forgotten.
const REMEMBERED: usize = 4096;

pub(super) struct SlowReaders {
    /// A read longer than this marks its client (`None`: nobody is ever slow).
    threshold: Option<Duration>,
    /// Slow readers' reads that may run at once.
    cap: usize,
    /// Slow readers' reads running now.
    running: usize,
    /// Each slow reader, until when.
    until: HashMap<ReadClient, Instant>,
}

impl SlowReaders {
    /// For a pool of `threads`; `threshold` zero: nobody is ever slow.
    pub(super) fn new(threads: usize, threshold: Duration) -> SlowReaders {
        SlowReaders {
            threshold: (!threshold.is_zero()).then_some(threshold),
            cap: threads.saturating_sub(1).max(1),
            running: 0,
            until: HashMap::new(),
        }
    }

    fn is_slow(&self, client: &ReadClient) -> bool {
        self.until
            .get(client)
            .is_some_and(|until| Instant::now() < *until)
    }

    /// Whether a read of `client` may start now.
    pub(super) fn may_start(&self, client: &ReadClient) -> bool {
        self.running < self.cap || !self.is_slow(client)
    }

    /// A read of `client` starts; the answer says whether it counts as a slow reader's
    /// (hand it back to [`SlowReaders::finished`]).
    pub(super) fn started(&mut self, client: &ReadClient) -> bool {
        let slow = self.is_slow(client);
        if slow {
            self.running += 1;
        }
        slow
    }

    /// A read of `client` that [`SlowReaders::started`] counted as `slow` finished,
    /// having run for `took`.
    pub(super) fn finished(&mut self, client: &ReadClient, slow: bool, took: Duration) {
        if slow {
            self.running = self.running.saturating_sub(1);
        }
        if self.threshold.is_some_and(|threshold| took > threshold) {
            if self.until.len() >= REMEMBERED {
                let now = Instant::now();
                self.until.retain(|_, until| now < *until);
            }
            self.until.insert(client.clone(), Instant::now() + MEMORY);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::read_workers::ReadWorkers;
    use super::*;
    use std::sync::mpsc;

    fn client(n: u64) -> ReadClient {
        ReadClient::Anonymous(n)
    }

    /// Two threads. Client A read slowly once; while one of its reads holds a thread,
    /// its next read waits although the other thread is idle, and client B's read runs
    /// there at once.
    #[tokio::test]
    async fn a_slow_reader_leaves_one_thread_to_the_others() {
        let threads = ReadWorkers::start(2, 0, Duration::from_millis(5)).expect("start");
        let slow = threads.spawn(client(1), || std::thread::sleep(Duration::from_millis(20)));
        slow.expect("admitted").await.expect("read");

        let (release, held) = mpsc::channel::<()>();
        let (release_next, held_next) = mpsc::channel::<()>();
        let first = threads
            .spawn(client(1), move || held.recv().is_ok())
            .expect("admitted");
        let next = threads
            .spawn(client(1), move || held_next.recv().is_ok())
            .expect("admitted");
        let other = threads.spawn(client(2), || 7).expect("admitted");
        let answered = tokio::time::timeout(Duration::from_secs(5), other).await;
        assert_eq!(
            answered
                .expect("B's read found the thread A may not take")
                .expect("read"),
            7
        );
        assert_eq!(threads.waiting(), 1, "A's next read waits for A's first");
        release.send(()).expect("release");
        release_next.send(()).expect("release");
        assert!(first.await.expect("read"));
        assert!(next.await.expect("read"));
    }

    /// A client is not slow until one of its reads was, and the mark goes by itself.
    #[test]
    fn only_a_read_past_the_threshold_marks_its_client() {
        let mut slow = SlowReaders::new(2, Duration::from_millis(50));
        let a = client(1);
        let counted = slow.started(&a);
        assert!(!counted);
        slow.finished(&a, counted, Duration::from_millis(10));
        assert!(!slow.is_slow(&a));
        slow.finished(&a, false, Duration::from_millis(60));
        assert!(slow.is_slow(&a));
        assert!(
            slow.started(&a) && !slow.may_start(&a),
            "one slow read at most of 2"
        );
        assert!(slow.may_start(&client(2)));
        slow.until.insert(a.clone(), Instant::now());
        assert!(!slow.is_slow(&a));
        assert!(SlowReaders::new(2, Duration::ZERO).threshold.is_none());
    }
}
