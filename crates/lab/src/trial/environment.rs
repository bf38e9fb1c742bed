//! What is recorded of a trial's environment before it runs: rubyrace's version, the
//! Ruby's description (and whether it runs at all), the recorded variables, the machine,
//! the load average and the app's git state.

use std::collections::BTreeMap;
use std::time::SystemTime;

use super::TrialSpec;
use experiment::Workload;
use results::EnvironmentRecord;
use sys::environment;

/// The environment of a trial, and why the Ruby did not answer when it did not.
pub(super) fn capture(spec: &TrialSpec) -> (EnvironmentRecord, Option<String>) {
    let s = &spec.settings;
    let mut effective: BTreeMap<String, String> = std::env::vars().collect();
    effective.extend(s.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let env_pairs: Vec<(String, String)> =
        s.env.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let description = rubies::discovery::ruby_description(&s.ruby_argv, &env_pairs);
    let ruby_error = description.as_ref().err().map(|e| format!("{e:#}"));
    let record = EnvironmentRecord {
        rubyrace_version: env!("CARGO_PKG_VERSION").into(),
        ruby_description: description.ok(),
        env: environment::captured_env(&effective, &spec.record_env),
        machine: environment::machine(),
        load_average_before: environment::load_average(),
        app_git: match s.workload {
            Workload::Http => environment::git_state(&s.app_dir),
            Workload::Script => s
                .script
                .as_ref()
                .and_then(|sc| sc.path.parent().and_then(environment::git_state)),
        },
        placement: results::Placement::from_env(),
    };
    (record, ruby_error)
}

pub(super) fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(SystemTime::now()).to_string()
}
