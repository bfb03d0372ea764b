//! The relay raises its open-file limit to the hard limit at start and says so
//! (`src/file_limit.rs`): started from a shell whose soft limit is 256, the running
//! process has the hard limit as its soft one, and the start-up block names both.

use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// "Max open files" of `/proc/<pid>/limits`: (soft, hard) as written there.
fn open_files(pid: &str) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("a Max open files line");
    let mut fields = line["Max open files".len()..].split_whitespace();
    let soft = fields.next().expect("soft").to_owned();
    let hard = fields.next().expect("hard").to_owned();
    (soft, hard)
}

#[test]
fn the_soft_limit_is_raised_to_the_hard_limit_and_the_block_says_so() {
    let (_, hard) = open_files("self");
    let hard_n: u64 = hard.parse().expect("a finite hard limit on this machine");
    assert!(
        hard_n > 256,
        "the hard limit {hard} leaves nothing to raise"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    // The shell lowers its soft limit, then becomes the relay (same pid).
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -Sn 256 && exec \"$0\"")
        .arg(env!("CARGO_BIN_EXE_buzz-relay"))
        .current_dir(dir.path())
        .env_remove("DATABASE_URL")
        .env_remove("RUST_LOG")
        .env("BUZZ__SERVER__BIND", "127.0.0.1:0")
        .env("BUZZ__METRICS__BIND", "127.0.0.1:0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start buzz-relay");
    let pid = child.id().to_string();
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
    while !log.iter().any(|l: &String| l.contains("console")) {
        let left = deadline.saturating_duration_since(Instant::now());
        match seen.recv_timeout(left) {
            Ok(line) => log.push(line),
            Err(_) => break,
        }
    }
    let running = open_files(&pid);
    let _ = child.kill();
    let _ = child.wait();
    let log = log.join("\n");
    assert_eq!(running, (hard.clone(), hard.clone()), "{log}");
    let expected = format!("open files   {hard} (raised from 256, the hard limit)");
    assert!(log.contains(&expected), "missing {expected:?} in:\n{log}");
}
