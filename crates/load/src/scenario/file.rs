//! The scenario file (TOML, documented in docs/scenarios.md), read with the positions of
//! its keys and values: every mistake is reported as `FILE:LINE:COLUMN: key: message`, all
//! of them at once, and no key is ignored.

use std::collections::BTreeSet;
use std::fmt;
use std::ops::Range;
use std::time::Duration;

use toml_edit::{ImDocument, Item, TableLike, Value};

use super::{
    parse_template, Body, Expect, Extraction, Scenario, ScenarioSet, Source, Step, Template, Think,
    VarDef,
};

const ROOT_KEYS: [&str; 1] = ["scenario"];
const SCENARIO_KEYS: [&str; 4] = ["name", "weight", "vars", "step"];
const STEP_KEYS: [&str; 9] = [
    "name", "method", "path", "headers", "form", "body", "expect", "think", "extract",
];
const SOURCES: [&str; 4] = ["meta", "json", "header", "regex"];
const BUILT_INS: [&str; 2] = ["vu", "session"];

/// One mistake in a scenario file.
#[derive(Clone, Debug, PartialEq)]
pub struct ScenarioError {
    pub file: String,
    /// 1-based line and column (in characters), when the mistake has a place.
    pub position: Option<(usize, usize)>,
    /// The dotted key, e.g. `scenario[1].step[0].path`.
    pub key: String,
    pub message: String,
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some((line, column)) => write!(f, "{}:{line}:{column}: ", self.file)?,
            None => write!(f, "{}: ", self.file)?,
        }
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)
    }
}

struct Reader<'a> {
    file: &'a str,
    text: &'a str,
    errors: Vec<ScenarioError>,
}

type Span = Option<Range<usize>>;

impl Reader<'_> {
    fn error(&mut self, span: &Span, key: &str, message: impl Into<String>) {
        let position = span.as_ref().map(|s| line_column(self.text, s.start));
        self.errors.push(ScenarioError {
            file: self.file.to_string(),
            position,
            key: key.to_string(),
            message: message.into(),
        });
    }

    fn unknown(&mut self, span: &Span, key: &str, name: &str, known: &[&str]) {
        self.error(
            span,
            key,
            format!(
                "unknown key `{name}`; known keys here: {}",
                known.join(", ")
            ),
        );
    }

    fn string(&mut self, item: &Item, key: &str) -> Option<String> {
        match item.as_str() {
            Some(s) => Some(s.to_string()),
            None => {
                self.error(
                    &item.span(),
                    key,
                    format!("expected a string, found {}", describe(item)),
                );
                None
            }
        }
    }

    fn duration(&mut self, item: &Item, key: &str) -> Option<Duration> {
        let s = self.string(item, key)?;
        match humantime::parse_duration(&s) {
            Ok(d) => Some(d),
            Err(e) => {
                self.error(
                    &item.span(),
                    key,
                    format!("expected a duration such as \"500ms\" or \"2s\", found {s:?} ({e})"),
                );
                None
            }
        }
    }
}

