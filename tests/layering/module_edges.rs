//! Which of `buzz-core`'s top-level modules refers to which, read from the source as Rust
//! tokens: `crate::x` anywhere (a `use` line, an inline path, a `pub use` re-export, a
//! `use crate::{x, y}` group, `$crate::x` in a macro) and `super::` chains that climb to
//! the crate root. Comments and string literals are not paths, so they never count; test
//! modules inside a file do (a cycle through test code is still a cycle).

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// One reference from a file of module `from` to the top-level module `to`.
#[derive(Debug, Clone)]
pub(crate) struct Edge {
    pub(crate) from: String,
    pub(crate) to: String,
    /// `core/src/…:line`.
    pub(crate) at: String,
}

/// The top-level modules of the crate whose root is `src/lib.rs`: one per `.rs` file or
/// directory beside it.
pub(crate) fn top_level_modules(src: &Path) -> BTreeSet<String> {
    let mut modules = BTreeSet::new();
    for entry in std::fs::read_dir(src).expect("core/src lists").flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let stem = name.strip_suffix(".rs").unwrap_or(&name).to_owned();
        if stem != "lib" && stem != "main" {
            modules.insert(stem);
        }
    }
    modules
}

/// Every edge between two different top-level modules under `src`.
pub(crate) fn edges(src: &Path, shown_as: &str) -> Vec<Edge> {
    let modules = top_level_modules(src);
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut out = Vec::new();
    for file in files {
        let relative = file.strip_prefix(src).expect("under src");
        let mut path: Vec<String> = relative
            .iter()
            .map(|part| part.to_string_lossy().into_owned())
            .collect();
        let last = path.pop().expect("a file name");
        if last != "mod.rs" {
            path.push(last.trim_end_matches(".rs").to_owned());
        }
        if path.is_empty() || path == ["lib"] {
            continue;
        }
        let text = std::fs::read_to_string(&file).expect("source reads");
        let tokens: TokenStream = text
            .parse()
            .unwrap_or_else(|e| panic!("{} does not lex: {e}", file.display()));
        let mut found = Vec::new();
        scan(tokens, path.len(), &modules, &mut found);
        let shown = format!("{shown_as}/{}", relative.display());
        for (to, line) in found {
            if to != path[0] {
                out.push(Edge {
                    from: path[0].clone(),
                    to,
                    at: format!("{shown}:{line}"),
                });
            }
        }
    }
    out
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("dir lists").flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn is_ident(tree: Option<&TokenTree>, name: &str) -> bool {
    matches!(tree, Some(TokenTree::Ident(i)) if i == name)
}

/// `::` at `trees[i..]`.
fn is_path_sep(trees: &[TokenTree], i: usize) -> bool {
    matches!(
        (trees.get(i), trees.get(i + 1)),
        (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
            if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':'
    )
}

/// The top-level modules a path segment at the crate root names: an identifier, or the
/// first identifier of each item of a `{…}` use group.
fn named(tree: Option<&TokenTree>, modules: &BTreeSet<String>, found: &mut Vec<(String, usize)>) {
    match tree {
        Some(TokenTree::Ident(ident)) => {
            let name = ident.to_string();
            if modules.contains(&name) {
                found.push((name, ident.span().start().line));
            }
        }
        Some(TokenTree::Group(group)) if group.delimiter() == Delimiter::Brace => {
            let mut item_start = true;
            for tree in group.stream() {
                match &tree {
                    TokenTree::Punct(p) if p.as_char() == ',' => item_start = true,
                    _ if item_start => {
                        named(Some(&tree), modules, found);
                        item_start = false;
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// Paths in `tokens` that reach a top-level module, for code `depth` modules below the
/// crate root (a file's module path, plus any inline `mod x { … }` it sits in).
fn scan(
    tokens: TokenStream,
    depth: usize,
    modules: &BTreeSet<String>,
    found: &mut Vec<(String, usize)>,
) {
    let trees: Vec<TokenTree> = tokens.into_iter().collect();
    let mut i = 0;
    while i < trees.len() {
        match &trees[i] {
            TokenTree::Ident(ident) if ident == "mod" => {
                if let (Some(TokenTree::Ident(_)), Some(TokenTree::Group(body))) =
                    (trees.get(i + 1), trees.get(i + 2))
                {
                    if body.delimiter() == Delimiter::Brace {
                        scan(body.stream(), depth + 1, modules, found);
                        i += 3;
                        continue;
                    }
                }
            }
            TokenTree::Ident(ident) if ident == "crate" && is_path_sep(&trees, i + 1) => {
                named(trees.get(i + 3), modules, found);
            }
            TokenTree::Ident(ident) if ident == "super" => {
                let mut climbed = 1;
                let mut j = i + 1;
                while is_path_sep(&trees, j) && is_ident(trees.get(j + 2), "super") {
                    climbed += 1;
                    j += 3;
                }
                if climbed == depth && is_path_sep(&trees, j) {
                    named(trees.get(j + 2), modules, found);
                }
                i = j;
                continue;
            }
            TokenTree::Group(group) => scan(group.stream(), depth, modules, found),
            _ => {}
        }
        i += 1;
    }
}

/// The modules of every cycle (strongly connected component of more than one module),
/// each sorted, by Tarjan's algorithm.
pub(crate) fn cycles(edges: &[Edge]) -> Vec<Vec<String>> {
    let mut next: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for edge in edges {
        next.entry(&edge.from).or_default().insert(&edge.to);
        next.entry(&edge.to).or_default();
    }
    struct State<'a> {
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(node: &'a str, next: &BTreeMap<&'a str, BTreeSet<&'a str>>, s: &mut State<'a>) {
        let n = s.index.len();
        s.index.insert(node, n);
        s.low.insert(node, n);
        s.stack.push(node);
        s.on_stack.insert(node);
        for &to in &next[node] {
            if !s.index.contains_key(to) {
                visit(to, next, s);
                let low = s.low[node].min(s.low[to]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(to) {
                let low = s.low[node].min(s.index[to]);
                s.low.insert(node, low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut component = Vec::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(top);
                component.push(top.to_owned());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for &node in next.keys() {
        if !state.index.contains_key(node) {
            visit(node, &next, &mut state);
        }
    }
    state.out
}
