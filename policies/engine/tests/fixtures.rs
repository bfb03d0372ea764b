//! The default rulebooks and the README's worked examples, proven by their fixture files.

use std::path::{Path, PathBuf};

use buzz_policy::{run_fixtures, FixtureOptions};

fn policies_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    dir.canonicalize().unwrap_or(dir)
}

fn assert_fixtures_pass(path: &Path) {
    let report = run_fixtures(path, &FixtureOptions::default())
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", path.display()));
    println!("{report}");
    assert!(!report.cases.is_empty(), "{} has no cases", path.display());
    assert!(report.is_success(), "fixture failures:\n{report}");
}

#[test]
fn default_policies_pass_their_fixtures() {
    assert_fixtures_pass(&policies_dir().join("fixtures/default.json"));
}

#[test]
fn worked_examples_pass_their_fixtures() {
    let dir = policies_dir().join("examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    assert!(
        files.len() >= 3,
        "expected a fixture file per worked example, found {files:?}"
    );
    for file in files {
        assert_fixtures_pass(&file);
    }
}

/// Writes `fixture` next to a copy of the default scripts and runs it.
fn run_temp_fixture(
    fixture: &str,
    options: &FixtureOptions,
) -> Result<buzz_policy::FixtureReport, buzz_policy::PolicyError> {
    let dir = tempfile::tempdir().expect("temp dir");
    for script in ["access.lua", "moderation.lua"] {
        std::fs::copy(policies_dir().join(script), dir.path().join(script)).expect("copy script");
    }
    let path = dir.path().join("cases.json");
    std::fs::write(&path, fixture).expect("write fixture");
    run_fixtures(&path, options)
}

const SETS: &str =
    r#""scripts": { "default": { "access": "access.lua", "moderation": "moderation.lua" } }"#;

#[test]
fn failing_cases_are_reported_with_expected_and_actual() {
    let fixture = format!(
        r#"{{ {SETS},
          "defaults": {{ "action": "message", "actor": {{ "pubkey": "alice", "community_member": true, "channel_role": "member" }},
                         "channel": {{ "id": "c1", "exists": true }}, "community": {{ "open": true }} }},
          "cases": [
            {{ "name": "right", "expect": "allow" }},
            {{ "name": "wrong kind", "expect": {{ "deny": "blocked" }} }},
            {{ "name": "wrong message", "request": {{ "actor": {{ "channel_role": "guest" }} }},
               "expect": {{ "deny": "restricted", "message": "not this text" }} }},
            {{ "name": "wrong exact message", "request": {{ "actor": {{ "channel_role": "guest" }} }},
               "expect": {{ "deny": "restricted", "message_is": "guests are" }} }},
            {{ "name": "expects an error", "expect": "error" }},
            {{ "name": "typo in facts", "request": {{ "actor": {{ "chanel_role": "guest" }} }}, "expect": "allow" }},
            {{ "name": "read", "check": "read", "expect": "allow" }}
          ] }}"#
    );
    let report = run_temp_fixture(&fixture, &FixtureOptions::default()).expect("runs");
    let outcome: Vec<(&str, bool)> = report
        .cases
        .iter()
        .map(|c| (c.name.as_str(), c.passed))
        .collect();
    assert_eq!(
        outcome,
        [
            ("right", true),
            ("wrong kind", false),
            ("wrong message", false),
            ("wrong exact message", false),
            ("expects an error", false),
            ("typo in facts", false),
            ("read", true),
        ]
    );
    assert_eq!((report.passed(), report.failed()), (2, 5));
    let text = report.to_string();
    assert!(text.contains("FAIL wrong kind"), "{text}");
    assert!(
        text.contains("actual:   restricted: guests are read-only"),
        "{text}"
    );
    assert!(text.contains("chanel_role"), "{text}");
    assert!(text.ends_with("2 passed, 5 failed"), "{text}");
}

#[test]
fn broken_fixture_files_are_errors() {
    let cases = [
        ("not json", "{".to_owned()),
        ("unknown top-level field", format!(r#"{{ {SETS}, "cases": [], "extra": 1 }}"#)),
        ("unknown script set", format!(r#"{{ {SETS}, "cases": [{{ "name": "x", "scripts": "nope", "expect": "allow" }}] }}"#)),
        ("bad expectation", format!(r#"{{ {SETS}, "cases": [{{ "name": "x", "expect": "maybe" }}] }}"#)),
        ("missing script file", r#"{ "scripts": { "default": { "access": "gone.lua", "moderation": "moderation.lua" } }, "cases": [{ "name": "x", "expect": "allow" }] }"#.to_owned()),
    ];
    for (name, fixture) in cases {
        assert!(
            run_temp_fixture(&fixture, &FixtureOptions::default()).is_err(),
            "{name}: expected an error"
        );
    }
}

#[test]
fn options_supply_the_default_script_set() {
    let (access, moderation) = (
        policies_dir().join("access.lua"),
        policies_dir().join("moderation.lua"),
    );
    let fixture = r#"{ "cases": [{ "name": "anonymous", "request": { "action": "message", "channel": { "exists": true }, "community": { "open": true } }, "expect": { "deny": "auth-required" } }] }"#;
    let options = FixtureOptions {
        access: Some(access),
        moderation: Some(moderation),
        ..FixtureOptions::default()
    };
    let report = run_temp_fixture(fixture, &options).expect("runs");
    assert!(report.is_success(), "{report}");
    // Without them there is no default set.
    assert!(run_temp_fixture(fixture, &FixtureOptions::default()).is_err());
}
