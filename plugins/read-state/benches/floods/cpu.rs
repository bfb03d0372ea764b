//! CPU time from `/proc`: this process's threads, and the machine's postgres processes.

use super::*;

/// CPU ticks (1/100 s) of this process's threads: (relay's, bench client's).
pub(crate) fn cpu_ticks() -> (u64, u64) {
    let (mut relay, mut bench) = (0, 0);
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return (0, 0);
    };
    for entry in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        if let Some((comm, ticks)) = stat_ticks(&stat) {
            if comm.starts_with("bench-client") {
                bench += ticks;
            } else {
                relay += ticks;
            }
        }
    }
    (relay, bench)
}

/// CPU ticks of every `postgres` process on the machine (others' work included).
pub(crate) fn postgres_ticks() -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|s| stat_ticks(&s))
        .filter(|(comm, _)| comm == "postgres")
        .map(|(_, t)| t)
        .sum()
}

/// `(comm, utime + stime)` of a `/proc` stat line.
pub(crate) fn stat_ticks(stat: &str) -> Option<(String, u64)> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    let fields: Vec<&str> = stat.get(close + 1..)?.split_whitespace().collect();
    // After the comm: state is field 3; utime and stime are fields 14 and 15.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((comm, utime + stime))
}

/// Run `f`, returning its value, relay CPU ms and postgres CPU ms it took.
pub(crate) async fn with_cpu<T>(
    f: impl Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<(T, f64, f64)> {
    let (relay0, _) = cpu_ticks();
    let pg0 = postgres_ticks();
    let out = f.await?;
    let (relay1, _) = cpu_ticks();
    let pg1 = postgres_ticks();
    Ok((
        out,
        (relay1 - relay0) as f64 * 10.0,
        (pg1.saturating_sub(pg0)) as f64 * 10.0,
    ))
}
