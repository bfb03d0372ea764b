//! Per-thread CPU time from `/proc/self/task` (Linux), grouped by thread name, so the
//! figures say where ingest time goes: the storage writer, the relay's workers (WebSocket,
//! verification), its blocking pool (reads, Lua policies) or the bench client itself.

use std::collections::HashMap;

/// Clock ticks per second of `/proc` times (`CLK_TCK`, 100 on Linux).
const TICKS: f64 = 100.0;

const GROUPS: [(&str, &str); 6] = [
    ("buzz-store-writ", "relay storage writer thread"),
    ("buzz-store-chec", "relay WAL checkpoint thread"),
    ("actix-server wo", "relay workers (ws, verify, pipeline)"),
    ("buzz-store-read", "relay read threads (store reads)"),
    (
        "tokio-rt-worker",
        "relay blocking pool (other spawn_blocking work)",
    ),
    (super::CLIENT_THREAD, "bench client (publishers)"),
];

pub(super) struct Snapshot(HashMap<u64, (String, u64)>);

pub(super) fn snapshot() -> Snapshot {
    let mut threads = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Snapshot(threads);
    };
    for entry in dir.flatten() {
        let Ok(tid) = entry.file_name().to_string_lossy().parse::<u64>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some(sample) = parse(&stat) {
            threads.insert(tid, sample);
        }
    }
    Snapshot(threads)
}

/// `(comm, utime + stime)` from a `stat` line.
fn parse(stat: &str) -> Option<(String, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // After the comm: state is field 3; utime and stime are fields 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((comm, utime + stime))
}

impl Snapshot {
    /// CPU seconds per group since `before` (threads that exited meanwhile are lost).
    pub(super) fn since(&self, before: &Snapshot) -> Vec<(&'static str, f64)> {
        let mut by_group: HashMap<&'static str, u64> = HashMap::new();
        for (tid, (comm, ticks)) in &self.0 {
            let earlier = before.0.get(tid).map_or(0, |(_, t)| *t);
            let group = GROUPS
                .iter()
                .find(|(prefix, _)| comm.starts_with(prefix))
                .map_or("other threads", |(_, name)| name);
            *by_group.entry(group).or_default() += ticks.saturating_sub(earlier);
        }
        let mut groups: Vec<(&'static str, f64)> = by_group
            .into_iter()
            .map(|(group, ticks)| (group, ticks as f64 / TICKS))
            .collect();
        groups.sort_by(|a, b| b.1.total_cmp(&a.1));
        groups
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn stat_lines_parse_even_with_odd_thread_names() {
        let line = "4242 (actix-server wo) S 1 2 3 4 5 6 7 8 9 10 250 17 0 0 20 0";
        assert_eq!(super::parse(line), Some(("actix-server wo".into(), 267)));
        let odd = "7 (a) b (c)) R 1 2 3 4 5 6 7 8 9 10 3 4 0 0";
        assert_eq!(super::parse(odd), Some(("a) b (c)".into(), 7)));
        assert_eq!(super::parse("garbage"), None);
    }
}
