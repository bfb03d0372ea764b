//! What an operator reads when the relay starts (`src/first_start.rs`, `src/logging.rs`):
//! once, where it listens, what it serves, where its data and key live, how to open the
//! console, and that a first start created the data directory; `[log] format = "json"`
//! makes every line one JSON object carrying the same facts; `[log] level` filters.

mod support;

use serde_json::Value;

#[test]
fn a_first_start_says_where_everything_is_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = support::log_until(dir.path(), &[], "console").join("\n");
    assert_eq!(log.matches("buzz-relay is up").count(), 1, "{log}");
    let data = std::path::absolute(dir.path().join("data")).expect("absolute");
    for expected in [
        "websocket    ws://127.0.0.1:".to_owned(),
        "http         http://127.0.0.1:".to_owned(),
        "communities  localhost (open)".to_owned(),
        "plugins      artifacts, channel_windows, media, search, snapshot, sync".to_owned(),
        format!("data         {}", data.display()),
        format!("relay key    {}", data.join("relay.key").display()),
        "config       none (built-in defaults)".to_owned(),
        "console      buzz-admin".to_owned(),
        format!("(first start: created {}", data.display()),
    ] {
        assert!(log.contains(&expected), "missing {expected:?} in:\n{log}");
    }
    // Plain text when stderr is not a terminal.
    assert!(!log.contains('\u{1b}'), "no colour codes in a pipe:\n{log}");

    // A second start finds its data: no "created" line; a config file is named, and the
    // console command points at it.
    std::fs::write(
        dir.path().join("config.toml"),
        "[plugins.read_state]\nenabled = true\n",
    )
    .expect("config");
    let log = support::log_until(dir.path(), &[], "console").join("\n");
    assert!(!log.contains("first start"), "{log}");
    assert!(log.contains("read_state"), "{log}");
    let config = std::path::absolute(dir.path().join("config.toml")).expect("absolute");
    assert!(
        log.contains(&format!(
            "console      buzz-admin --config {}",
            config.display()
        )),
        "{log}"
    );
}

#[test]
fn json_logs_are_one_object_per_line_with_the_same_facts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = support::log_until(
        dir.path(),
        &[("BUZZ__LOG__FORMAT", "json")],
        "relay started",
    );
    let lines: Vec<Value> = log
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert!(lines.iter().all(|l| l["timestamp"].is_string()
        && l["level"].is_string()
        && l["target"].is_string()
        && l["message"].is_string()));
    let started: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"] == "relay started")
        .collect();
    assert_eq!(started.len(), 1, "{log:?}");
    let started = started[0];
    assert!(started["websocket"]
        .as_str()
        .is_some_and(|w| w.starts_with("ws://127.0.0.1:")));
    assert_eq!(
        started["plugins"],
        "artifacts, channel_windows, media, search, snapshot, sync"
    );
    assert_eq!(started["created_data_dir"], true);
    // A field the text line carries is a field of the JSON object, not part of the text.
    let plugin_lines: Vec<&Value> = lines
        .iter()
        .filter(|l| l["message"] == "plugin enabled")
        .collect();
    assert!(
        plugin_lines.iter().any(|l| l["plugin"] == "artifacts"),
        "{log:?}"
    );
}

#[test]
fn the_level_filters_and_a_bad_level_refuses_to_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    // The start-up block is not a log event: it is printed whatever the level.
    let log = support::log_until(dir.path(), &[("BUZZ__LOG__LEVEL", "warn")], "console");
    assert!(
        log.iter().any(|l| l.contains("buzz-relay is up")),
        "{log:?}"
    );
    assert!(
        !log.iter().any(|l| l.contains(" INFO ")),
        "info lines under level = warn: {log:?}"
    );

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_buzz-relay"))
        .current_dir(dir.path())
        .env_remove("RUST_LOG")
        .env_remove("RUST_BACKTRACE")
        .env("BUZZ__LOG__LEVEL", "warn,=[")
        .output()
        .expect("run buzz-relay");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.starts_with("error:") && stderr.contains("log.level"),
        "{stderr}"
    );
}
