//! The shipped scripts in the slots they are put in: an access slot holding a script with
//! no access rules is refused (at start and on reload) instead of opening every private
//! channel; every worked example, in its role, keeps a private channel exactly as unknown
//! to an outsider as a missing one; and the variants stay derived from the defaults.

mod common;

use std::path::{Path, PathBuf};

use buzz_policy::{
    Action, ActorFacts, ChannelFacts, EventFacts, PolicyEngine, PolicyError, ReadRequest,
    WriteRequest,
};
use common::{default_paths, limiter, message_request, Scripts};

fn policies_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn load(access: &Path, moderation: &Path) -> Result<PolicyEngine, PolicyError> {
    PolicyEngine::load(access, moderation, Default::default(), limiter())
}

#[test]
fn an_access_slot_without_access_rules_is_refused_at_start_and_on_reload() {
    let (access, moderation) = default_paths();
    let announcements = policies_dir().join("examples/announcements.lua");
    for script in [read(&announcements), String::new(), "-- nothing".into()] {
        let scripts = Scripts::new(&script, &read(&moderation));
        let refused = scripts.load();
        assert!(
            matches!(&refused, Err(PolicyError::AccessWithoutRules { script }) if script.ends_with("access.lua")),
            "{:?}",
            refused.map(|_| ())
        );
        let shown = refused.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            shown.contains("can_read") && shown.contains("can_write"),
            "{shown}"
        );
    }

    // In force: the defaults. A reload to a moderation script is refused and changes
    // nothing: the outsider still reads nothing of the private channel.
    let scripts = Scripts::new(&read(&access), &read(&moderation));
    let engine = scripts.load().expect("the defaults load");
    let before = engine.check_read(&outsider_read(private_channel("general")));
    assert!(matches!(&before, Ok(v) if !v.is_allow()), "{before:?}");
    scripts.write_access(&read(&announcements));
    // Refused as a file that dropped its rules (what a half-written one looks like).
    assert!(matches!(
        engine.reload(),
        Err(PolicyError::ReloadDropsAllRules { script }) if script.ends_with("access.lua")
    ));
    assert_eq!(engine.generation(), 1);
    assert_eq!(
        engine
            .check_read(&outsider_read(private_channel("general")))
            .ok(),
        before.ok()
    );
}

