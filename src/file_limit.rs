//! The open-file limit, raised at start: every WebSocket is a descriptor, and team chat
//! keeps every member's socket open all day. Shells and service managers commonly start
//! processes with a soft limit of 1,024 under a far higher hard limit, which would cap
//! the relay near a thousand connections; a process may raise its soft limit up to the
//! hard one without privileges, so the relay does, and the start-up block says what it
//! got (`first_start.rs`).

use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};

/// The open-file limit the relay runs with, and what it was before.
#[derive(Debug, Clone)]
pub(crate) struct FileLimit {
    /// The soft limit the process started with (`None`: unlimited).
    pub before: Option<u64>,
    /// The soft limit now in force.
    pub now: Option<u64>,
    /// Why it could not be raised, when it could not.
    pub error: Option<String>,
}

impl FileLimit {
    /// Raise the soft limit to the hard limit (when the hard limit is unlimited, to the
    /// kernel's per-process ceiling, `fs.nr_open`: Linux refuses an unlimited one).
    pub(crate) fn raise() -> FileLimit {
        let start = getrlimit(Resource::Nofile);
        let target = start.maximum.or_else(nr_open);
        let mut limit = FileLimit {
            before: start.current,
            now: start.current,
            error: None,
        };
        let Some(target) = target else {
            return limit;
        };
        if start.current.is_some_and(|current| current >= target) {
            return limit;
        }
        let raised = Rlimit {
            current: Some(target),
            maximum: start.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => limit.now = getrlimit(Resource::Nofile).current,
            Err(err) => limit.error = Some(format!("raising it to {target}: {err}")),
        }
        limit
    }

    /// How the start-up block says it: `20000 (raised from 1024, the hard limit)`.
    pub(crate) fn describe(&self) -> String {
        let show = |n: Option<u64>| n.map_or("unlimited".to_owned(), |n| n.to_string());
        match (&self.error, self.now == self.before) {
            (Some(err), _) => format!("{} (not raised: {err})", show(self.now)),
            (None, true) => format!("{} (the hard limit)", show(self.now)),
            (None, false) => format!(
                "{} (raised from {}, the hard limit)",
                show(self.now),
                show(self.before)
            ),
        }
    }
}

/// `/proc/sys/fs/nr_open`: the most descriptors Linux lets one process have.
fn nr_open() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()?
        .trim()
        .parse()
        .ok()
}
