//! The refusal budget: how many refused messages (`NOTICE`, `CLOSED`, `OK false`,
//! `NEG-ERR`) one connection may cost the relay per second.
//!
//! A refusal is cheap for the client and not free for the relay: it parsed the message,
//! checked it and wrote an answer. A client looping a message the relay refuses (a
//! COUNT of too many search filters, an EVENT with a bad signature) got tens of
//! thousands of answers a second and took the worker threads every other connection is
//! served on. Past its budget a connection's next message is read later, so its refusals
//! slow down to the rate and nothing it sent is dropped; its live events and heartbeat
//! go on meanwhile, and one `NOTICE rate-limited:` tells it why.
//!
//! The budget is a token bucket of `limits.refusals_per_sec` tokens a second, holding
//! [`BURST_SECS`] seconds' worth, kept as the moment it will be full again (one instant
//! per connection). It is charged after a refusal is written and looked at before the
//! next message is read, so a rate limiter that decides as a token is taken (governor's)
//! does not fit it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Seconds of refusals a connection that was quiet may spend at once: a client that
/// opens its subscriptions before AUTH and gets `auth-required:` for each must not be
/// slowed for it.
pub(super) const BURST_SECS: u32 = 5;

pub(super) struct RefusalBudget {
    /// Time one refusal costs; `None`: no bound.
    cost: Option<Duration>,
    state: Mutex<State>,
}

#[derive(Clone, Copy)]
struct State {
    /// When the bucket will hold its whole burst again (the past: it does now).
    full_at: Instant,
    /// The `rate-limited:` notice went out for the current stretch over budget.
    told: bool,
}

/// What [`RefusalBudget::next_read`] decided.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum NextRead {
    Now,
    /// Not before this instant; `notice` when the client has not been told yet.
    At {
        at: Instant,
        notice: bool,
    },
}

impl RefusalBudget {
    pub(super) fn new(per_sec: u32) -> RefusalBudget {
        let cost = (per_sec > 0).then(|| Duration::from_secs(1) / per_sec);
        RefusalBudget {
            cost,
            state: Mutex::new(State {
                full_at: Instant::now(),
                told: false,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // Two plain fields: a panic while holding the lock leaves nothing half done.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Count one refusal written to the client.
    pub(super) fn charge(&self, now: Instant) {
        let Some(cost) = self.cost else { return };
        let mut state = self.state();
        state.full_at = state.full_at.max(now) + cost;
    }

    /// Whether the next message may be read now. Over budget means more than the burst
    /// is owed: reading resumes once one refusal's worth is under the burst again.
    pub(super) fn next_read(&self, now: Instant) -> NextRead {
        if self.cost.is_none() {
            return NextRead::Now;
        }
        // The burst is BURST_SECS seconds' worth of refusals, whatever the rate.
        let burst = Duration::from_secs(u64::from(BURST_SECS));
        let mut state = self.state();
        let owed = state.full_at.saturating_duration_since(now);
        if owed <= burst {
            if owed.is_zero() {
                state.told = false;
            }
            return NextRead::Now;
        }
        let notice = !std::mem::replace(&mut state.told, true);
        NextRead::At {
            at: now + (owed - burst),
            notice,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_free_then_reads_wait_one_refusal_each() {
        let budget = RefusalBudget::new(10);
        let t = Instant::now();
        for _ in 0..10 * BURST_SECS {
            assert_eq!(budget.next_read(t), NextRead::Now);
            budget.charge(t);
        }
        assert_eq!(
            budget.next_read(t),
            NextRead::Now,
            "exactly the burst is owed"
        );
        budget.charge(t);
        assert_eq!(
            budget.next_read(t),
            NextRead::At {
                at: t + Duration::from_millis(100),
                notice: true
            }
        );
        // Told once for the whole stretch over budget.
        let later = t + Duration::from_millis(50);
        assert!(matches!(
            budget.next_read(later),
            NextRead::At { notice: false, .. }
        ));
        assert_eq!(
            budget.next_read(t + Duration::from_millis(100)),
            NextRead::Now
        );
        // Once the bucket is full again the next stretch is told again.
        let quiet = t + Duration::from_secs(u64::from(BURST_SECS) + 1);
        assert_eq!(budget.next_read(quiet), NextRead::Now);
        for _ in 0..=10 * BURST_SECS {
            budget.charge(quiet);
        }
        assert!(matches!(
            budget.next_read(quiet),
            NextRead::At { notice: true, .. }
        ));
    }

    #[test]
    fn zero_is_no_bound() {
        let budget = RefusalBudget::new(0);
        let t = Instant::now();
        for _ in 0..10_000 {
            budget.charge(t);
        }
        assert_eq!(budget.next_read(t), NextRead::Now);
    }
}
