//! The layout's rule, checked: within every crate of the workspace, and within every folder
//! module of a crate (`render/`, `charts/`, ...), sibling modules depend on each other one
//! way, with no import circle. A module's dependencies are the `crate::`,
//! `super::` and `self::` paths in its code above its tests (`#[cfg(test)]`), comments
//! aside; a circle is a strongly connected component of more than one module, found by
//! Tarjan's algorithm.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::support::workspace_root;

/// A source file of a crate: its module path under the crate root (`lib.rs` is `[]`,
/// `render/mod.rs` is `[render]`, `render/html.rs` is `[render, html]`) and its code above
/// its tests (`#[cfg(test)]`), comments aside (a doc link is not a dependency).
struct SourceFile {
    module: Vec<String>,
    code: String,
}

fn source_files(src: &Path) -> Vec<SourceFile> {
    let mut files = Vec::new();
    let mut walk = vec![src.to_path_buf()];
    while let Some(dir) = walk.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut module: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().to_string())
                .collect();
            if matches!(
                module.last().map(String::as_str),
                Some("mod" | "lib" | "main")
            ) {
                module.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let code = text
                .split("#[cfg(test)]")
                .next()
                .unwrap()
                .lines()
                .map(|line| line.split("//").next().unwrap())
                .collect::<Vec<_>>()
                .join("\n");
            files.push(SourceFile { module, code });
        }
    }
    files
}

/// Every module path a file names, made absolute: `crate::a::{b, c::D}` gives `[a, b]` and
/// `[a, c, D]`; `super::x` and `self::x` are resolved from the file's own module.
fn named_paths(file: &SourceFile) -> Vec<Vec<String>> {
    let code = &file.code;
    let mut found = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        for (i, _) in code.match_indices(start) {
            let before = code[..i].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue; // inside a longer path such as `super::super::`
            }
            for path in expand_path(&code[i..]) {
                let mut absolute = Vec::new();
                let mut rest = path.as_slice();
                if rest.first().map(String::as_str) == Some("crate") {
                    rest = &rest[1..];
                } else {
                    absolute = file.module.clone();
                    while let Some(head) = rest.first() {
                        match head.as_str() {
                            "super" => {
                                absolute.pop();
                            }
                            "self" => {}
                            _ => break,
                        }
                        rest = &rest[1..];
                    }
                }
                absolute.extend(rest.iter().cloned());
                found.push(absolute);
            }
        }
    }
    found
}

/// The paths of a `use` tree or a path expression at the start of `text`, one per leaf:
/// `a::b::{c, d::{e, f}}` gives `[a, b, c]`, `[a, b, d, e]` and `[a, b, d, f]`.
fn expand_path(text: &str) -> Vec<Vec<String>> {
    fn skip_spaces(chars: &[char], pos: &mut usize) {
        while chars.get(*pos).is_some_and(|c| c.is_whitespace()) {
            *pos += 1;
        }
    }
    fn tree(chars: &[char], pos: &mut usize, mut path: Vec<String>, out: &mut Vec<Vec<String>>) {
        loop {
            skip_spaces(chars, pos);
            if chars.get(*pos) == Some(&'{') {
                *pos += 1;
                loop {
                    skip_spaces(chars, pos);
                    if chars.get(*pos) == Some(&'}') {
                        *pos += 1;
                        return;
                    }
                    tree(chars, pos, path.clone(), out);
                    skip_spaces(chars, pos);
                    match chars.get(*pos) {
                        Some(',') => *pos += 1,
                        Some('}') => {
                            *pos += 1;
                            return;
                        }
                        _ => return,
                    }
                }
            }
            let ident: String = chars[*pos..]
                .iter()
                .take_while(|c| c.is_alphanumeric() || **c == '_')
                .collect();
            if ident.is_empty() {
                break;
            }
            *pos += ident.chars().count();
            path.push(ident);
            if chars[*pos..].starts_with(&[':', ':']) {
                *pos += 2;
            } else {
                break;
            }
        }
        out.push(path);
    }
    let chars: Vec<char> = text.chars().take(2000).collect();
    let mut out = Vec::new();
    tree(&chars, &mut 0, Vec::new(), &mut out);
    out
}

