//! The `buzz-relay` binary's contracts: `migrate --status`, `migrate`, refusing to start
//! with pending migrations when auto_migrate is false, `identity [--reset]`.

use std::process::Command;

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
            "[server]\nbind = \"127.0.0.1:0\"\n[storage]\ndatabase_url = \"sqlite://{db}\"\nauto_migrate = false\n[relay]\ndata_dir = \"{data}\"\n",
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
    assert!(ok && text.contains("2 migration(s) applied"), "{text}");

    let (ok, text) = relay(&config, &["migrate", "--status"]);
    assert!(
        ok && text.contains("applied  20261129000001")
            && text.contains("applied  20261130000001")
            && text.contains("0 pending"),
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
                "[server]\nbind = \"127.0.0.1:0\"\n[storage]\ndatabase_url = \"sqlite://{db}\"\n[relay]\ndata_dir = \"{data}\"\nprivate_key = \"{key}\"\n",
                db = dir.path().join("buzz.db").display(),
                data = dir.path().display()
            ),
        )
        .expect("write config");
        config
    };
    let first = buzz_core::keys::Keys::generate();
    let second = buzz_core::keys::Keys::generate();
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
