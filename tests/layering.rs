//! ARCHITECTURE.md's layering invariants, checked by reading the source tree:
//!
//! - core knows no plugin: no plugin's name appears anywhere under `core/`;
//! - only `core/src/store` (and plugins, through `Conn`) speak SQL: `diesel` appears in
//!   no other non-plugin source (core's test kit, feature-gated, seeds fixtures);
//! - only `core/src/http` touches actix;
//! - `buzz-nostr` (core/nostr) holds the protocol and depends on no runtime, database,
//!   server, cache or script engine; store builds on it, never on `channels`; config
//!   parses without the plugin catalog; everyone takes protocol types from it;
//! - the repository's docs and code never point at files that are not in it;
//! - every repository path, `file.rs::item` and `module::item` that README.md,
//!   ARCHITECTURE.md and `docs/` name in backticks, and every file they link, exists;
//! - `buzz-core`'s top-level modules import each other only downward, along the table of
//!   allowed edges below ([`LAYERS`]), so they never form a cycle.

#[path = "layering/module_edges.rs"]
mod module_edges;

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` and `.md` file under `dir`, skipping build output.
fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        if name == "target" || name == ".git" {
            continue;
        }
        if path.is_dir() {
            files(&path, out);
        } else if matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("rs" | "md" | "toml")
        ) {
            out.push(path);
        }
    }
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// (file, line number, line) of every line under `dirs` that contains `needle`.
fn occurrences(dirs: &[&str], needle: &str, exts: &[&str]) -> Vec<String> {
    let mut all = Vec::new();
    for dir in dirs {
        files(&root().join(dir), &mut all);
    }
    let mut hits = Vec::new();
    for path in all {
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !exts.contains(&ext) {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if line.contains(needle) {
                hits.push(format!("{}:{}: {}", relative(&path), n + 1, line.trim()));
            }
        }
    }
    hits
}

/// Plugin names inside everyday Rust or English (`std::sync`, `binary_search`, `median`):
/// matched by the forms that name a plugin, not as bare substrings.
const RUST_WORDS: [&str; 3] = ["sync", "search", "media"];

#[test]
fn core_knows_no_plugin() {
    let mut names: Vec<&str> = buzz_relay::catalog()
        .entries()
        .iter()
        .map(|e| e.name)
        .collect();
    // Plugins that are coming or live outside this binary must not be named either.
    names.extend([
        "buzz_example_hello",
        "artifacts",
        "snapshot",
        "read_state",
        "buzz_v1",
    ]);
    let mut hits = Vec::new();
    for name in names {
        if RUST_WORDS.contains(&name) {
            // Rust itself says it (`std::sync`, `async`): look for the ways code names a
            // plugin instead — its crate, section, directory, or the name as a string.
            for form in [
                format!("buzz_{name}"),
                format!("buzz-{name}"),
                format!("plugins.{name}"),
                format!("plugins/{name}"),
                format!("\"{name}\""),
            ] {
                hits.extend(occurrences(&["core"], &form, &["rs", "toml", "md"]));
            }
        } else {
            hits.extend(occurrences(&["core"], name, &["rs", "toml", "md"]));
        }
    }
    assert!(hits.is_empty(), "core names a plugin:\n{}", hits.join("\n"));
}

#[test]
fn only_store_speaks_sql() {
    let hits: Vec<String> = occurrences(
        &[
            "core/src",
            "src",
            "admin-tui",
            "examples/window-bench",
            "examples/window-client",
            "examples/ingest-bench",
            "examples/interop",
        ],
        "diesel",
        &["rs", "toml"],
    )
    .into_iter()
    .filter(|hit| {
        !(hit.starts_with("core/src/store/")
            || hit.starts_with("core/src/testkit/")
            // Doc comments may mention it.
            || hit.contains("//"))
    })
    .collect();
    assert!(
        hits.is_empty(),
        "diesel outside core/src/store:\n{}",
        hits.join("\n")
    );
}

#[test]
fn only_http_touches_actix() {
    let mut hits = Vec::new();
    for crate_name in [
        "actix_web",
        "actix-web",
        "actix_ws",
        "actix-ws",
        "actix_rt",
        "actix-rt",
    ] {
        hits.extend(occurrences(
            &["core/src", "src", "admin-tui", "plugins", "examples"],
            crate_name,
            &["rs", "toml"],
        ));
    }
    hits.retain(|hit| !hit.starts_with("core/src/http/") && !hit.contains("//"));
    assert!(
        hits.is_empty(),
        "actix outside core/src/http:\n{}",
        hits.join("\n")
    );
}

#[test]
fn docs_point_only_at_files_in_the_repository() {
    let mut hits = Vec::new();
    for needle in [
        "DESIGN.md",
        "spec/NIP",
        "spec/buzz",
        "spec/bridge",
        "../shared",
    ] {
        hits.extend(occurrences(&["."], needle, &["rs", "md", "toml"]));
    }
    // This file names them to forbid them.
    hits.retain(|hit| !hit.starts_with("tests/layering.rs"));
    assert!(
        hits.is_empty(),
        "references to files outside the repository:\n{}",
        hits.join("\n")
    );
}

/// Code lines (not comments) under `dir` that contain `needle`.
fn code_occurrences(dir: &str, needle: &str) -> Vec<String> {
    occurrences(&[dir], needle, &["rs"])
        .into_iter()
        .filter(|hit| {
            let line = hit.split_once(": ").map_or("", |(_, line)| line);
            !line.starts_with("//")
        })
        .collect()
}

#[test]
fn store_builds_on_the_protocol_not_on_channel_rules() {
    // `channels::table` is the schema's; the rules module is `crate::channels`.
    let mut hits = code_occurrences("core/src/store", "crate::channels");
    hits.extend(code_occurrences("core/src/store", "super::super::channels"));
    assert!(
        hits.is_empty(),
        "store imports channel rules (they belong in buzz_nostr::kinds / threads):\n{}",
        hits.join("\n")
    );
}

#[test]
fn config_parses_without_the_plugin_catalog() {
    let hits = code_occurrences("core/src/config", "crate::plugin");
    assert!(
        hits.is_empty(),
        "config names the plugin catalog:\n{}",
        hits.join("\n")
    );
}

/// The packages `package` depends on for its build (normal edges, transitively), from
/// `cargo tree`.
fn dependency_names(package: &str) -> Vec<String> {
    let out = std::process::Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            package,
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(root())
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_protocol_crate_does_no_io() {
    let deps = dependency_names("buzz-nostr");
    assert!(
        deps.iter().any(|d| d == "secp256k1"),
        "cargo tree listed no dependencies: {deps:?}"
    );
    let forbidden: Vec<&String> = deps
        .iter()
        .filter(|d| {
            ["tokio", "diesel", "actix", "redis", "mlua", "buzz-core"]
                .iter()
                .any(|f| d.starts_with(f))
        })
        .collect();
    assert!(
        forbidden.is_empty(),
        "buzz-nostr depends on a runtime, database, server, cache or script engine: {forbidden:?}"
    );
}

#[test]
fn plugins_and_tools_take_protocol_types_from_the_protocol_crate() {
    let mut hits = Vec::new();
    for old in [
        "buzz_core::event",
        "buzz_core::filter",
        "buzz_core::keys",
        "buzz_core::channels::kinds",
        "buzz_core::channels::threads",
    ] {
        for dir in [
            "plugins",
            "admin-tui",
            "examples",
            "src",
            "tests",
            "core/tests",
        ] {
            hits.extend(code_occurrences(dir, old));
        }
    }
    // This file names them to forbid them.
    hits.retain(|hit| !hit.starts_with("tests/layering.rs"));
    assert!(
        hits.is_empty(),
        "protocol types through buzz_core (they are buzz_nostr's):\n{}",
        hits.join("\n")
    );
}

/// `buzz-core`'s top-level modules, bottom layer first. A module may refer to modules of
/// lower layers only, and to one of its own layer only where [`SIDEWAYS`] lists the pair;
/// a new module must be placed here before it builds. ARCHITECTURE.md's "Allowed edges"
/// says why each layer sits where it does.
const LAYERS: &[&[&str]] = &[
    // What everything takes: failures, settings, the stored event, time, the key file, the
    // bounded queue connections and the live bus use.
    &[
        "error",
        "config",
        "stored",
        "clock",
        "relay_key",
        "nips",
        "queue",
    ],
    // Storage and Redis, and host → community.
    &["store", "redis_link", "community"],
    // The shared services built on them; a connection's context.
    &["live", "replay", "ctx"],
    // Who may do what, what channel events mean, NIP-98.
    &["access", "channels", "auth"],
    // The registry that registers the store's and the access service's own handles.
    &["metrics"],
    // The plugin API (it hands plugins the services below).
    &["plugin"],
    // The pipelines that run plugins' hooks.
    &["query_service", "ingest", "expiry"],
    &["nip86"],
    &["http"],
    // Wiring it all together.
    &["relay"],
    // What runs a relay: storage commands through the pipelines, the test kit.
    &["import", "testkit"],
];

/// Pairs `(from, to)` of one layer that may refer to each other in that direction.
const SIDEWAYS: &[(&str, &str)] = &[];

#[test]
fn core_modules_import_only_downward() {
    let src = root().join("core/src");
    let layer_of = |module: &str| LAYERS.iter().position(|layer| layer.contains(&module));
    let mut problems = Vec::new();
    for module in module_edges::top_level_modules(&src) {
        if layer_of(&module).is_none() {
            problems.push(format!(
                "core/src/{module}: a top-level module with no layer in LAYERS"
            ));
        }
    }
    let edges = module_edges::edges(&src, "core/src");
    for edge in &edges {
        let (Some(from), Some(to)) = (layer_of(&edge.from), layer_of(&edge.to)) else {
            continue;
        };
        let allowed =
            to < from || (to == from && SIDEWAYS.contains(&(edge.from.as_str(), edge.to.as_str())));
        if !allowed {
            problems.push(format!(
                "{}: {} (layer {from}) refers to {} (layer {to})",
                edge.at, edge.from, edge.to
            ));
        }
    }
    for cycle in module_edges::cycles(&edges) {
        problems.push(format!("cycle among core modules: {}", cycle.join(", ")));
    }
    assert!(
        problems.is_empty(),
        "core's modules import against the layer table (tests/layering.rs LAYERS):\n{}",
        problems.join("\n")
    );
}

/// README.md, ARCHITECTURE.md and everything under `docs/`.
fn doc_files() -> Vec<PathBuf> {
    let mut docs = vec![root().join("README.md"), root().join("ARCHITECTURE.md")];
    let mut under = Vec::new();
    files(&root().join("docs"), &mut under);
    under.retain(|path| path.extension().is_some_and(|e| e == "md"));
    under.sort();
    docs.extend(under);
    docs
}

/// The text of every `code span` on `line`.
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// The target of every `[text](target)` link on `line`.
fn link_targets(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &line[at + 2..];
            rest.find(')').map(|end| &rest[..end])
        })
        .collect()
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

fn is_ident(word: &str) -> bool {
    !word.is_empty()
        && word.chars().all(is_ident_char)
        && !word.starts_with(|c: char| c.is_ascii_digit())
}

/// Whether `name` occurs in `text` as a whole identifier.
fn has_ident(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(is_ident_char) && !after.is_some_and(is_ident_char)
    })
}

/// The repository's top-level directories: a span starting with one of them is a path.
fn top_level_dirs() -> Vec<String> {
    let mut dirs: Vec<String> = std::fs::read_dir(root())
        .expect("the repository root reads")
        .flatten()
        .filter(|entry| entry.path().is_dir())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| name != "target" && name != ".git")
        .collect();
    dirs.sort();
    dirs
}

/// Each workspace crate's name as Rust spells it (`buzz_core`) and its `src/` directory.
fn workspace_crates() -> Vec<(String, PathBuf)> {
    let mut manifests = Vec::new();
    files(&root(), &mut manifests);
    manifests
        .into_iter()
        .filter(|path| path.file_name().is_some_and(|n| n == "Cargo.toml"))
        .filter_map(|manifest| {
            let text = std::fs::read_to_string(&manifest).ok()?;
            let package = text.split("[package]").nth(1)?;
            let name = package.lines().find_map(|line| {
                let value = line.trim().strip_prefix("name")?.trim().strip_prefix('=')?;
                Some(value.trim().trim_matches('"').replace('-', "_"))
            })?;
            Some((name, manifest.parent()?.join("src")))
        })
        .collect()
}

/// The file of module `dir/name`: `name.rs` or `name/mod.rs`.
fn module_file(dir: &Path, name: &str) -> Option<PathBuf> {
    [
        dir.join(format!("{name}.rs")),
        dir.join(name).join("mod.rs"),
    ]
    .into_iter()
    .find(|path| path.is_file())
}

/// Why `path::item` (`item` maybe `Type::method`) does not resolve, if it does not:
/// `item`'s first name must occur as an identifier in `path`, and any further name
/// somewhere in the same crate.
fn missing_item(file: &Path, items: &[&str], crate_src: &Path) -> Option<String> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let (first, rest) = items.split_first()?;
    if !has_ident(&text, first) {
        return Some(format!("no `{first}` in {}", relative(file)));
    }
    let mut sources = Vec::new();
    files(crate_src, &mut sources);
    let crate_text: String = sources
        .iter()
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .collect();
    rest.iter()
        .find(|name| !has_ident(&crate_text, name))
        .map(|name| format!("no `{name}` in {}", relative(crate_src)))
}

/// Resolves `crate::module::…::item` (the crate one of the workspace's, or a top-level
/// module of `buzz-core`) to a module file and checks the item is in it. Paths into
/// other crates (`tokio::sync::mpsc`, `serde_json::Value`) are not this repository's.
fn check_module_path(span: &str, crates: &[(String, PathBuf)]) -> Option<String> {
    let segments: Vec<&str> = span.trim_end_matches("()").split("::").collect();
    if segments.len() < 2 || !segments.iter().all(|s| is_ident(s)) {
        return None;
    }
    let core_src = root().join("core/src");
    let (mut dir, mut file, rest) =
        if let Some((_, src)) = crates.iter().find(|(name, _)| name == segments[0]) {
            (src.clone(), src.join("lib.rs"), &segments[1..])
        } else if let Some(file) = module_file(&core_src, segments[0]) {
            let dir = core_src.join(segments[0]);
            (dir, file, &segments[1..])
        } else {
            return None;
        };
    let crate_src = if dir.starts_with(&core_src) {
        core_src.clone()
    } else {
        dir.clone()
    };
    let mut rest = rest;
    // Descend through modules (lower-case names that are files) while there are any.
    while rest.len() > 1 {
        let Some(next) = module_file(&dir, rest[0]) else {
            break;
        };
        dir = dir.join(rest[0]);
        file = next;
        rest = &rest[1..];
    }
    // A lower-case name followed by more names must have been a module.
    if rest.len() > 1 && rest[0].starts_with(|c: char| c.is_ascii_lowercase()) {
        return Some(format!("no module `{}` under {}", rest[0], relative(&dir)));
    }
    missing_item(&file, rest, &crate_src)
}

/// Why a span that names a repository path (`core/src/store/query.rs`, `plugins/search/`,
/// `tests/layering.rs::core_knows_no_plugin`) does not resolve, if it names one and does
/// not.
fn check_repository_path(span: &str, top: &[String]) -> Option<String> {
    let (path, items) = match span.split_once("::") {
        Some((path, items)) => (path, Some(items)),
        None => (span, None),
    };
    let shaped = path.contains('/')
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c));
    let first = path.split('/').next().unwrap_or("");
    if !shaped || !top.iter().any(|dir| dir == first) || path.contains("..") {
        return None;
    }
    let full = root().join(path.trim_end_matches('/'));
    if !full.exists() {
        return Some(format!("no such file or directory: {path}"));
    }
    let items: Vec<&str> = items?.trim_end_matches("()").split("::").collect();
    if !items.iter().all(|s| is_ident(s)) {
        return Some(format!("`{span}` does not name an item"));
    }
    if !full.is_file() {
        return Some(format!("{path} is not a file"));
    }
    let text = std::fs::read_to_string(&full).unwrap_or_default();
    items
        .iter()
        .find(|name| !has_ident(&text, name))
        .map(|name| format!("no `{name}` in {path}"))
}

/// `span` when it names a Rust file relative to some directory rather than from the
/// repository's root: `mod.rs`, `ws/live.rs`, `events.rs::check` (the item is not checked).
fn bare_file_name<'a>(span: &'a str, top: &[String]) -> Option<&'a str> {
    let path = span.split("::").next().unwrap_or(span);
    let first = path.split('/').next().unwrap_or("");
    let shaped = path.ends_with(".rs")
        && path
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c));
    (shaped && !path.contains("..") && !top.iter().any(|dir| dir == first)).then_some(path)
}

/// The directory a repository path span names, or the directory of the file it names.
fn directory_named(span: &str, top: &[String]) -> Option<PathBuf> {
    let path = span.split("::").next().unwrap_or(span);
    let first = path.split('/').next().unwrap_or("");
    if !top.iter().any(|dir| dir == first) {
        return None;
    }
    let full = root().join(path.trim_end_matches('/'));
    if full.is_dir() {
        Some(full)
    } else {
        full.parent().map(Path::to_path_buf)
    }
}

/// Why a bare file name does not resolve: in the bullet's directory when it has one
/// (or a directory below it), else anywhere in the repository.
fn check_bare_file(name: &str, context: Option<&Path>) -> Option<String> {
    match context {
        Some(dir) => {
            let mut below = Vec::new();
            files(dir, &mut below);
            let found = dir.join(name).is_file()
                || below
                    .iter()
                    .any(|path| path.ends_with(name) && path.starts_with(dir));
            (!found).then(|| format!("no {name} in {}", relative(dir)))
        }
        None => {
            let mut all = Vec::new();
            files(&root(), &mut all);
            let found = all.iter().any(|path| path.ends_with(name));
            (!found).then(|| format!("no file {name} anywhere in the repository"))
        }
    }
}

#[test]
fn docs_name_only_what_exists() {
    let top = top_level_dirs();
    let crates = workspace_crates();
    let mut problems = Vec::new();
    let mut checked = 0;
    let mut context: Option<PathBuf> = None;
    for doc in doc_files() {
        let text = std::fs::read_to_string(&doc).expect("a doc reads");
        let mut in_block = false;
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_block = !in_block;
                continue;
            }
            if in_block {
                continue;
            }
            let at = format!("{}:{}", relative(&doc), n + 1);
            // A bullet's bare names (`mod.rs`, `ws/live.rs`) are relative to the directory
            // its spans last named; a new top-level bullet or paragraph starts afresh.
            if !line.starts_with(' ') {
                context = None;
            }
            for span in code_spans(line) {
                let span = span.trim();
                let problem = if let Some(relative_name) = bare_file_name(span, &top) {
                    check_bare_file(relative_name, context.as_deref())
                } else if span.contains('/') {
                    let problem = check_repository_path(span, &top);
                    if problem.is_none() {
                        context = directory_named(span, &top).or(context);
                    }
                    problem
                } else {
                    check_module_path(span, &crates)
                };
                checked += 1;
                if let Some(problem) = problem {
                    problems.push(format!("{at}: `{span}`: {problem}"));
                }
            }
            for target in link_targets(line) {
                let target = target.split('#').next().unwrap_or("");
                if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                checked += 1;
                let dir = doc.parent().expect("a doc has a directory");
                if !dir.join(target).exists() {
                    problems.push(format!("{at}: link to a missing file: {target}"));
                }
            }
        }
    }
    assert!(checked > 100, "only {checked} references found in the docs");
    assert!(
        problems.is_empty(),
        "the docs name what is not in the repository:\n{}",
        problems.join("\n")
    );
}
