//! Which consecutive event jobs PostgreSQL may insert as one group: a Nostr rule about
//! `e` references, since a group's follow-ups must see what they would one job at a time.

use super::jobs::{Request, Work};
use std::collections::HashSet;

/// How many leading jobs of `jobs` form one group: independent event jobs, up to the
/// first whose event an earlier member names in an `e` tag (that earlier member's
/// follow-up must not find it stored yet, as it would not one job at a time), or that
/// names an earlier member itself (its follow-up reads that member's rows, which the
/// group writes only after every follow-up: `GroupWrites`).
pub(super) fn group_len(jobs: &[Request]) -> usize {
    let mut named: HashSet<(i64, &str)> = HashSet::new();
    let mut members: HashSet<(i64, &str)> = HashSet::new();
    for (len, request) in jobs.iter().enumerate() {
        let Work::Event {
            event,
            independent: true,
            ..
        } = &request.work
        else {
            return len;
        };
        let community = event.community_id;
        if named.contains(&(community, event.event.id.as_str()))
            || event
                .event
                .tag_values("e")
                .any(|id| members.contains(&(community, id)))
        {
            return len;
        }
        named.extend(event.event.tag_values("e").map(|id| (community, id)));
        members.insert((community, event.event.id.as_str()));
    }
    jobs.len()
}

#[cfg(test)]
mod tests {
    use super::super::jobs::{AnyBox, Request, Work};
    use super::*;
    use crate::stored::StoredEvent;
    use buzz_nostr::keys::Keys;
    use std::sync::Arc;
    use tokio::sync::oneshot;

    fn event_job(event: buzz_nostr::event::Event, independent: bool) -> Request {
        let (reply, _answer) = oneshot::channel();
        Request {
            work: Work::Event {
                event: Arc::new(StoredEvent {
                    channel: event.channel_id().map(str::to_owned),
                    event,
                    community_id: 1,
                    received_at: 0,
                }),
                independent,
                then: Box::new(|_, _, _| Ok(Box::new(()) as AnyBox)),
            },
            reply,
        }
    }

    fn any_job() -> Request {
        let (reply, _answer) = oneshot::channel();
        Request {
            work: Work::Any(Box::new(|_| Ok(Box::new(()) as AnyBox))),
            reply,
        }
    }

    /// A group ends before a job that is not an independent event, before an event an
    /// earlier member names (that member's follow-up must not find it stored yet), and
    /// before an event that names an earlier member (it must find that member's rows).
    #[test]
    fn groups_stop_where_one_at_a_time_would_differ() {
        let keys = Keys::generate();
        let note = |i: i64| keys.sign(1, vec![], &format!("note {i}"), 1_000 + i);
        let (a, b, c) = (note(1), note(2), note(3));
        let names_c = keys.sign(1, vec![vec!["e".into(), c.id.clone()]], "re", 1_000);

        let jobs = vec![
            event_job(a.clone(), true),
            event_job(b.clone(), true),
            any_job(),
            event_job(c.clone(), true),
        ];
        assert_eq!(group_len(&jobs), 2);
        assert_eq!(group_len(&jobs[2..]), 0);

        let jobs = vec![event_job(a.clone(), true), event_job(b.clone(), false)];
        assert_eq!(group_len(&jobs), 1);

        // `names_c` comes first and names `c`: `c` starts the next group.
        let jobs = vec![
            event_job(names_c.clone(), true),
            event_job(a.clone(), true),
            event_job(c.clone(), true),
            event_job(b.clone(), true),
        ];
        assert_eq!(group_len(&jobs), 2);
        assert_eq!(group_len(&jobs[2..]), 2);

        // Naming an event earlier in the group ends it too: the earlier member's rows
        // (its thread row, say) are written only after the group's follow-ups.
        let jobs = vec![
            event_job(c, true),
            event_job(names_c, true),
            event_job(a, true),
        ];
        assert_eq!(group_len(&jobs), 1);
        assert_eq!(group_len(&jobs[1..]), 2);
    }
}
