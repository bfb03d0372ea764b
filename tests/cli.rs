//! The `buzz-relay` binary's contracts: `migrate --status`, `migrate`, refusing to start
//! with pending migrations when auto_migrate is false, `identity [--reset]`.

use std::process::Command;

mod support;

fn relay(config: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_buzz-relay"))
        .arg("--config")
        .arg(config)
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("BUZZ_AUTO_MIGRATE")
        .output()
        .expect("run buzz-relay");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn migrate_status_then_migrate_then_status() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[server]\nbind = \"127.0.0.1:0\"\n[metrics]\nbind = \"127.0.0.1:0\"\n[storage]\ndatabase_url = \"sqlite://{db}\"\nauto_migrate = false\n[relay]\ndata_dir = \"{data}\"\n",
            db = dir.path().join("buzz.db").display(),
            data = dir.path().display()
        ),
    )
    .expect("write config");

    let (ok, text) = relay(&config, &["migrate", "--status"]);
    assert!(ok, "{text}");
    assert!(
        text.contains("pending  20261129000001") && text.contains("0 applied"),
        "{text}"
    );

    // Starting now must fail and say which migrations are pending.
    let (ok, text) = relay(&config, &[]);
    assert!(!ok, "relay must refuse to start: {text}");
    assert!(
        text.contains("pending migrations") && text.contains("20261129000001"),
        "{text}"
    );

    let (ok, text) = relay(&config, &["migrate"]);
    // Core's, plus every built plugin's (each labelled with its owner).
    let applied: usize = text
        .lines()
        .find_map(|l| l.strip_suffix(" migration(s) applied"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0);
    assert!(ok && applied >= 3, "{text}");

    let (ok, text) = relay(&config, &["migrate", "--status"]);
    assert!(
        ok && text.contains("applied  20261129000001")
            && text.contains("applied  20261130000001")
            && text.contains("applied  20261201000001  artifacts")
            && text.contains("applied  20261201000002  core")
            && text.contains("applied  20261201100000  read_state")
            && text.contains("0 pending"),
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.starts_with("applied  ")).count(),
        applied,
        "{text}"
    );
}

/// A database remembers the relay key that first opened it: the same database under
/// another key refuses to start, naming both keys, until `identity --reset`.
#[test]
fn relay_identity_is_recorded_checked_and_reset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let write_config = |name: &str, key: &str| {
        let config = dir.path().join(name);
        std::fs::write(
            &config,
            format!(
                "[server]\nbind = \"127.0.0.1:0\"\n[metrics]\nbind = \"127.0.0.1:0\"\n[storage]\ndatabase_url = \"sqlite://{db}\"\n[relay]\ndata_dir = \"{data}\"\nprivate_key = \"{key}\"\n",
                db = dir.path().join("buzz.db").display(),
                data = dir.path().display()
            ),
        )
        .expect("write config");
        config
    };
    let first = buzz_nostr::keys::Keys::generate();
    let second = buzz_nostr::keys::Keys::generate();
    let first_config = write_config("first.toml", &first.secret_hex());
    let second_config = write_config("second.toml", &second.secret_hex());

    let (ok, text) = relay(&first_config, &["identity"]);
    assert!(ok && text.contains("no relay key recorded yet"), "{text}");
    // `--claim` records the key exactly as starting the relay does (without serving).
    let (ok, text) = relay(&first_config, &["identity", "--claim"]);
    assert!(ok && text.contains(first.pubkey()), "{text}");
    let (ok, text) = relay(&first_config, &["identity"]);
    assert!(ok && text.contains(first.pubkey()), "{text}");

    let (ok, text) = relay(&second_config, &[]);
    assert!(!ok, "another key must refuse to start: {text}");
    assert!(
        text.contains(first.pubkey())
            && text.contains(second.pubkey())
            && text.contains("identity --reset"),
        "{text}"
    );

    let (ok, text) = relay(&second_config, &["identity", "--reset"]);
    assert!(
        ok && text.contains(&format!("forgot relay key {}", first.pubkey())),
        "{text}"
    );
    let (ok, text) = relay(&second_config, &["identity", "--claim"]);
    assert!(ok && text.contains(second.pubkey()), "{text}");
}

fn run(args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_buzz-relay"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run buzz-relay");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn policy_check_accepts_the_defaults_and_refuses_broken_scripts() {
    let (ok, text) = run(&["policy", "check", "policies/access.lua"]);
    assert!(ok && text.contains("can_read"), "{text}");
    let (ok, text) = run(&["policy", "check", "policies/moderation.lua"]);
    assert!(ok && text.contains("moderate"), "{text}");

    let dir = tempfile::tempdir().expect("tempdir");
    let broken = dir.path().join("broken.lua");
    std::fs::write(&broken, "function can_read(req) return buzz.allow( end").expect("write");
    let (ok, text) = run(&["policy", "check", broken.to_str().expect("utf8 path")]);
    assert!(!ok, "a syntax error must fail: {text}");
    let escape = dir.path().join("escape.lua");
    std::fs::write(
        &escape,
        "os.execute('true')\nfunction can_read(req) return buzz.allow() end",
    )
    .expect("write");
    let (ok, text) = run(&["policy", "check", escape.to_str().expect("utf8 path")]);
    assert!(!ok, "the sandbox has no os library: {text}");
}