/// Reads a scenario file's `text`; `file` names it in errors.
pub fn parse_scenarios(file: &str, text: &str) -> Result<ScenarioSet, Vec<ScenarioError>> {
    let mut r = Reader {
        file,
        text,
        errors: Vec::new(),
    };
    let doc = match ImDocument::parse(text.to_string()) {
        Ok(doc) => doc,
        Err(e) => {
            let message = format!("invalid TOML: {}", e.message().trim());
            r.error(&e.span(), "", message);
            return Err(r.errors);
        }
    };
    let root = doc.as_table();
    let mut scenarios = Vec::new();
    for (key, item) in root.iter() {
        let key_span = root.key(key).and_then(|k| k.span());
        match key {
            "scenario" => match item.as_array_of_tables() {
                Some(list) => {
                    for (i, t) in list.iter().enumerate() {
                        if let Some(s) =
                            read_scenario(&mut r, t, &format!("scenario[{i}]"), t.span())
                        {
                            scenarios.push(s);
                        }
                    }
                }
                None => r.error(
                    &item.span(),
                    "scenario",
                    format!("expected [[scenario]] tables, found {}", describe(item)),
                ),
            },
            other => r.unknown(&key_span, other, other, &ROOT_KEYS),
        }
    }
    if root.get("scenario").is_none() {
        r.error(
            &None,
            "",
            "no scenario: add a [[scenario]] with at least one [[scenario.step]]",
        );
    }
    let mut names = BTreeSet::new();
    for s in &scenarios {
        if !names.insert(s.name.clone()) {
            r.error(
                &None,
                "scenario",
                format!(
                    "two scenarios are named {:?}: names identify them in the results",
                    s.name
                ),
            );
        }
    }
    if r.errors.is_empty() {
        Ok(ScenarioSet::new(file.to_string(), scenarios))
    } else {
        Err(r.errors)
    }
}

fn read_scenario(r: &mut Reader, t: &dyn TableLike, prefix: &str, span: Span) -> Option<Scenario> {
    let errors_before = r.errors.len();
    let mut name = None;
    let mut weight = 1u32;
    let mut var_names: Vec<String> = BUILT_INS.iter().map(|s| s.to_string()).collect();
    let mut vars = Vec::new();
    let mut steps = Vec::new();
    // Read `name`, `weight` and `vars` before the steps, whatever the order in the file.
    for (key, item) in t.iter() {
        let dotted = format!("{prefix}.{key}");
        match key {
            "name" => name = r.string(item, &dotted),
            "weight" => match item.as_integer() {
                Some(w) if (1..=1_000_000).contains(&w) => weight = w as u32,
                _ => r.error(
                    &item.span(),
                    &dotted,
                    format!(
                        "expected an integer from 1 to 1000000, found {}",
                        describe(item)
                    ),
                ),
            },
            "vars" => read_vars(r, item, &dotted, &mut var_names, &mut vars),
            "step" => {}
            other => r.unknown(
                &t.key(other).and_then(|k| k.span()),
                &dotted,
                other,
                &SCENARIO_KEYS,
            ),
        }
    }
    let scenario_name = name.clone().unwrap_or_else(|| prefix.to_string());
    match t.get("step").map(|i| (i, i.as_array_of_tables())) {
        Some((_, Some(list))) if !list.is_empty() => {
            let mut step_names = BTreeSet::new();
            for (i, st) in list.iter().enumerate() {
                let key = format!("{prefix}.step[{i}]");
                if let Some(step) = read_step(r, st, &key, &mut var_names) {
                    if !step_names.insert(step.name.clone()) {
                        r.error(
                            &st.get("name").and_then(|n| n.span()),
                            &format!("{key}.name"),
                            format!(
                                "two steps of scenario {scenario_name:?} are named {:?}",
                                step.name
                            ),
                        );
                    }
                    steps.push(step);
                }
            }
        }
        Some((item, _)) => r.error(
            &item.span(),
            &format!("{prefix}.step"),
            format!(
                "expected [[scenario.step]] tables, found {}",
                describe(item)
            ),
        ),
        None => r.error(
            &span,
            prefix,
            format!(
                "scenario {scenario_name:?} has no step: add [[scenario.step]] tables after it"
            ),
        ),
    }
    if name.is_none() && t.get("name").is_none() {
        r.error(
            &span,
            prefix,
            "a scenario needs a name, e.g. name = \"reader\"",
        );
    }
    (r.errors.len() == errors_before).then(|| Scenario {
        name: scenario_name,
        weight,
        var_names,
        vars,
        steps,
    })
}

