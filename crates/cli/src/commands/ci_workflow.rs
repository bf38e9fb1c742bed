//! `rubyrace init --ci github`: the pull-request gate as a GitHub Actions workflow
//! (`.github/workflows/rubyrace.yml`) and the experiment it runs (`perf/rubyrace-check.toml`),
//! both in the app's repository, where the user asked for them. The workflow checks out with
//! history, installs rubyrace's Debian package, runs `rubyrace check` against the pull
//! request's base, appends the verdict to the job's summary, uploads the HTML report, and
//! keeps one comment on the pull request with the verdict, updated on every push.

use std::path::Path;

/// Where the gate's experiment goes, relative to the repository's root.
pub const GATE_EXPERIMENT: &str = "perf/rubyrace-check.toml";
/// Where the workflow goes, relative to the repository's root.
pub const WORKFLOW: &str = ".github/workflows/rubyrace.yml";
/// The first line of the pull-request comment the workflow keeps, by which it finds it again.
pub const COMMENT_MARKER: &str = "<!-- rubyrace check -->";

/// The workflow, with `@RUBYRACE_DEB@`, `@EXPERIMENT@` and `@MARKER@` to fill in.
const TEMPLATE: &str = include_str!("github-workflow.yml");

/// The workflow's text. `deb_url` is where the job downloads rubyrace's package.
pub fn github_workflow(deb_url: &str, experiment: &Path) -> String {
    TEMPLATE
        .replace("@RUBYRACE_DEB@", deb_url)
        .replace("@EXPERIMENT@", &experiment.display().to_string())
        .replace("@MARKER@", COMMENT_MARKER)
}

/// The package's download address for this version, as the project publishes its
/// releases (an example: a team that keeps its own copy puts that address here).
pub fn default_deb_url() -> String {
    let version = env!("CARGO_PKG_VERSION");
    format!(
        "https://github.com/rubyrace/rubyrace/releases/download/v{version}/rubyrace_{version}_amd64.deb  # where your team gets rubyrace's package"
    )
}