/// For every module with submodules (the crate root, `render`, `charts`...): its path, and
/// the graph of its children, child name → the sibling children it names.
fn module_graphs(src: &Path) -> BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> {
    let files = source_files(src);
    let mut graphs: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        for depth in 0..file.module.len() {
            graphs
                .entry(file.module[..depth].to_vec())
                .or_default()
                .entry(file.module[depth].clone())
                .or_default();
        }
    }
    for file in &files {
        for target in named_paths(file) {
            for depth in 0..file.module.len().min(target.len()) {
                if file.module[..depth] != target[..depth] {
                    break;
                }
                let (from, to) = (&file.module[depth], &target[depth]);
                let children = graphs.get_mut(&file.module[..depth]).unwrap();
                if from != to && children.contains_key(to) {
                    children.get_mut(from).unwrap().insert(to.clone());
                }
            }
        }
    }
    graphs
}

/// The strongly connected components of more than one node (Tarjan).
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on_stack.insert(v);
        let graph = s.graph;
        for w in graph.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let low = s.low[v].min(s.low[w]);
                s.low.insert(v, low);
            } else if s.on_stack.contains(w) {
                let low = s.low[v].min(s.index[w]);
                s.low.insert(v, low);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.found
}

#[test]
fn the_circle_finder_finds_a_circle_and_only_one() {
    let edges = |pairs: &[(&str, &str)]| {
        let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (a, b) in pairs {
            g.entry(a.to_string()).or_default().insert(b.to_string());
            g.entry(b.to_string()).or_default();
        }
        g
    };
    assert_eq!(
        circles(&edges(&[
            ("a", "b"),
            ("b", "c"),
            ("c", "a"),
            ("c", "d"),
            ("e", "d")
        ])),
        [["a", "b", "c"]]
    );
    assert!(circles(&edges(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
}

#[test]
fn paths_are_expanded_and_made_absolute() {
    assert_eq!(
        expand_path("a::b::{c, d::{e, f}};"),
        [
            vec!["a", "b", "c"],
            vec!["a", "b", "d", "e"],
            vec!["a", "b", "d", "f"]
        ]
    );
    let file = SourceFile {
        module: vec!["render".into(), "html".into()],
        code: "use crate::{format::escape, charts::{svg, spread::X}};\n\
               use super::cells::row;\nfn f() { super::super::model::Report::x() }"
            .into(),
    };
    let mut paths = named_paths(&file);
    paths.sort();
    assert_eq!(
        paths,
        [
            vec!["charts", "spread", "X"],
            vec!["charts", "svg"],
            vec!["format", "escape"],
            vec!["model", "Report", "x"],
            vec!["render", "cells", "row"],
        ]
    );
}

#[test]
fn siblings_in_a_folder_module_are_a_graph_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir(src.join("render")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod render; mod model;").unwrap();
    std::fs::write(src.join("model.rs"), "").unwrap();
    std::fs::write(src.join("render/mod.rs"), "mod a; mod b;").unwrap();
    std::fs::write(
        src.join("render/a.rs"),
        "use super::b::X; use crate::model::M;",
    )
    .unwrap();
    std::fs::write(src.join("render/b.rs"), "use crate::render::a::Y;").unwrap();
    let graphs = module_graphs(src);
    assert_eq!(circles(&graphs[&vec!["render".to_string()]]), [["a", "b"]]);
    assert!(circles(&graphs[&Vec::new()]).is_empty());
    assert!(graphs[&Vec::new()]["render"].contains("model"));
}

#[test]
fn no_crate_has_an_import_circle_between_its_modules() {
    let crates = workspace_root().join("crates");
    let mut found = Vec::new();
    let mut modules = 0;
    for entry in std::fs::read_dir(&crates).unwrap().flatten() {
        let src = entry.path().join("src");
        if !src.is_dir() {
            continue;
        }
        for (parent, graph) in module_graphs(&src) {
            modules += graph.len();
            for circle in circles(&graph) {
                found.push(format!(
                    "{}: {}{}",
                    entry.file_name().to_string_lossy(),
                    parent.iter().map(|p| format!("{p}::")).collect::<String>(),
                    circle.join(" ↔ ")
                ));
            }
        }
    }
    assert!(
        modules > 40,
        "only {modules} modules found under {}",
        crates.display()
    );
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}

/// The workspace crates a crate's `[dependencies]` name (`path = "../X"`), dev-dependencies
/// aside.
fn workspace_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    let mut in_dependencies = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
            continue;
        }
        if !in_dependencies {
            continue;
        }
        if let Some((_, rest)) = line.split_once("path = \"../") {
            if let Some((name, _)) = rest.split_once('"') {
                found.insert(name.to_string());
            }
        }
    }
    found
}

