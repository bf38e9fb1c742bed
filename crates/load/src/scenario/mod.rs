//! User sessions: scenarios of steps that virtual users walk through, each with its own
//! cookie jar and variables, instead of a stateless URL mix.
//!
//! - this module: the checked model (`ScenarioSet`, `Scenario`, `Step`, templates);
//! - `file`: the scenario file (TOML, docs/scenarios.md) read with positions, so every
//!   mistake is `FILE:LINE:COLUMN: key: message`;
//! - `user`: one virtual user at run time: the request of its current step written into
//!   the connection's buffer, the response checked and its values extracted, cookies kept.
//!
//! The load engine holds one `VirtualUser` per connection; a scenario run costs what a URL
//! mix costs plus the formatting of each request and, where a step extracts from the body,
//! a copy of that body.

mod file;
mod user;

use std::time::Duration;

pub use file::{parse_scenarios, ScenarioError};
pub use user::{StepFailure, StepOutcome, VirtualUser, MAX_CAPTURED_BODY};

/// Every scenario of a run, with their weights.
#[derive(Debug)]
pub struct ScenarioSet {
    /// Where the scenarios were read from, for messages.
    pub source: String,
    pub scenarios: Vec<Scenario>,
    cumulative_weights: Vec<u64>,
    /// The global index of each scenario's first step: steps are numbered across
    /// scenarios, for the per-step statistics.
    first_step: Vec<usize>,
}

impl ScenarioSet {
    pub(crate) fn new(source: String, scenarios: Vec<Scenario>) -> ScenarioSet {
        let mut total = 0u64;
        let mut cumulative_weights = Vec::new();
        let mut first_step = Vec::new();
        let mut steps = 0;
        for s in &scenarios {
            total += u64::from(s.weight);
            cumulative_weights.push(total);
            first_step.push(steps);
            steps += s.steps.len();
        }
        ScenarioSet {
            source,
            scenarios,
            cumulative_weights,
            first_step,
        }
    }

    /// Steps of every scenario.
    pub fn step_count(&self) -> usize {
        self.scenarios.iter().map(|s| s.steps.len()).sum()
    }

    /// The global index of step `step` of scenario `scenario`.
    pub fn global_step(&self, scenario: usize, step: usize) -> usize {
        self.first_step[scenario] + step
    }

    /// (scenario name, step name) of every global step, in order.
    pub fn step_names(&self) -> Vec<(String, String)> {
        self.scenarios
            .iter()
            .flat_map(|s| s.steps.iter().map(|st| (s.name.clone(), st.name.clone())))
            .collect()
    }

    /// The scenario whose weight interval holds `ticket` (0 ≤ ticket < total weight).
    pub(crate) fn pick(&self, ticket: u64) -> usize {
        self.cumulative_weights.partition_point(|&c| c <= ticket)
    }

    pub(crate) fn total_weight(&self) -> u64 {
        *self.cumulative_weights.last().unwrap_or(&0)
    }
}

/// One kind of user: a weight, variables drawn per session, and steps in order.
#[derive(Debug)]
pub struct Scenario {
    pub name: String,
    pub weight: u32,
    /// Variable names, by slot: `vu`, `session`, then `vars` in file order, then the
    /// variables the steps extract.
    pub var_names: Vec<String>,
    /// The `vars` of the file, each filling its slot at the start of every session.
    pub vars: Vec<(usize, VarDef)>,
    pub steps: Vec<Step>,
}

/// The slots of the built-in variables.
pub const VU_SLOT: usize = 0;
pub const SESSION_SLOT: usize = 1;

/// How a variable gets its value at the start of a session.
#[derive(Debug)]
pub enum VarDef {
    /// A uniform integer in `[lo, hi]`.
    Random { lo: i64, hi: i64 },
    /// One of the strings, uniformly.
    Pick(Vec<String>),
    /// A template over the variables before it.
    Text(Template),
}

/// One request of a scenario and what to do with its response.
#[derive(Debug)]
pub struct Step {
    pub name: String,
    pub method: String,
    pub path: Template,
    pub headers: Vec<(String, Template)>,
    pub body: Option<Body>,
    pub expect: Expect,
    pub think: Think,
    pub extract: Vec<Extraction>,
}

impl Step {
    /// Whether an extraction reads the response body (so the engine keeps a copy of it).
    pub fn reads_body(&self) -> bool {
        self.extract
            .iter()
            .any(|e| !matches!(e.source, Source::Header { .. }))
    }
}