#[test]
fn policy_test_runs_the_shipped_fixtures() {
    let (ok, text) = run(&["policy", "test", "policies/fixtures/default.json"]);
    assert!(ok && text.contains(" passed, 0 failed"), "{text}");
}

/// Run `buzz-relay` in `cwd` with `args` until it exits (a refusal), returning
/// (success, stderr).
fn refusal(cwd: &std::path::Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_buzz-relay"))
        .current_dir(cwd)
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("RUST_BACKTRACE")
        .env("BUZZ__SERVER__BIND", "127.0.0.1:0")
        .env("BUZZ__METRICS__BIND", "127.0.0.1:0")
        .output()
        .expect("run buzz-relay");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The relay's defaults work from any directory: the compiled-in policies run (and the
/// log says so) when `policies/*.lua` are not there.
#[test]
fn starts_with_its_defaults_from_any_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = support::log_until(dir.path(), &[("RUST_LOG", "info")], "relay listening").join("\n");
    assert!(log.contains("relay listening"), "{log}");
    assert_eq!(
        log.matches("relay listening").count(),
        1,
        "said once: {log}"
    );
    assert!(
        log.contains("compiled-in default") && log.contains("built-in access.lua"),
        "{log}"
    );
    assert!(dir.path().join("data/buzz.db").exists() && dir.path().join("data/relay.key").exists());
}

/// A config naming a plugin this binary lacks refuses to start, names what is built,
/// prints one line (no backtrace) and creates nothing on disk.
#[test]
fn a_config_naming_an_unbuilt_plugin_refuses_and_creates_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("config.toml"),
        "[plugins.no_such_plugin]\nenabled = true\n",
    )
    .expect("config");
    let (ok, stderr) = refusal(dir.path(), &[]);
    assert!(!ok, "{stderr}");
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains("config.toml")
            && errors[0].contains("no_such_plugin")
            && errors[0].contains("built: channel_windows"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("stack backtrace") && !stderr.contains("Caused by"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("data").exists(),
        "nothing is created on disk"
    );
}

/// A moderation script put in the access slot would open every private channel: the
/// relay refuses to start, says why, and creates nothing.
#[test]
fn a_moderation_script_in_the_access_slot_refuses_to_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    std::fs::write(
        dir.path().join("config.toml"),
        format!(
            "[policies]\naccess = \"{}\"\n",
            policies.join("examples/announcements.lua").display()
        ),
    )
    .expect("config");
    let (ok, stderr) = refusal(dir.path(), &[]);
    assert!(!ok, "{stderr}");
    assert!(
        stderr.contains("announcements.lua")
            && stderr.contains("defines neither can_read nor can_write"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("data").exists(),
        "nothing is created on disk"
    );
}

/// A policy path someone named must exist; relative paths resolve against the config
/// file's directory; a refusal creates nothing.
#[test]
fn a_missing_named_policy_refuses_and_paths_resolve_against_the_config_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let home = dir.path().join("etc");
    std::fs::create_dir(&home).expect("dir");
    std::fs::write(
        home.join("relay.toml"),
        "[policies]\naccess = \"rules/access.lua\"\n",
    )
    .expect("config");
    let (ok, stderr) = refusal(dir.path(), &["--config", "etc/relay.toml"]);
    assert!(!ok, "{stderr}");
    let expected = home.join("rules/access.lua");
    assert!(
        stderr.contains(&expected.display().to_string()),
        "the path resolves against etc/: {stderr}"
    );
    assert!(!dir.path().join("data").exists() && !home.join("data").exists());

    let (ok, stderr) = refusal(dir.path(), &["--config", "etc/relay.toml", "migrate"]);
    assert!(ok, "migrate needs no policies: {stderr}");
    assert!(
        home.join("data/buzz.db").exists(),
        "the database lives beside the config file"
    );
}