/// Each row of docs/architecture.md's table of the crates: the crate and the crates it may
/// use ("all", "all of the above", "–" or a list).
fn allowed_dependencies(doc: &str) -> Vec<(String, Option<BTreeSet<String>>)> {
    let table = doc
        .split("## The crates")
        .nth(1)
        .expect("docs/architecture.md has a section \"The crates\"");
    let mut rows: Vec<(String, Option<BTreeSet<String>>)> = Vec::new();
    for line in table.lines().skip_while(|l| !l.starts_with("| `")) {
        if !line.starts_with("| `") {
            break;
        }
        let cells: Vec<&str> = line.split(" | ").collect();
        let name = cells[0]
            .trim_start_matches("| ")
            .trim_matches('`')
            .to_string();
        let may_use = cells[2].trim();
        let allowed = match may_use {
            "all" => None,
            "all of the above" => Some(rows.iter().map(|(n, _)| n.clone()).collect()),
            "–" => Some(BTreeSet::new()),
            list => Some(
                list.split(", ")
                    .map(|s| s.trim_matches('`').to_string())
                    .collect(),
            ),
        };
        rows.push((name, allowed));
    }
    rows
}

#[test]
fn every_crate_uses_only_the_crates_the_architecture_allows() {
    let root = workspace_root();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let rows = allowed_dependencies(&doc);
    let on_disk: BTreeSet<String> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let in_table: BTreeSet<String> = rows.iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(
        in_table, on_disk,
        "the table of the crates lists every crate"
    );
    let mut broken = Vec::new();
    for (name, allowed) in &rows {
        let manifest = std::fs::read_to_string(root.join("crates").join(name).join("Cargo.toml"));
        let used = workspace_dependencies(&manifest.unwrap());
        if let Some(allowed) = allowed {
            for dep in used.difference(allowed) {
                broken.push(format!("{name} uses {dep}"));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "not allowed by docs/architecture.md: {broken:?}"
    );
}

#[test]
fn the_dependency_readers_read_what_they_should() {
    let manifest = "[package]\nname = \"x\"\n[dependencies]\nlab = { package = \"rubyrace-lab\", path = \"../lab\" }\nserde = \"1\"\n[dev-dependencies]\ntestkit = { path = \"../testkit\" }\n";
    assert_eq!(
        workspace_dependencies(manifest),
        BTreeSet::from(["lab".to_string()])
    );
    let doc = "## The crates\n\n| crate | owns | may use | must not |\n|---|---|---|---|\n| `units` | u | – | x |\n| `stats` | s | units | x |\n| `lab` | l | all of the above | x |\n| `cli` | c | all | x |\n\nTwo tests";
    let rows = allowed_dependencies(doc);
    assert_eq!(rows.len(), 4);
    assert_eq!(rows[1].1, Some(BTreeSet::from(["units".to_string()])));
    assert_eq!(
        rows[2].1,
        Some(BTreeSet::from(["units".to_string(), "stats".to_string()]))
    );
    assert_eq!(rows[3].1, None);
}

/// Lines of a source file above its tests (`#[cfg(test)]`), as docs/architecture.md
/// counts them.
fn lines_above_tests(text: &str) -> usize {
    text.split("#[cfg(test)]").next().unwrap().lines().count()
}

/// Every production source file (not a test module: `tests.rs`, `tests/`) of the
/// workspace's crates with more than `limit` lines above its tests, as `crate/src/...`.
fn files_over(limit: usize) -> BTreeMap<String, usize> {
    production_sources()
        .into_iter()
        .map(|(file, text)| (file, lines_above_tests(&text)))
        .filter(|(_, lines)| *lines > limit)
        .collect()
}

/// The most lines a production function may have without saying why it is one function.
const LONG_FUNCTION: usize = 150;

/// A function of a source text: its name, first line (1-based), length in lines and the
/// doc comment above it (its `///` lines, attributes between skipped).
#[derive(Debug, PartialEq)]
struct Function {
    name: String,
    line: usize,
    lines: usize,
    doc: String,
}

/// The functions with a body in `text` above its tests: from the line of `fn` to the line
/// that closes it at the same indentation (as rustfmt writes them). Declarations without a
/// body (`fn f();` in a trait) are skipped.
fn functions(text: &str) -> Vec<Function> {
    let lines: Vec<&str> = text.split("#[cfg(test)]").next().unwrap().lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.trim_start();
        let indent = &line[..line.len() - code.len()];
        let mut words = code.split_whitespace().peekable();
        while words.peek().is_some_and(|w| {
            w.starts_with("pub") || ["const", "async", "unsafe", "extern", "\"C\""].contains(w)
        }) {
            words.next();
        }
        if words.next() != Some("fn") {
            continue;
        }
        let Some(name) = words
            .next()
            .map(|w| w.split(['(', '<']).next().unwrap().to_string())
        else {
            continue;
        };
        // The signature ends at the first line ending in `{` (a body) or `;` (none).
        let Some(open) = (i..lines.len()).find(|&j| {
            let l = lines[j].trim_end();
            l.ends_with('{') || l.ends_with(';')
        }) else {
            continue;
        };
        if lines[open].trim_end().ends_with(';') {
            continue;
        }
        let close = format!("{indent}}}");
        let Some(end) = (open..lines.len()).find(|&j| lines[j] == close) else {
            continue;
        };
        let mut doc = Vec::new();
        for above in lines[..i].iter().rev().map(|l| l.trim()) {
            if let Some(d) = above.strip_prefix("///") {
                doc.push(d.trim());
            } else if !above.starts_with("#[") {
                break;
            }
        }
        doc.reverse();
        found.push(Function {
            name,
            line: i + 1,
            lines: end - i + 1,
            doc: doc.join(" "),
        });
    }
    found
}

#[test]
fn the_function_reader_measures_bodies_and_reads_their_docs() {
    let text = "/// Short.\npub(crate) fn short(x: u8) -> u8 {\n    x\n}\n\ntrait T {\n    fn declared(&self);\n    fn defined(&self) {\n        let _ = 1;\n    }\n}\n\n/// Long, and it is one function because\n/// its steps share every value.\n#[allow(clippy::too_many_lines)]\nasync fn long<T>(\n    a: T,\n) {\n    body();\n}\n#[cfg(test)]\nfn in_tests() {\n}\n";
    let found = functions(text);
    let names: Vec<(&str, usize, usize)> = found
        .iter()
        .map(|f| (f.name.as_str(), f.line, f.lines))
        .collect();
    assert_eq!(names, [("short", 2, 3), ("defined", 8, 3), ("long", 16, 5)]);
    assert_eq!(found[0].doc, "Short.");
    assert_eq!(found[1].doc, "");
    assert_eq!(
        found[2].doc,
        "Long, and it is one function because its steps share every value."
    );
}

/// No production function is over [`LONG_FUNCTION`] lines unless its doc comment says why
/// it is one function (the words "one function" and a reason): issue 49's rule, so the
/// next long function is a choice someone wrote down.
#[test]
fn every_function_over_150_lines_says_why_it_is_one() {
    let unexplained: Vec<String> = production_sources()
        .iter()
        .flat_map(|(file, text)| {
            functions(text)
                .into_iter()
                .filter(|f| f.lines > LONG_FUNCTION && !f.doc.contains("one function"))
                .map(move |f| format!("{file}:{} {} ({} lines)", f.line, f.name, f.lines))
        })
        .collect();
    assert!(
        unexplained.is_empty(),
        "functions over {LONG_FUNCTION} lines whose doc comment does not say why they are one function (split them into named steps, or say why):\n{}",
        unexplained.join("\n")
    );
}

/// Every production source file (not a test module: `tests.rs`, `tests/`) of the
/// workspace's crates, as `crate/src/...`, with its text.
fn production_sources() -> Vec<(String, String)> {
    let crates = workspace_root().join("crates");
    let mut found = Vec::new();
    let mut walk = vec![crates.clone()];
    while let Some(dir) = walk.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let relative = path.strip_prefix(&crates).unwrap().to_path_buf();
            let parts: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            // Sources only: `crate/src/...`, without test modules.
            if parts.len() >= 2 && parts[1] != "src" || parts.iter().any(|p| p == "tests") {
                continue;
            }
            if path.is_dir() {
                walk.push(path);
            } else if path.extension().is_some_and(|e| e == "rs")
                && path.file_name().is_some_and(|n| n != "tests.rs")
            {
                found.push((parts.join("/"), std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    found.sort();
    found
}

/// The rows of the table under `## Files over 800 lines`: file and lines.
fn long_files_table(doc: &str) -> BTreeMap<String, usize> {
    let section = doc
        .split("## Files over 800 lines")
        .nth(1)
        .expect("docs/architecture.md has a section `Files over 800 lines`");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| {
            let cells: Vec<&str> = l.split('|').map(str::trim).collect();
            let file = cells[1].trim_matches('`').to_string();
            let lines = cells[2].replace(',', "").parse().unwrap_or_else(|_| {
                panic!(
                    "docs/architecture.md: {file}: lines {:?} is not a number",
                    cells[2]
                )
            });
            (file, lines)
        })
        .collect()
}

/// The number word docs/architecture.md opens with ("a Cargo workspace of thirteen crates").
fn crates_said(doc: &str) -> usize {
    let after = doc
        .split("a Cargo workspace of ")
        .nth(1)
        .expect("docs/architecture.md says how many crates the workspace has");
    let word = after.split_whitespace().next().unwrap();
    testkit::NUMBER_WORDS
        .iter()
        .position(|w| *w == word)
        .unwrap_or_else(|| panic!("{word:?} is not a number word"))
}

/// The architecture doc checks itself: the crates it counts are those on disk, and its table
/// of long files lists every production file over 800 lines (test modules aside), each with
/// its lines within a tenth of today's count (an edit of a few lines does not make the doc
/// false; growing or shrinking by a tenth does).
#[test]
fn the_architecture_doc_counts_the_crates_and_the_long_files() {
    let root = workspace_root();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let on_disk = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("Cargo.toml").is_file())
        .count();
    assert_eq!(crates_said(&doc), on_disk, "crates in the workspace");
    let actual = files_over(800);
    let table = long_files_table(&doc);
    let listed: BTreeSet<&String> = table.keys().collect();
    let over: BTreeSet<&String> = actual.keys().collect();
    assert_eq!(
        listed, over,
        "docs/architecture.md's files over 800 lines (today: {actual:?})"
    );
    for (file, said) in &table {
        let lines = actual[file];
        assert!(
            lines.abs_diff(*said) * 10 <= lines,
            "{file}: docs/architecture.md says {said} lines, it has {lines}"
        );
    }
}

#[test]
fn the_doc_readers_read_the_count_and_the_table() {
    let doc = "rubyrace is a Cargo workspace of thirteen crates.\n\n## Files over 800 lines\n\n| file | lines | why |\n|---|---|---|\n| `a/src/b.rs` | 1,146 | x |\n| `c/src/d.rs` | 811 | y |\n\n## Next\n\n| `e/src/f.rs` | 9 | z |\n";
    assert_eq!(crates_said(doc), 13);
    let table = long_files_table(doc);
    assert_eq!(table.len(), 2);
    assert_eq!(table["a/src/b.rs"], 1146);
    assert_eq!(lines_above_tests("a\nb\n#[cfg(test)]\nmod tests {}\n"), 2);
}

/// The crates docs/architecture.md's "Unsafe code" section names: the bullets' first
/// backquoted word.
fn crates_allowed_unsafe(doc: &str) -> BTreeSet<String> {
    let section = doc
        .split("## Unsafe code")
        .nth(1)
        .expect("docs/architecture.md has a section `Unsafe code`");
    let section = section.split("\n## ").next().unwrap();
    section
        .lines()
        .filter_map(|l| l.strip_prefix("- `"))
        .map(|l| l.split('`').next().unwrap().to_string())
        .collect()
}

/// Every crate forbids unsafe code at its root, but those the architecture doc names, and
/// each of those has some (a crate that no longer needs it must forbid it).
#[test]
fn only_the_crates_the_doc_names_use_unsafe_code() {
    let root = workspace_root();
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    let allowed = crates_allowed_unsafe(&doc);
    let mut seen = BTreeSet::new();
    for entry in std::fs::read_dir(root.join("crates")).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let src = entry.path().join("src");
        let crate_root = [src.join("lib.rs"), src.join("main.rs")]
            .into_iter()
            .find(|p| p.is_file())
            .unwrap_or_else(|| panic!("{name}: no src/lib.rs or src/main.rs"));
        let forbids = std::fs::read_to_string(&crate_root)
            .unwrap()
            .contains("#![forbid(unsafe_code)]");
        let uses = source_files(&src).iter().any(|f| {
            ["unsafe {", "unsafe fn", "unsafe impl"]
                .iter()
                .any(|u| f.code.contains(u))
        });
        assert_eq!(
            forbids,
            !allowed.contains(&name),
            "{name}: forbids unsafe code at its root: {forbids}; docs/architecture.md's \
             \"Unsafe code\" names it: {}",
            allowed.contains(&name)
        );
        if allowed.contains(&name) {
            assert!(
                uses,
                "{name}: docs/architecture.md says it needs unsafe code; it has none"
            );
        }
        seen.insert(name);
    }
    let unknown: Vec<&String> = allowed.difference(&seen).collect();
    assert!(unknown.is_empty(), "not crates: {unknown:?}");
}
