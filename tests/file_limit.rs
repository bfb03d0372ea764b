//! The relay raises its open-file limit to the hard limit at start and says so
//! (`src/file_limit.rs`): started from a shell whose soft limit is 256, the running
//! process has the hard limit as its soft one, and the start-up block names both.

mod support;

use std::process::Command;

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
    let mut shell = Command::new("sh");
    shell
        .arg("-c")
        .arg("ulimit -Sn 256 && exec \"$0\"")
        .arg(env!("CARGO_BIN_EXE_buzz-relay"));
    let mut running = None;
    let log = support::run_until(
        support::configured(shell, dir.path(), &[]),
        "console",
        |pid| running = Some(open_files(&pid.to_string())),
    );
    let running = running.expect("the relay ran");
    let log = log.join("\n");
    assert_eq!(running, (hard.clone(), hard.clone()), "{log}");
    let expected = format!("open files   {hard} (raised from 256, the hard limit)");
    assert!(log.contains(&expected), "missing {expected:?} in:\n{log}");
}
