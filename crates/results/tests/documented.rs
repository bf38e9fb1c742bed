//! The stored record matches its documentation: every field of every record type of this
//! crate (the `pub` fields of its `pub struct`s, which serde writes under the same names)
//! is named, in backticks, in docs/results.md. A field added without a line there fails
//! here, naming the type and the field. A `#[serde(flatten)]` field is written as its own
//! type's fields (`TrialResult.id`: `trial_id`, `block`, ...), which are checked as that
//! type's; its name is not in the record.

use std::path::Path;

/// `(type, field)` of every `pub` field of every `pub struct` in `source`, above its tests.
fn record_fields(source: &str) -> Vec<(String, String)> {
    let code = source.split("#[cfg(test)]").next().unwrap();
    let mut fields = Vec::new();
    let mut current: Option<String> = None;
    let mut flattened = false;
    for line in code.lines() {
        if let Some(rest) = line.strip_prefix("pub struct ") {
            current = rest.strip_suffix(" {").map(|name| name.trim().to_string());
            continue;
        }
        if line == "}" {
            current = None;
            continue;
        }
        let Some(owner) = &current else { continue };
        if line.trim() == "#[serde(flatten)]" {
            flattened = true;
            continue;
        }
        if let Some(rest) = line.trim_start().strip_prefix("pub ") {
            if let Some((name, _)) = rest.split_once(':') {
                if !std::mem::take(&mut flattened) {
                    fields.push((owner.clone(), name.trim().to_string()));
                }
            }
        }
    }
    fields
}

#[test]
fn every_field_of_the_record_is_in_docs_results_md() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(crate_dir.join("../../docs/results.md")).unwrap();
    let mut checked = 0;
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(crate_dir.join("src")).unwrap().flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let source = std::fs::read_to_string(&path).unwrap();
        for (owner, field) in record_fields(&source) {
            checked += 1;
            if !doc.contains(&format!("`{field}`")) {
                missing.push(format!("{owner}.{field} ({})", path.display()));
            }
        }
    }
    // TrialResult alone has more than 25 fields: a parser that found few read nothing.
    assert!(checked > 100, "only {checked} fields found");
    assert!(
        missing.is_empty(),
        "fields not documented in docs/results.md: {missing:?}"
    );
}

#[test]
fn the_field_reader_finds_fields_and_only_fields() {
    let source = "/// doc\npub struct A {\n    /// x\n    pub one: u32,\n    #[serde(flatten)]\n    pub id: Id,\n    #[serde(default)]\n    pub two: Option<String>,\n    three: u8,\n}\n\npub fn f() {}\n#[cfg(test)]\npub struct B {\n    pub four: u8,\n}\n";
    assert_eq!(
        record_fields(source),
        vec![
            ("A".to_string(), "one".to_string()),
            ("A".to_string(), "two".to_string())
        ]
    );
}
