//! Which rubyrace made a result: `rubyrace --version` names the version and the commit the
//! binary was built from (crates/cli/build.rs), and every results directory keeps that
//! commit beside the version (`meta.rubyrace_commit`, docs/results.md).

use serde_json::Value;

use crate::commits::git;
use crate::support::lab::Lab;
use crate::support::{rubyrace, workspace_root};

#[test]
fn the_version_names_the_commit_and_a_results_directory_keeps_it() {
    let root = workspace_root();
    let head = git(&root, &["rev-parse", "HEAD"]);
    let date = git(&root, &["show", "-s", "--format=%cs", "HEAD"]);
    let version = rubyrace(&["--version"]);
    assert_eq!(version.code(), Some(0), "{version:?}");
    assert_eq!(
        version.stdout.trim(),
        format!(
            "rubyrace {} (commit {}, {date})",
            env!("CARGO_PKG_VERSION"),
            &head[..12]
        ),
        "{version:?}"
    );
    // A one-trial script run: the smallest results directory.
    let lab = Lab::new("version");
    std::fs::write(
        lab.dir.path("noop.rb"),
        "x = 0\n1000.times { |i| x += i }\n",
    )
    .unwrap();
    let file = lab.experiment(
        "name = \"version\"\nbatches = 1\n[settings]\nworkload = \"script\"\nscript = \"noop.rb\"\nruns = 1\n",
    );
    let out = lab.dir.path("results");
    let run = rubyrace(&["run", file.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert_eq!(run.code(), Some(0), "{run:?}");
    let export = rubyrace(&["export", out.to_str().unwrap(), "--json"]);
    assert_eq!(export.code(), Some(0), "{export:?}");
    let export: Value = serde_json::from_str(&export.stdout).unwrap();
    assert_eq!(
        export["meta"]["rubyrace_commit"],
        head.as_str(),
        "{}",
        export["meta"]
    );
    assert_eq!(
        export["meta"]["rubyrace_version"],
        env!("CARGO_PKG_VERSION")
    );
}