#[derive(Debug)]
pub enum Body {
    /// `application/x-www-form-urlencoded`, each value percent-encoded.
    Form(Vec<(String, Template)>),
    /// As written, with the step's own `Content-Type` header.
    Raw(Template),
}

/// The statuses a step accepts.
#[derive(Debug, Clone, PartialEq)]
pub enum Expect {
    /// Any 2xx or 3xx (the default).
    Success,
    Codes(Vec<u16>),
}

impl Expect {
    pub fn accepts(&self, status: u16) -> bool {
        match self {
            Expect::Success => (200..400).contains(&status),
            Expect::Codes(c) => c.contains(&status),
        }
    }
}

/// The pause after a step's response before the next step is sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Think {
    None,
    Fixed(Duration),
    /// Uniform in `[min, max]`.
    Uniform(Duration, Duration),
    /// Exponential with this mean, cut at 10 × the mean.
    Exponential(Duration),
}

/// A value taken from a response into a variable.
#[derive(Debug)]
pub struct Extraction {
    pub var: String,
    pub slot: usize,
    pub source: Source,
}

#[derive(Debug)]
pub enum Source {
    /// The `content` of `<meta name="NAME" content="...">` (Rails' CSRF token).
    Meta(String),
    /// A JSON pointer into a JSON body (`/id`, `/posts/0/id`).
    Json(String),
    /// A response header (case-insensitive), or the first capture group of `regex` in it.
    Header {
        name: String,
        regex: Option<regex::Regex>,
    },
    /// The first capture group (or the whole match) of a regular expression in the body.
    Body(regex::Regex),
}

/// A string with `${name}` variables, resolved against a user's variables.
#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq)]
enum Part {
    Literal(String),
    Var(usize),
}

impl Template {
    /// Appends the template with `vars` filled in.
    pub fn render_into(&self, vars: &[String], out: &mut Vec<u8>) {
        for p in &self.parts {
            match p {
                Part::Literal(s) => out.extend_from_slice(s.as_bytes()),
                Part::Var(slot) => out.extend_from_slice(vars[*slot].as_bytes()),
            }
        }
    }

    pub fn render(&self, vars: &[String]) -> String {
        let mut out = Vec::new();
        self.render_into(vars, &mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// The variable slots this template uses.
    pub fn slots(&self) -> impl Iterator<Item = usize> + '_ {
        self.parts.iter().filter_map(|p| match p {
            Part::Var(s) => Some(*s),
            Part::Literal(_) => None,
        })
    }
}

/// Splits `text` into literals and `${name}` references (`$$` is a literal `$`); `slot`
/// maps a name to its slot or says why it cannot be used.
pub(crate) fn parse_template(
    text: &str,
    mut slot: impl FnMut(&str) -> Result<usize, String>,
) -> Result<Template, String> {
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        literal.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            literal.push('$');
            rest = tail;
        } else if let Some(inner) = after.strip_prefix('{') {
            let end = inner
                .find('}')
                .ok_or_else(|| format!("`${{` without a closing `}}` in {text:?}"))?;
            let name = &inner[..end];
            if name.is_empty() {
                return Err(format!("an empty `${{}}` in {text:?}"));
            }
            if !literal.is_empty() {
                parts.push(Part::Literal(std::mem::take(&mut literal)));
            }
            parts.push(Part::Var(slot(name)?));
            rest = &inner[end + 1..];
        } else {
            return Err(format!(
                "a `$` that starts no variable in {text:?}: write ${{name}} for a variable, $$ for a dollar sign"
            ));
        }
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        parts.push(Part::Literal(literal));
    }
    Ok(Template { parts })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_fill_variables_and_keep_dollars() {
        let names = ["vu", "session", "user"];
        let slot = |n: &str| {
            names
                .iter()
                .position(|k| *k == n)
                .ok_or_else(|| format!("unknown {n}"))
        };
        let t = parse_template("/u/${user}/s${session}?p=$$5", slot).unwrap();
        let vars = vec!["3".to_string(), "7".to_string(), "ada".to_string()];
        assert_eq!(t.render(&vars), "/u/ada/s7?p=$5");
        assert_eq!(t.slots().collect::<Vec<_>>(), vec![2, 1]);
        assert!(parse_template("/${nope}", slot)
            .unwrap_err()
            .contains("unknown nope"));
        assert!(parse_template("/${user", slot)
            .unwrap_err()
            .contains("without a closing"));
        assert!(parse_template("/$user", slot)
            .unwrap_err()
            .contains("starts no variable"));
        assert!(parse_template("/${}", slot).unwrap_err().contains("empty"));
    }
}