fn is_var_name(s: &str) -> bool {
    s.chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A template over the variables known so far.
fn template(
    r: &mut Reader,
    text: &str,
    span: &Span,
    key: &str,
    known: &[String],
) -> Option<Template> {
    let result = parse_template(text, |name| {
        known.iter().position(|k| k == name).ok_or_else(|| {
            format!(
                "${{{name}}} is not defined here: the variables are {} (a variable from `extract` exists from the step after the one that extracts it)",
                known.join(", ")
            )
        })
    });
    match result {
        Ok(t) => Some(t),
        Err(message) => {
            r.error(span, key, message);
            None
        }
    }
}

fn read_vars(
    r: &mut Reader,
    item: &Item,
    key: &str,
    names: &mut Vec<String>,
    vars: &mut Vec<(usize, VarDef)>,
) {
    let Some(t) = item.as_table_like() else {
        r.error(
            &item.span(),
            key,
            format!("expected a table of variables, found {}", describe(item)),
        );
        return;
    };
    for (name, v) in t.iter() {
        let dotted = format!("{key}.{name}");
        let span = v.span().or_else(|| t.key(name).and_then(|k| k.span()));
        if !is_var_name(name) || BUILT_INS.contains(&name) {
            r.error(&t.key(name).and_then(|k| k.span()), &dotted, format!("{name:?} cannot be a variable: letters, digits and _, not starting with a digit, and not vu or session (built in)"));
            continue;
        }
        let def = if let Some(s) = v.as_str() {
            template(r, s, &span, &dotted, names).map(VarDef::Text)
        } else if let Some(inner) = v.as_table_like() {
            match (inner.get("random"), inner.get("pick"), inner.len()) {
                (Some(range), None, 1) => match range
                    .as_array()
                    .map(|a| a.iter().map(Value::as_integer).collect::<Vec<_>>())
                    .as_deref()
                {
                    Some([Some(lo), Some(hi)]) if lo <= hi => {
                        Some(VarDef::Random { lo: *lo, hi: *hi })
                    }
                    _ => {
                        r.error(
                            &range.span(),
                            &format!("{dotted}.random"),
                            format!(
                                "expected [LOW, HIGH], two integers with LOW <= HIGH, found {}",
                                describe(range)
                            ),
                        );
                        None
                    }
                },
                (None, Some(pick), 1) => match pick.as_array().map(|a| {
                    a.iter()
                        .map(|v| v.as_str().map(str::to_string))
                        .collect::<Option<Vec<_>>>()
                }) {
                    Some(Some(options)) if !options.is_empty() => Some(VarDef::Pick(options)),
                    _ => {
                        r.error(
                            &pick.span(),
                            &format!("{dotted}.pick"),
                            format!(
                                "expected a non-empty array of strings, found {}",
                                describe(pick)
                            ),
                        );
                        None
                    }
                },
                _ => {
                    r.error(
                        &span,
                        &dotted,
                        "expected { random = [LOW, HIGH] } or { pick = [\"a\", \"b\"] }",
                    );
                    None
                }
            }
        } else {
            r.error(&span, &dotted, format!("expected a string template, {{ random = [LOW, HIGH] }} or {{ pick = [...] }}, found {}", describe(v)));
            None
        };
        if let Some(def) = def {
            names.push(name.to_string());
            vars.push((names.len() - 1, def));
        }
    }
}

/// One `[[step]]` table (`prefix` names it in errors): its name, method and path here, each
/// other key by its own reader below. None when any of them had an error, recorded in `r`.
fn read_step(
    r: &mut Reader,
    t: &dyn TableLike,
    prefix: &str,
    names: &mut Vec<String>,
) -> Option<Step> {
    let errors_before = r.errors.len();
    let field = |k: &str| format!("{prefix}.{k}");
    for (key, _) in t.iter() {
        if !STEP_KEYS.contains(&key) {
            r.unknown(
                &t.key(key).and_then(|k| k.span()),
                &field(key),
                key,
                &STEP_KEYS,
            );
        }
    }
    let name = match t.get("name") {
        Some(item) => r.string(item, &field("name")),
        None => {
            r.error(&t.get("path").and_then(|p| p.span()), prefix, "a step needs a name, e.g. name = \"home\": it names the step's line in the results");
            None
        }
    };
    let method = match t.get("method") {
        Some(item) => r.string(item, &field("method")).filter(|m| {
            let ok = crate::plan::is_method(m);
            if !ok {
                r.error(
                    &item.span(),
                    &field("method"),
                    format!("expected an upper-case HTTP method such as \"POST\", found {m:?}"),
                );
            }
            ok
        }),
        None => Some("GET".to_string()),
    };
    let path = match t.get("path") {
        Some(item) => r.string(item, &field("path")).and_then(|p| {
            if !(p.starts_with('/') || p.starts_with("${")) {
                r.error(&item.span(), &field("path"), format!("expected a path starting with '/' (or a variable holding one), found {p:?}"));
                return None;
            }
            template(r, &p, &item.span(), &field("path"), names)
        }),
        None => {
            r.error(&None, prefix, format!("step {:?} has no path", name.as_deref().unwrap_or("?")));
            None
        }
    };
    let headers = read_step_headers(r, t, prefix, names);
    let body = read_step_body(r, t, prefix, names);
    let expect = read_step_expect(r, t, prefix);
    let think = read_step_think(r, t, prefix);
    let extract = read_step_extract(r, t, prefix, names);
    if r.errors.len() > errors_before {
        return None;
    }
    Some(Step {
        name: name?,
        method: method?,
        path: path?,
        headers,
        body,
        expect,
        think,
        extract,
    })
}

/// A step's `headers`: "Name: value" strings, each value a template.
fn read_step_headers(
    r: &mut Reader,
    t: &dyn TableLike,
    prefix: &str,
    names: &[String],
) -> Vec<(String, Template)> {
    let field = |k: &str| format!("{prefix}.{k}");
    let mut headers = Vec::new();
    if let Some(item) = t.get("headers") {
        match item.as_array() {
            Some(list) => {
                for v in list.iter() {
                    let span = v.span();
                    match v.as_str().map(crate::plan::parse_header) {
                        Some(Ok((n, value))) => {
                            if let Some(t) = template(r, &value, &span, &field("headers"), names) {
                                headers.push((n, t));
                            }
                        }
                        _ => r.error(&span, &field("headers"), "expected \"Name: value\""),
                    }
                }
            }
            None => r.error(
                &item.span(),
                &field("headers"),
                format!(
                    "expected an array of \"Name: value\" strings, found {}",
                    describe(item)
                ),
            ),
        }
    }
    headers
}

/// A step's `form` (a table of fields) or `body` (a string), each a template; not both.
fn read_step_body(
    r: &mut Reader,
    t: &dyn TableLike,
    prefix: &str,
    names: &[String],
) -> Option<Body> {
    let field = |k: &str| format!("{prefix}.{k}");
    match (t.get("form"), t.get("body")) {
        (Some(form), Some(_)) => {
            r.error(
                &form.span(),
                &field("form"),
                "give either `form` or `body`, not both",
            );
            None
        }
        (Some(form), None) => match form.as_table_like() {
            Some(ft) => {
                let mut fields = Vec::new();
                for (k, v) in ft.iter() {
                    let key = format!("{}.{k}", field("form"));
                    if let Some(s) = r.string(v, &key) {
                        if let Some(t) = template(r, &s, &v.span(), &key, names) {
                            fields.push((k.to_string(), t));
                        }
                    }
                }
                Some(Body::Form(fields))
            }
            None => {
                r.error(
                    &form.span(),
                    &field("form"),
                    format!("expected a table of fields, found {}", describe(form)),
                );
                None
            }
        },
        (None, Some(body)) => r
            .string(body, &field("body"))
            .and_then(|s| template(r, &s, &body.span(), &field("body"), names))
            .map(Body::Raw),
        (None, None) => None,
    }
}

/// A step's `expect`: a status or an array of them; success (any 2xx or 3xx) when absent.
fn read_step_expect(r: &mut Reader, t: &dyn TableLike, prefix: &str) -> Expect {
    let field = |k: &str| format!("{prefix}.{k}");
    match t.get("expect") {
        None => Expect::Success,
        Some(item) => {
            let codes: Option<Vec<i64>> = match item.as_value() {
                Some(Value::Integer(i)) => Some(vec![*i.value()]),
                Some(Value::Array(a)) if !a.is_empty() => a.iter().map(Value::as_integer).collect(),
                _ => None,
            };
            match codes {
                Some(c) if c.iter().all(|s| (100..=599).contains(s)) => {
                    Expect::Codes(c.iter().map(|&s| s as u16).collect())
                }
                _ => {
                    r.error(
                        &item.span(),
                        &field("expect"),
                        format!(
                            "expected a status (100 to 599) or an array of them, found {}",
                            describe(item)
                        ),
                    );
                    Expect::Success
                }
            }
        }
    }
}

/// A step's `think`: a duration, { min, max } (uniform) or { mean } (exponential).
fn read_step_think(r: &mut Reader, t: &dyn TableLike, prefix: &str) -> Think {
    let field = |k: &str| format!("{prefix}.{k}");
    match t.get("think") {
        None => Think::None,
        Some(item) if item.as_str().is_some() => r
            .duration(item, &field("think"))
            .map_or(Think::None, Think::Fixed),
        Some(item) => match item.as_table_like() {
            Some(tt) => match (tt.get("min"), tt.get("max"), tt.get("mean"), tt.len()) {
                (Some(min), Some(max), None, 2) => {
                    let (lo, hi) = (
                        r.duration(min, &field("think.min")),
                        r.duration(max, &field("think.max")),
                    );
                    match (lo, hi) {
                        (Some(lo), Some(hi)) if lo <= hi => Think::Uniform(lo, hi),
                        (Some(_), Some(_)) => {
                            r.error(&item.span(), &field("think"), "min is above max");
                            Think::None
                        }
                        _ => Think::None,
                    }
                }
                (None, None, Some(mean), 1) => r
                    .duration(mean, &field("think.mean"))
                    .map_or(Think::None, Think::Exponential),
                _ => {
                    r.error(&item.span(), &field("think"), "expected a duration (\"1s\"), { min = \"1s\", max = \"3s\" } (uniform) or { mean = \"2s\" } (exponential)");
                    Think::None
                }
            },
            None => {
                r.error(
                    &item.span(),
                    &field("think"),
                    format!("expected a duration or a table, found {}", describe(item)),
                );
                Think::None
            }
        },
    }
}

/// A step's `extract`: the variables it defines for the steps after it, each given a slot in `names`.
fn read_step_extract(
    r: &mut Reader,
    t: &dyn TableLike,
    prefix: &str,
    names: &mut Vec<String>,
) -> Vec<Extraction> {
    let field = |k: &str| format!("{prefix}.{k}");
    // Extractions define their variables for the steps after this one.
    let mut extract = Vec::new();
    if let Some(item) = t.get("extract") {
        match item.as_table_like() {
            Some(et) => {
                for (var, spec) in et.iter() {
                    let key = format!("{}.{var}", field("extract"));
                    if !is_var_name(var) || BUILT_INS.contains(&var) {
                        r.error(&et.key(var).and_then(|k| k.span()), &key, format!("{var:?} cannot be a variable: letters, digits and _, not starting with a digit, and not vu or session"));
                        continue;
                    }
                    if let Some(source) = read_source(r, spec, &key) {
                        let slot = match names.iter().position(|n| n == var) {
                            Some(s) => s,
                            None => {
                                names.push(var.to_string());
                                names.len() - 1
                            }
                        };
                        extract.push(Extraction {
                            var: var.to_string(),
                            slot,
                            source,
                        });
                    }
                }
            }
            None => r.error(
                &item.span(),
                &field("extract"),
                format!(
                    "expected a table such as {{ csrf = {{ meta = \"csrf-token\" }} }}, found {}",
                    describe(item)
                ),
            ),
        }
    }
    extract
}

fn read_source(r: &mut Reader, spec: &Item, key: &str) -> Option<Source> {
    let Some(t) = spec.as_table_like() else {
        r.error(
            &spec.span(),
            key,
            format!(
                "expected a table with one of {}, found {}",
                SOURCES.join(", "),
                describe(spec)
            ),
        );
        return None;
    };
    for (k, v) in t.iter() {
        if !SOURCES.contains(&k) {
            r.unknown(
                &t.key(k).and_then(|s| s.span()).or(v.span()),
                &format!("{key}.{k}"),
                k,
                &SOURCES,
            );
            return None;
        }
    }
    let regex = match t.get("regex") {
        Some(item) => {
            let text = r.string(item, &format!("{key}.regex"))?;
            match regex::Regex::new(&text) {
                Ok(re) => Some(re),
                Err(e) => {
                    let first = e
                        .to_string()
                        .lines()
                        .last()
                        .unwrap_or("")
                        .trim()
                        .to_string();
                    r.error(
                        &item.span(),
                        &format!("{key}.regex"),
                        format!("not a regular expression: {first}"),
                    );
                    return None;
                }
            }
        }
        None => None,
    };
    let one =
        |r: &mut Reader, k: &str| -> Option<String> { r.string(t.get(k)?, &format!("{key}.{k}")) };
    match (t.get("meta"), t.get("json"), t.get("header")) {
        (Some(_), None, None) if regex.is_none() => one(r, "meta").map(Source::Meta),
        (None, Some(item), None) if regex.is_none() => {
            let pointer = one(r, "json")?;
            if !(pointer.is_empty() || pointer.starts_with('/')) {
                r.error(&item.span(), &format!("{key}.json"), format!("expected a JSON pointer such as \"/id\" or \"/posts/0/id\", found {pointer:?}"));
                return None;
            }
            Some(Source::Json(pointer))
        }
        (None, None, Some(_)) => one(r, "header").map(|name| Source::Header { name, regex }),
        (None, None, None) => match regex {
            Some(re) => Some(Source::Body(re)),
            None => {
                r.error(
                    &spec.span(),
                    key,
                    format!("expected one of {}", SOURCES.join(", ")),
                );
                None
            }
        },
        _ => {
            r.error(&spec.span(), key, "give one source: meta, json or header (a header may take a regex; a regex alone reads the body)");
            None
        }
    }
}

fn describe(item: &Item) -> String {
    match item {
        Item::None => "nothing".into(),
        Item::Value(v) => match v {
            Value::String(s) => format!("the string {:?}", s.value()),
            Value::Integer(i) => format!("the integer {}", i.value()),
            Value::Float(f) => format!("the number {}", f.value()),
            Value::Boolean(b) => format!("{}", b.value()),
            Value::Datetime(_) => "a date".into(),
            Value::Array(_) => "an array".into(),
            Value::InlineTable(_) => "an inline table".into(),
        },
        Item::Table(_) => "a table".into(),
        Item::ArrayOfTables(_) => "an array of tables".into(),
    }
}

/// The 1-based line and column (in characters) of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, text[start..offset].chars().count() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{StepFailure, StepOutcome, VirtualUser};

    const FORUM: &str = r#"
[[scenario]]
name = "member"
weight = 2
vars = { user = { random = [1, 50] }, email = "user${user}@example.com" }

[[scenario.step]]
name = "login form"
path = "/login"
extract = { csrf = { meta = "csrf-token" } }

[[scenario.step]]
name = "log in"
method = "POST"
path = "/login"
form = { authenticity_token = "${csrf}", email = "${email}", password = "secret" }
expect = 302
extract = { home = { header = "location", regex = "^https?://[^/]+(/.*)$" } }
think = { min = "10ms", max = "20ms" }

[[scenario.step]]
name = "home"
path = "${home}"

[[scenario]]
name = "reader"
[[scenario.step]]
name = "topics"
path = "/topics?page=${session}"
think = { mean = "5ms" }
"#;

    #[test]
    fn a_forum_scenario_reads_and_a_user_walks_it() {
        let set = parse_scenarios("forum.toml", FORUM).unwrap();
        assert_eq!(set.step_count(), 4);
        assert_eq!(
            set.step_names()[3],
            ("reader".to_string(), "topics".to_string())
        );
        let member = &set.scenarios[0];
        assert_eq!(
            member.var_names,
            ["vu", "session", "user", "email", "csrf", "home"]
        );
        // Walk the member scenario: whichever scenario the draw gives, walk until member.
        let mut user = VirtualUser::new(7, 1);
        loop {
            user.start_session(&set);
            if user.step(&set).name == "login form" {
                break;
            }
        }
        let n: i64 = user.var(&set, "user").unwrap().parse().unwrap();
        assert!((1..=50).contains(&n));
        assert_eq!(
            user.var(&set, "email").unwrap(),
            format!("user{n}@example.com")
        );
        assert_eq!(user.var(&set, "vu").unwrap(), "7");
        let mut out = Vec::new();
        assert!(user.write_request(&set, "h:1", &[], false, &mut out));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "GET /login HTTP/1.1\r\nHost: h:1\r\n\r\n"
        );
        let page = br#"<meta name="csrf-token" content="a+b/c=" />"#;
        let cookie = vec![(
            "set-cookie".to_string(),
            b"_s=abc; path=/; HttpOnly".to_vec(),
        )];
        assert!(matches!(
            user.on_response(&set, 200, &cookie, Some(page)),
            StepOutcome::Next { .. }
        ));
        assert_eq!(user.cookies(), [("_s".to_string(), "abc".to_string())]);
        let mut out = Vec::new();
        user.write_request(&set, "h:1", &[("X-A".into(), "1".into())], true, &mut out);
        let text = String::from_utf8(out).unwrap();
        let form =
            format!("authenticity_token=a%2Bb%2Fc%3D&email=user{n}%40example.com&password=secret");
        assert_eq!(
            text,
            format!("POST /login HTTP/1.1\r\nHost: h:1\r\nX-A: 1\r\nCookie: _s=abc\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}", form.len())
        );
        // A 200 where a redirect is expected fails the step, and names the status.
        let failed = user.on_response(&set, 200, &[], None);
        assert_eq!(failed, StepOutcome::Failed(StepFailure::Status(200)));
        // Walk it again, this time to the end.
        let redirect = vec![
            ("location".to_string(), b"http://h:1/topics/9".to_vec()),
            ("set-cookie".to_string(), b"_s=def".to_vec()),
        ];
        user.start_session(&set);
        while user.step(&set).name != "login form" {
            user.start_session(&set);
        }
        assert!(user.cookies().is_empty(), "a new session has a new jar");
        user.on_response(&set, 200, &[], Some(page));
        match user.on_response(&set, 302, &redirect, None) {
            StepOutcome::Next { think } => {
                assert!(think >= Duration::from_millis(10) && think <= Duration::from_millis(20))
            }
            other => panic!("{other:?}"),
        }
        let mut out = Vec::new();
        user.write_request(&set, "h:1", &[], false, &mut out);
        assert!(String::from_utf8(out)
            .unwrap()
            .starts_with("GET /topics/9 HTTP/1.1\r\nHost: h:1\r\nCookie: _s=def\r\n"));
        assert!(matches!(
            user.on_response(&set, 200, &[], None),
            StepOutcome::SessionDone { .. }
        ));
        // An extraction that finds nothing names the variable.
        user.start_session(&set);
        while user.step(&set).name != "login form" {
            user.start_session(&set);
        }
        match user.on_response(&set, 200, &[], Some(b"<html></html>")) {
            StepOutcome::Failed(StepFailure::Extract { var, why }) => {
                assert_eq!(var, "csrf");
                assert!(why.contains("no <meta name=\"csrf-token\""), "{why}");
            }
            other => panic!("{other:?}"),
        }
    }

    fn errors(text: &str) -> Vec<String> {
        parse_scenarios("s.toml", text)
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn mistakes_are_reported_where_they_are() {
        let e = errors(
            "[[scenario]]\nname = \"a\"\n[[scenario.step]]\nname = \"x\"\npath = \"/${csrf}\"\n",
        );
        assert!(
            e[0].starts_with("s.toml:5:8: scenario[0].step[0].path: ${csrf} is not defined here"),
            "{e:?}"
        );
        let e = errors("[[scenario]]\nname = \"a\"\n[[scenario.step]]\nname = \"x\"\npath = \"/\"\nthink = \"fast\"\n");
        assert!(
            e[0].starts_with("s.toml:6:9: scenario[0].step[0].think: expected a duration"),
            "{e:?}"
        );
        let e = errors("[[scenario]]\nname = \"a\"\n[[scenario.step]]\nname = \"x\"\npath = \"/\"\nexpect = 99\n");
        assert!(
            e[0].starts_with("s.toml:6:10: scenario[0].step[0].expect: expected a status"),
            "{e:?}"
        );
        let e = errors("[[scenario]]\nname = \"a\"\n[[scenario.step]]\nname = \"x\"\npath = \"/\"\nextract = { t = { meta = \"m\", json = \"/a\" } }\n");
        assert!(
            e[0].contains("scenario[0].step[0].extract.t: give one source"),
            "{e:?}"
        );
        let e = errors("[[scenario]]\nname = \"a\"\n[[scenario.step]]\nname = \"x\"\npath = \"/\"\nextract = { t = { regex = \"(\" } }\n");
        assert!(
            e[0].contains("extract.t.regex: not a regular expression"),
            "{e:?}"
        );
        let e =
            errors("[[scenario]]\nname = \"a\"\n[[scenario.step]]\nname = \"x\"\npth = \"/\"\n");
        assert!(
            e.iter()
                .any(|m| m.starts_with("s.toml:5:1: scenario[0].step[0].pth: unknown key `pth`")),
            "{e:?}"
        );
        let e = errors("[[scenario]]\nname = \"a\"\n");
        assert!(e[0].contains("scenario \"a\" has no step"), "{e:?}");
        let e = errors("[[scenario]]\nname = \"a\"\nvars = { vu = \"x\" }\n[[scenario.step]]\nname = \"x\"\npath = \"/\"\n");
        assert!(
            e[0].starts_with("s.toml:3:10: scenario[0].vars.vu"),
            "{e:?}"
        );
        let e =
            errors("[[scenario]]\nname = \"a\"\n[[scenario.step]]\nname = \"x\"\npath = \"x\"\n");
        assert!(e[0].contains("expected a path starting with '/'"), "{e:?}");
        let e = errors("[[scenario]\n");
        assert!(e[0].starts_with("s.toml:1:"), "{e:?}");
        assert!(e[0].contains("invalid TOML"), "{e:?}");
        let e = errors("title = 1\n");
        assert!(e.iter().any(|m| m.contains("unknown key `title`")), "{e:?}");
        let e = errors("[[scenario]]\nname = \"a\"\n[[scenario.step]]\nname = \"x\"\npath = \"/\"\n[[scenario.step]]\nname = \"x\"\npath = \"/y\"\n");
        assert!(
            e[0].contains("two steps of scenario \"a\" are named \"x\""),
            "{e:?}"
        );
    }
}
