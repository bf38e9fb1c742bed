//! The layout's rule, checked: within every crate of the workspace the modules depend on
//! each other one way, with no import circle (issue 16). A module's dependencies are the
//! `crate::NAME` paths in its code above its tests (`#[cfg(test)]`), comments aside; a circle is a strongly
//! connected component of more than one module, found by Tarjan's algorithm.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use support::workspace_root;

/// Module name → the same crate's modules it names, for the crate whose sources are in
/// `src` (top-level modules: `src/NAME.rs` and `src/NAME/`).
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files: Vec<(String, std::path::PathBuf)> = Vec::new();
    let mut walk = vec![src.to_path_buf()];
    while let Some(dir) = walk.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let top = path.strip_prefix(src).unwrap().components().next().unwrap();
                let name = top
                    .as_os_str()
                    .to_string_lossy()
                    .trim_end_matches(".rs")
                    .to_string();
                files.push((name, path));
            }
        }
    }
    let modules: BTreeSet<String> = files.iter().map(|(n, _)| n.clone()).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, path) in &files {
        let text = std::fs::read_to_string(path).unwrap();
        // Above the tests, without comments (a doc link is not a dependency).
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap()
            .lines()
            .map(|line| line.split("//").next().unwrap())
            .collect::<Vec<_>>()
            .join("\n");
        let edges = graph.entry(name.clone()).or_default();
        for (i, _) in code.match_indices("crate::") {
            for target in named_modules(&code[i + "crate::".len()..]) {
                if modules.contains(&target) && &target != name {
                    edges.insert(target);
                }
            }
        }
    }
    graph
}

/// The modules named right after a `crate::`: one (`crate::a::B`), or each of a group
/// (`crate::{a, b::{C, D}}`).
fn named_modules(rest: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let Some(group) = rest.strip_prefix('{') else {
        return vec![ident(rest)];
    };
    let (mut depth, mut items, mut start) = (0, Vec::new(), 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(ident(&group[start..i]));
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(ident(&group[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    items
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
fn a_group_import_names_each_of_its_modules() {
    assert_eq!(named_modules("trial::{A, B};"), ["trial"]);
    assert_eq!(
        named_modules("{environment, knobs::{self, X}, rubies};"),
        ["environment", "knobs", "rubies"]
    );
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
        let graph = module_graph(&src);
        modules += graph.len();
        for circle in circles(&graph) {
            found.push(format!(
                "{}: {}",
                entry.file_name().to_string_lossy(),
                circle.join(" ↔ ")
            ));
        }
    }
    assert!(
        modules > 40,
        "only {modules} modules found under {}",
        crates.display()
    );
    assert!(found.is_empty(), "import circles:\n{}", found.join("\n"));
}