/// SIGTERM stops the relay promptly even while policy calls are being attacked (the
/// issue's `__close` trick and a quadratic pattern, on live connections).
#[cfg(unix)]
#[test]
fn sigterm_exits_promptly_during_a_policy_attack() {
    use buzz_core::testkit::{now, WsClient};
    use buzz_nostr::keys::Keys;
    use std::io::BufRead;

    let dir = tempfile::tempdir().expect("tempdir");
    let policies = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("policies");
    let mut moderation = std::fs::read_to_string(policies.join("moderation.lua")).expect("read");
    moderation.push_str(
        "\nlocal base_moderate = moderate\nfunction moderate(req)\n\
         if req.event.content == 'close' then\n\
           local x <close> = setmetatable({}, {__close = function() while true do end end})\n\
           while true do end\n\
         end\n\
         if req.event.content:find(\"https?://[^%s]-%.exe\") then return buzz.deny(\"blocked\", \"exe\") end\n\
         return base_moderate(req)\nend\n",
    );
    std::fs::write(dir.path().join("moderation.lua"), moderation).expect("moderation");
    std::fs::write(
        dir.path().join("config.toml"),
        format!(
            "[server]\nbind = \"127.0.0.1:0\"\n[metrics]\nbind = \"127.0.0.1:0\"\n[policies]\naccess = \"{}\"\nmoderation = \"moderation.lua\"\n",
            policies.join("access.lua").display()
        ),
    )
    .expect("config");
    let mut child = Command::new(env!("CARGO_BIN_EXE_buzz-relay"))
        .current_dir(dir.path())
        .env_remove("DATABASE_URL")
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start buzz-relay");
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
    // The bound address is in the "relay listening on ws://ADDR" line.
    let addr = loop {
        let line = seen
            .recv_timeout(std::time::Duration::from_secs(30))
            .expect("the relay starts");
        if let Some(rest) = line.split("relay listening on ws://").nth(1) {
            let addr = rest.split_whitespace().next().expect("address");
            break addr
                .parse::<std::net::SocketAddr>()
                .expect("socket address");
        }
    };

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let keys = Keys::generate();
        let attacks = ["close".to_owned(), "http://x".repeat(31_000)];
        let mut sockets = Vec::new();
        for content in attacks.iter().cycle().take(6) {
            let mut ws = WsClient::connect(addr, "localhost").await.expect("connect");
            let event = keys.sign(1, vec![], content, now());
            ws.send(&serde_json::json!(["EVENT", event]))
                .await
                .expect("send");
            sockets.push(ws);
        }
        // One attack is answered (fail closed) before we signal: the attacks are running.
        let answer = sockets[0]
            .recv_where(|v| v[0] == "OK")
            .await
            .expect("an OK");
        assert_eq!(answer[3], "error: policy failure", "{answer}");
    });
    let started = std::time::Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    loop {
        if let Some(exit) = child.try_wait().expect("wait") {
            assert!(exit.success(), "{exit:?}");
            break;
        }
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "still running {:?} after SIGTERM",
            started.elapsed()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// `policy check` without a file lists every community's scripts; `policy test
/// --community` runs fixtures against that community's own scripts.
#[test]
fn policy_commands_work_per_community() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::write(
        dir.path().join("broken.lua"),
        "function can_write(req) return (",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("config.toml"),
        format!(
            "[policies]\naccess = \"{access}\"\nmoderation = \"{moderation}\"\n\
             [[communities]]\nhost = \"localhost\"\nname = \"Local\"\n\
             [[communities]]\nhost = \"acme.example\"\nname = \"Acme\"\n\
             policies = {{ access = \"broken.lua\" }}\n",
            access = root.join("policies/access.lua").display(),
            moderation = root.join("policies/moderation.lua").display(),
        ),
    )
    .expect("config");
    let config = dir.path().join("config.toml");
    let (ok, text) = relay(&config, &["policy", "check"]);
    assert!(!ok, "a broken community script fails the check: {text}");
    assert!(
        text.contains("localhost access:") && text.contains("ok (can_read, can_write)"),
        "{text}"
    );
    assert!(
        text.contains("acme.example access:") && text.contains("BROKEN"),
        "{text}"
    );
    assert!(
        text.contains("acme.example moderation:")
            && !text.contains("acme.example moderation: BROKEN"),
        "{text}"
    );

    let fixtures = root.join("policies/fixtures/default.json");
    let fixtures = fixtures.to_str().expect("utf-8");
    let (ok, text) = relay(
        &config,
        &["policy", "test", fixtures, "--community", "localhost"],
    );
    assert!(ok && text.contains("0 failed"), "{text}");
    let (ok, text) = relay(
        &config,
        &["policy", "test", fixtures, "--community", "acme.example"],
    );
    assert!(!ok, "acme's broken access.lua fails its fixtures: {text}");
    let (ok, text) = relay(
        &config,
        &["policy", "test", fixtures, "--community", "nowhere.example"],
    );
    assert!(
        !ok && text.contains("no community nowhere.example"),
        "{text}"
    );
}

/// `buzz-relay <plugin> <command>`: a plugin's maintenance command runs on the configured
/// database; an unknown plugin or command is one `error:` line naming what exists.
#[test]
fn plugin_commands_run_and_unknown_ones_are_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[storage]\ndatabase_url = \"sqlite://{db}\"\n[relay]\ndata_dir = \"{data}\"\n",
            db = dir.path().join("buzz.db").display(),
            data = dir.path().display()
        ),
    )
    .expect("write config");
    let (ok, text) = relay(&config, &["migrate"]);
    assert!(ok, "{text}");
    let (ok, text) = relay(&config, &["media", "gc"]);
    assert!(ok, "{text}");
    assert!(
        text.starts_with("media gc: 0 blobs (0 bytes) deleted"),
        "{text}"
    );
    let (ok, text) = relay(&config, &["media", "compact"]);
    assert!(!ok && text.contains("it has: gc"), "{text}");
    let (ok, text) = relay(&config, &["nosuch", "gc"]);
    assert!(!ok && text.contains("unknown command \"nosuch\""), "{text}");
    assert!(text.contains("media"), "{text}");
}