/// A role and file of every shipped example: `(access, moderation)` with the example in
/// the slot its header names and the default in the other.
fn every_example_in_its_role() -> Vec<(PathBuf, PathBuf)> {
    let (access, moderation) = default_paths();
    let dir = policies_dir().join("examples");
    let mut sets = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("examples dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "lua"))
        .collect();
    files.sort();
    for file in files {
        let text = read(&file);
        if text.starts_with("-- access.lua variant") {
            sets.push((file, moderation.clone()));
        } else if text.starts_with("-- moderation.lua variant") {
            sets.push((access.clone(), file));
        } else {
            panic!(
                "{}: its first line must say which script it replaces",
                file.display()
            );
        }
    }
    assert!(sets.len() >= 3, "{sets:?}");
    sets
}

fn private_channel(name: &str) -> ChannelFacts {
    ChannelFacts {
        id: "c1".into(),
        exists: true,
        name: name.into(),
        private: true,
        channel_type: "stream".into(),
        ..ChannelFacts::default()
    }
}

/// What core tells a script about a channel id nobody created.
fn missing_channel() -> ChannelFacts {
    ChannelFacts {
        id: "c1".into(),
        ..ChannelFacts::default()
    }
}

/// A community member outside the channel.
fn outsider() -> ActorFacts {
    ActorFacts {
        pubkey: Some("mallory".into()),
        community_member: true,
        ..ActorFacts::default()
    }
}

fn outsider_write(action: Action, channel: ChannelFacts) -> WriteRequest {
    let kind = match action {
        Action::React => 7,
        Action::Edit => 40_003,
        Action::Delete => 5,
        Action::Join => 9021,
        Action::Leave => 9022,
        Action::AddMember => 9000,
        Action::RemoveMember => 9001,
        Action::EditChannel => 9002,
        Action::ModerateRemove => 9005,
        Action::DeleteChannel => 9008,
        _ => 9,
    };
    let base = message_request();
    WriteRequest {
        action,
        event: EventFacts {
            pubkey: "mallory".into(),
            kind,
            tags: vec![vec!["h".into(), "c1".into()]],
            ..base.event
        },
        actor: outsider(),
        channel: Some(channel),
        ..base
    }
}

fn outsider_read(channel: ChannelFacts) -> ReadRequest {
    let base = message_request();
    ReadRequest {
        actor: outsider(),
        channel,
        community: base.community,
        now: base.now,
    }
}

#[test]
fn every_example_keeps_a_private_channel_as_unknown_as_a_missing_one() {
    for (access, moderation) in every_example_in_its_role() {
        let engine = load(&access, &moderation)
            .unwrap_or_else(|e| panic!("{} + {}: {e}", access.display(), moderation.display()));
        // Named like the channels the examples single out, and like any other.
        for name in ["general", "announcements"] {
            let private = private_channel(name);
            let read = engine.check_read(&outsider_read(private.clone()));
            let missing = engine.check_read(&outsider_read(missing_channel()));
            assert!(matches!(&read, Ok(v) if !v.is_allow()), "{read:?}");
            assert_eq!(
                read.ok(),
                missing.ok(),
                "read of #{name}: {}",
                access.display()
            );
            for action in Action::ALL {
                if matches!(
                    action,
                    Action::CreateChannel | Action::CommunityAdmin | Action::Other
                ) {
                    continue;
                }
                let write = engine.check_write(&outsider_write(action, private.clone()));
                let missing = engine.check_write(&outsider_write(action, missing_channel()));
                assert!(matches!(&write, Ok(v) if !v.is_allow()), "{write:?}");
                assert_eq!(
                    write.ok(),
                    missing.ok(),
                    "{action} in #{name} with {} + {}",
                    access.display(),
                    moderation.display()
                );
            }
        }
    }
}

/// The one line `guests_may_react.lua` changes in `access.lua`.
const GUESTS_DEFAULT: &str = "local GUEST_MAY = { delete = true }\n";
const GUESTS_VARIANT: &str =
    "local GUEST_MAY = { react = true, delete = true } -- this variant's one change\n";

/// A script's body: everything after its header comment (up to the first blank line).
fn body(text: &str) -> &str {
    text.split_once("\n\n").map_or("", |(_, body)| body)
}

/// `guests_may_react.lua` is its own header and `access.lua`'s body with one line
/// changed, so a fix to the default reaches the variant (run with
/// `BUZZ_REGENERATE_EXAMPLES=1` to rewrite it after changing `access.lua`).
#[test]
fn guests_may_react_is_the_default_access_with_one_line_changed() {
    let (access, _) = default_paths();
    let default = read(&access);
    assert!(body(&default).contains(GUESTS_DEFAULT));
    let path = policies_dir().join("examples/guests_may_react.lua");
    let shipped = read(&path);
    let header = shipped.split_once("\n\n").map_or("", |(h, _)| h);
    let expected = format!(
        "{header}\n\n{}",
        body(&default).replacen(GUESTS_DEFAULT, GUESTS_VARIANT, 1)
    );
    if std::env::var_os("BUZZ_REGENERATE_EXAMPLES").is_some() {
        std::fs::write(&path, &expected).expect("rewrite the example");
        return;
    }
    assert!(
        shipped == expected,
        "{} drifted from access.lua: run BUZZ_REGENERATE_EXAMPLES=1 cargo test -p buzz-policy --test examples",
        path.display()
    );
}

/// The code lines of `moderate` (no comments, no blank lines, not its final allow).
fn moderate_lines(text: &str) -> Vec<&str> {
    let inside = text
        .split_once("function moderate(req)")
        .map_or("", |(_, rest)| rest);
    let mut lines: Vec<&str> = inside
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("--"))
        .collect();
    // The closing `return buzz.allow()` and `end`.
    lines.truncate(lines.len().saturating_sub(2));
    lines
}

/// The moderation variants are the default rules, then their one extra rule.
#[test]
fn moderation_variants_begin_with_the_default_rules() {
    let (_, moderation) = default_paths();
    let default = read(&moderation);
    let rules = moderate_lines(&default);
    assert!(rules.len() > 5, "{rules:?}");
    for (_, variant) in every_example_in_its_role() {
        if variant == moderation {
            continue;
        }
        let text = read(&variant);
        let lines = moderate_lines(&text);
        assert!(
            lines.starts_with(&rules),
            "{} does not begin with moderation.lua's rules",
            variant.display()
        );
    }
}
