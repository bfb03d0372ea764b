//! Running the real `buzz-relay` binary in a test and reading what it logs.

#![allow(dead_code)] // each suite uses its own subset

use std::io::BufRead;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Start `buzz-relay` in `dir` on free ports with `env` set, read its stderr until a line
/// contains `until` (or 30 s pass), stop it, and return every line read.
pub(crate) fn log_until(dir: &Path, env: &[(&str, &str)], until: &str) -> Vec<String> {
    let relay = Command::new(env!("CARGO_BIN_EXE_buzz-relay"));
    run_until(configured(relay, dir, env), until, |_| {})
}

/// `command` (the relay, or a shell that becomes it) set up as [`log_until`] runs it: in
/// `dir`, on free ports, with `env` set, stderr read.
pub(crate) fn configured(mut command: Command, dir: &Path, env: &[(&str, &str)]) -> Command {
    command
        .current_dir(dir)
        .env_remove("DATABASE_URL")
        .env_remove("RUST_LOG")
        .env("BUZZ__SERVER__BIND", "127.0.0.1:0")
        .env("BUZZ__METRICS__BIND", "127.0.0.1:0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (key, value) in env {
        command.env(key, value);
    }
    command
}

/// Run `command`, read its stderr until a line contains `until` (or 30 s pass), hand its
/// pid to `running` while it still runs, stop it, and return every line read.
pub(crate) fn run_until(
    mut command: Command,
    until: &str,
    running: impl FnOnce(u32),
) -> Vec<String> {
    let mut child = command.spawn().expect("start buzz-relay");
    let stderr = child.stderr.take().expect("stderr");
    let (lines, seen) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            if lines.send(line).is_err() {
                return;
            }
        }
    });
    let mut log = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !log.iter().any(|l: &String| l.contains(until)) {
        let left = deadline.saturating_duration_since(Instant::now());
        match seen.recv_timeout(left) {
            Ok(line) => log.push(line),
            Err(_) => break,
        }
    }
    // The lines a block prints right after the marker.
    while let Ok(line) = seen.recv_timeout(Duration::from_millis(300)) {
        log.push(line);
    }
    running(child.id());
    let _ = child.kill();
    let _ = child.wait();
    log
}
