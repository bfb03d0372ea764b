//! The reads waiting for a read thread, one lane per client ([`ReadClient`]), served in
//! turn: the next read a freed thread takes is the head of the lane served least
//! recently, and a lane that had nothing in flight counts as never served. So a client
//! with a hundred reads queued delays another client's read by at most the reads
//! already running — with one queue for everyone (what this replaced) it waited behind
//! all hundred.
//!
//! Each client also has a bound on its reads in flight (running or queued,
//! `limits.max_reads_per_client`): the read past it is refused at once instead of
//! queued, so one client can never hold every read thread. The background lane (reads
//! the relay makes for itself) has no bound.

use super::read_client::ReadClient;
use std::collections::{BTreeSet, HashMap, VecDeque};

/// A client's reads in flight.
struct Lane<J> {
    queued: VecDeque<J>,
    /// Running plus queued.
    in_flight: usize,
    /// When its last read was handed to a thread (0: not since it had nothing in flight).
    served: u64,
}

/// The lanes of one pool of read threads.
pub(super) struct Lanes<J> {
    lanes: HashMap<ReadClient, Lane<J>>,
    /// Lanes with queued reads by (last served, arrival): the first is next.
    ready: BTreeSet<(u64, u64, ReadClient)>,
    /// Reads handed to a thread so far (the clock of `Lane::served`).
    handed: u64,
    /// Lanes that became ready so far (orders lanes never served).
    arrivals: u64,
    /// Reads one client may have in flight (0: no bound).
    bound: usize,
}

/// Whether a read may be refused by its client's bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Admission {
    /// A new read (a REQ's keys, a COUNT, an HTTP request's first read): refused past
    /// the bound.
    Bounded,
    /// The next page of an answer whose first read was admitted: it waits its turn in
    /// the lane but is never refused, or an answer already begun (a `POST /query` whose
    /// 200 left, a REQ whose first events left) would be cut by the client's other
    /// requests. The answer's own length bounds how many such reads follow.
    Continuing,
}

/// The client already has `bound` reads in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct OverBound {
    pub(super) bound: usize,
}

impl<J> Lanes<J> {
    pub(super) fn new(bound: usize) -> Lanes<J> {
        Lanes {
            lanes: HashMap::new(),
            ready: BTreeSet::new(),
            handed: 0,
            arrivals: 0,
            bound,
        }
    }

    /// Count a new read of `client` in flight, unless it is over its bound.
    #[cfg(test)]
    pub(super) fn admit(&mut self, client: &ReadClient) -> Result<(), OverBound> {
        self.admit_as(client, Admission::Bounded)
    }

    /// Count a read of `client` in flight; `Admission::Continuing` (the next page of an
    /// answer already begun) is never refused by the bound, only queued in turn.
    pub(super) fn admit_as(
        &mut self,
        client: &ReadClient,
        admission: Admission,
    ) -> Result<(), OverBound> {
        let lane = self.lanes.entry(client.clone()).or_insert_with(|| Lane {
            queued: VecDeque::new(),
            in_flight: 0,
            served: 0,
        });
        if admission == Admission::Bounded
            && self.bound > 0
            && *client != ReadClient::Background
            && lane.in_flight >= self.bound
        {
            return Err(OverBound { bound: self.bound });
        }
        lane.in_flight += 1;
        Ok(())
    }

    /// An admitted read of `client` goes straight to an idle thread.
    pub(super) fn running(&mut self, client: &ReadClient) {
        self.handed += 1;
        if let Some(lane) = self.lanes.get_mut(client) {
            lane.served = self.handed;
        }
    }

    /// An admitted read of `client` waits for a thread.
    pub(super) fn queue(&mut self, client: &ReadClient, job: J) {
        let Some(lane) = self.lanes.get_mut(client) else {
            return;
        };
        if lane.queued.is_empty() {
            self.arrivals += 1;
            self.ready
                .insert((lane.served, self.arrivals, client.clone()));
        }
        lane.queued.push_back(job);
    }

    /// The next read for a freed thread: the head of the lane served least recently
    /// among those `may_start` lets run now.
    pub(super) fn next_where(
        &mut self,
        may_start: impl Fn(&ReadClient) -> bool,
    ) -> Option<(ReadClient, J)> {
        let first = self
            .ready
            .iter()
            .find(|(_, _, client)| may_start(client))
            .cloned()?;
        self.ready.remove(&first);
        let (_, _, client) = first;
        let lane = self.lanes.get_mut(&client)?;
        let job = lane.queued.pop_front()?;
        self.handed += 1;
        lane.served = self.handed;
        if !lane.queued.is_empty() {
            self.arrivals += 1;
            self.ready
                .insert((lane.served, self.arrivals, client.clone()));
        }
        Some((client, job))
    }

    /// A read of `client` finished (answered, failed or lost).
    pub(super) fn finished(&mut self, client: &ReadClient) {
        if let Some(lane) = self.lanes.get_mut(client) {
            lane.in_flight = lane.in_flight.saturating_sub(1);
            if lane.in_flight == 0 && lane.queued.is_empty() {
                self.lanes.remove(client);
            }
        }
    }

    /// Reads waiting for a thread, all lanes together.
    pub(super) fn queued(&self) -> usize {
        self.lanes.values().map(|lane| lane.queued.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> ReadClient {
        ReadClient::Anonymous(u64::from(last))
    }

    /// A client that queues one read behind another client's many is served after at
    /// most one of them; two busy clients alternate.
    #[test]
    fn lanes_take_turns() {
        let (a, b) = (ip(1), ip(2));
        let mut lanes = Lanes::new(0);
        lanes.admit(&a).expect("no bound");
        lanes.running(&a);
        for n in 1..=5 {
            lanes.admit(&a).expect("no bound");
            lanes.queue(&a, ("a", n));
        }
        lanes.admit(&b).expect("no bound");
        lanes.queue(&b, ("b", 1));
        lanes.admit(&b).expect("no bound");
        lanes.queue(&b, ("b", 2));
        let order: Vec<_> =
            std::iter::from_fn(|| lanes.next_where(|_| true).map(|(_, job)| job)).collect();
        assert_eq!(
            order,
            [
                ("b", 1),
                ("a", 1),
                ("b", 2),
                ("a", 2),
                ("a", 3),
                ("a", 4),
                ("a", 5)
            ]
        );
        assert_eq!(lanes.queued(), 0);
    }

    /// The read past a client's bound is refused; another client is not; a finished
    /// read makes room again; the background is never bounded.
    #[test]
    fn a_client_over_its_bound_is_refused() {
        let (a, b) = (ip(1), ip(2));
        let mut lanes: Lanes<()> = Lanes::new(2);
        lanes.admit(&a).expect("first");
        lanes.admit(&a).expect("second");
        assert_eq!(lanes.admit(&a), Err(OverBound { bound: 2 }));
        lanes.admit(&b).expect("another client");
        lanes.finished(&a);
        lanes.admit(&a).expect("room again");
        // The next page of an answer already begun is queued past the bound, not refused.
        lanes
            .admit_as(&a, Admission::Continuing)
            .expect("a continuing read passes the bound");
        for _ in 0..10 {
            lanes.admit(&ReadClient::Background).expect("background");
        }
    }
}
