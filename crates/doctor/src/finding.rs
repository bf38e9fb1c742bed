//! A finding: one check's status, what it saw and what to do about it.

use serde::{Deserialize, Serialize};

/// How a finding bears on benchmarks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Nothing to do.
    Ok,
    /// Worth knowing; may matter for some experiments.
    Info,
    /// Makes results noisier or less representative: fix it before measuring.
    Warn,
    /// Makes results wrong or experiments impossible.
    Bad,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Info => "info",
            Status::Warn => "warn",
            Status::Bad => "bad",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One check's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The check: "cpus", "governor", "busy_processes"... (see [`crate::report::CHECKS`]).
    pub name: String,
    pub status: Status,
    /// What was seen; may hold several lines.
    pub value: String,
    /// What to do about it; empty when there is nothing to do.
    pub advice: String,
}

impl Finding {
    pub(crate) fn new(
        name: &str,
        status: Status,
        value: impl Into<String>,
        advice: impl Into<String>,
    ) -> Self {
        Finding {
            name: name.to_string(),
            status,
            value: value.into(),
            advice: advice.into(),
        }
    }

    pub(crate) fn ok(name: &str, value: impl Into<String>) -> Self {
        Finding::new(name, Status::Ok, value, "")
    }
}
