//! The experiment file's unit tests: parsing, errors with positions, the matrix, the
//! designs, the defaults.

#![allow(unused_imports)]
use super::*;
use crate::error::*;
use crate::matrix::*;
use crate::model::*;
use crate::parse::*;
use crate::read::*;
use crate::resolve::*;
use crate::settings::*;
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use load::{ConnectionMode, LoadSettings};
use serde::{Deserialize, Serialize};
use toml_edit::{ImDocument, Item, TableLike, Value};

use crate::schedule::Order;
use crate::servers::ServerKind;
use rubies::discovery::{DiscoveredRuby, RubyCapabilities};
use rubies::knobs::{self, AllocatorSetting, Compact, Jit, COMPACTS, JITS};

/// Parses `text` as if it were `/tmp/x/exp.toml`, with `sh` standing in for Ruby.
fn parse(text: &str) -> Result<Experiment, ExperimentErrors> {
    let text = format!("{text}\n[rubies]\nr = \"/bin/sh\"\n");
    Experiment::parse(Path::new("/tmp/exp.toml"), &text)
}

fn errors(text: &str) -> Vec<String> {
    parse(text)
        .expect_err("the file should be rejected")
        .0
        .iter()
        .map(|e| e.to_string())
        .collect()
}

fn labels(e: &Experiment) -> Vec<&str> {
    e.configs.iter().map(|c| c.label.as_str()).collect()
}

#[test]
fn defaults_give_one_configuration() {
    let e = parse("").unwrap();
    assert_eq!(labels(&e), ["default"]);
    let s = &e.configs[0].settings;
    assert_eq!((s.server, s.processes, s.threads), (ServerKind::Puma, 1, 1));
    assert_eq!(s.load.connections, 1);
    assert_eq!(s.load.warmup, Duration::from_secs(5));
    assert_eq!(s.load.duration, Duration::from_secs(10));
    assert_eq!(s.ruby_argv, ["/bin/sh"]);
    assert!(s.app_dir.ends_with("apps/rack-hello"));
    assert_eq!((e.batches, e.seed, e.order), (5, 1, Order::Random));
}

#[test]
fn the_matrix_is_a_cartesian_product_labelled_by_the_axes_that_vary() {
    let e = parse(
        "[settings]\nthreads = 2\n[matrix]\nruby_opts = [[], [\"--yjit\"]]\nprocesses = [1, 2]\nmode = [\"keepalive\"]\n",
    )
    .unwrap();
    assert_eq!(
        labels(&e),
        [
            "ruby_opts=none processes=1",
            "ruby_opts=none processes=2",
            "ruby_opts=--yjit processes=1",
            "ruby_opts=--yjit processes=2",
        ]
    );
    assert_eq!(e.configs[3].settings.ruby_argv, ["/bin/sh", "--yjit"]);
    assert_eq!(
        e.configs[3].settings.load.connections, 4,
        "processes × threads"
    );
    assert_eq!(e.configs[1].axes["processes"], "2");
}

#[test]
fn labelled_values_env_axes_configs_and_exclusions() {
    let e = parse(
        r#"
[settings]
env = { A = "1" }
[matrix]
env = [{ label = "yjit", value = { RUBY_YJIT_ENABLE = "1" } }, { RUBY_YJIT_ENABLE = "0" }]
[[configs]]
label = "puma"
[[configs]]
server = "webrick"
[[exclude]]
server = "webrick"
env = { RUBY_YJIT_ENABLE = "0" }
"#,
    )
    .unwrap();
    assert_eq!(
        labels(&e),
        [
            "puma yjit",
            "puma RUBY_YJIT_ENABLE=0",
            "server=webrick yjit"
        ]
    );
    let env = &e.configs[2].settings.env;
    assert_eq!(
        (env["A"].as_str(), env["RUBY_YJIT_ENABLE"].as_str()),
        ("1", "1")
    );
}

#[test]
fn unknown_keys_get_suggestions_and_positions() {
    let errs = errors("durration = \"1s\"\nseeed = 3\n[settings]\nconections = 4\n");
    assert_eq!(
        errs,
        [
            "/tmp/exp.toml:1:1: durration: unknown key `durration`\n    help: did you mean `duration`? It is a setting of each configuration: put it in [settings]",
            "/tmp/exp.toml:2:1: seeed: unknown key `seeed`\n    help: did you mean `seed`?",
            "/tmp/exp.toml:4:1: settings.conections: unknown key `conections`\n    help: did you mean `connections`?",
        ]
    );
}

#[test]
fn trial_conditions_are_read_and_their_mistakes_named() {
    let e =
        parse("quiet = true\nrepeat_noisy = 2\ncpus = { server = \"0\", load = \"0\" }\n").err();
    let errs: Vec<String> = e.unwrap().0.iter().map(|e| e.to_string()).collect();
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].starts_with(
            "/tmp/exp.toml:3:8: cpus: the server's CPUs (0) and the load generator's (0) overlap"
        ),
        "{}",
        errs[0]
    );
    let e = parse("quiet = { other = \"5%\", max_wait = \"20s\" }\nrepeat_noisy = 2\n").unwrap();
    let q = e.conditions.quiet.unwrap();
    assert_eq!(
        (q.other_percent, q.steal_percent, q.max_wait),
        (5.0, 1.0, Duration::from_secs(20))
    );
    assert_eq!((e.conditions.repeat_noisy, e.conditions.cpus), (2, None));
    assert!(parse("quiet = false\n").unwrap().conditions.quiet.is_none());
    let errs = errors(
        "quiet = { othr = \"5%\", window = \"10ms\" }\nrepeat_noisy = 11\ncpus = \"half\"\n",
    );
    assert_eq!(errs.len(), 4, "{errs:#?}");
    assert!(
        errs[0].contains("1:11: quiet.othr: unknown key `othr`\n    help: did you mean `other`?"),
        "{}",
        errs[0]
    );
    assert!(
        errs[1].contains("quiet.window: expected at least 100ms"),
        "{}",
        errs[1]
    );
    assert!(
        errs[2].contains("2:16: repeat_noisy: expected an integer from 0 to 10, found 11"),
        "{}",
        errs[2]
    );
    assert!(
        errs[3].contains("3:8: cpus: expected \"split\", \"none\" or a table"),
        "{}",
        errs[3]
    );
}

#[test]
fn wrong_types_and_values_say_what_was_expected() {
    let errs = errors("[settings]\nthreads = \"4\"\nwarmup = \"5 parsecs\"\nenv = { X = 1 }\nserver = \"pumma\"\n");
    assert_eq!(errs.len(), 4, "{errs:#?}");
    assert!(errs[0]
        .contains("settings.threads: expected an integer from 1 to 1024, found the string \"4\""));
    assert!(errs[1].contains("settings.warmup: expected a duration string"));
    assert!(errs[2].contains("settings.env.X: expected a string, found the integer 1"));
    assert!(
        errs[3].ends_with("help: did you mean \"puma\"?"),
        "{}",
        errs[3]
    );
}

#[test]
fn references_to_missing_things_are_errors() {
    let errs = errors("[settings]\nruby = \"rr\"\n");
    assert_eq!(errs, ["/tmp/exp.toml:2:8: settings.ruby: no Ruby named \"rr\" in [rubies]\n    help: did you mean `r`?"]);
    let errs = errors("[settings]\napp = \"rails-helo\"\n");
    assert!(
        errs[0].contains("no config.ru in /tmp/rails-helo"),
        "{errs:?}"
    );
    assert!(
        errs[0].ends_with("did you mean the bundled app `rails-hello`?"),
        "{errs:?}"
    );
    let errs = Experiment::parse(
        Path::new("/tmp/e.toml"),
        "[rubies]\nx = \"/no/such/ruby\"\n",
    )
    .unwrap_err();
    assert!(
        errs.0[0]
            .to_string()
            .starts_with("/tmp/e.toml:2:5: rubies.x: "),
        "{errs}"
    );
}

#[test]
fn combinations_a_server_cannot_run_are_rejected() {
    let errs = errors("[settings]\nserver = \"unicorn\"\nthreads = 4\n");
    assert!(
        errs[0].contains("unicorn does not take a thread count; threads must be 1"),
        "{errs:?}"
    );
    let errs = errors("[settings]\nserver = \"custom\"\n");
    assert!(
        errs[0].contains("server = \"custom\" needs `server_argv`"),
        "{errs:?}"
    );
    let errs = errors("[settings]\nmode = \"client-close\"\npipeline = 4\n");
    assert!(
        errs[0].contains("pipeline needs keepalive connections"),
        "{errs:?}"
    );
}

#[test]
fn preload_needs_a_server_that_forks_workers() {
    let errs = errors("[settings]\npreload = true\n");
    assert!(
        errs[0].contains("preload = true needs workers to fork, but processes = 1")
            && errs[0].contains("exp.toml:2"),
        "{errs:?}"
    );
    let errs = errors("[settings]\nserver = \"thin\"\npreload = true\n");
    assert!(
        errs[0].contains("server = \"thin\" does not do"),
        "{errs:?}"
    );
    let e = parse("[settings]\nprocesses = 2\n[matrix]\npreload = [false, true]\n").unwrap();
    assert_eq!(labels(&e), ["preload=false", "preload=true"]);
    assert!(!e.configs[0].settings.preload && e.configs[1].settings.preload);
}

#[test]
fn exclusions_and_labels_must_make_sense() {
    let errs = errors("[matrix]\nthreads = [1, 2]\n[[exclude]]\nthreads = 3\n");
    assert!(
        errs[0].contains("exclude[0]: this exclusion matches no configuration"),
        "{errs:?}"
    );
    let errs = errors(
        "[matrix]\nthreads = [{ label = \"x\", value = 1 }, { label = \"x\", value = 2 }]\n",
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("two values of this axis have the label \"x\"")),
        "{errs:?}"
    );
    let errs = errors("[matrix]\nthreads = [1, 2]\n[[configs]]\nthreads = 1\n[[configs]]\nmode = \"close-header\"\n");
    assert!(
        errs[0].contains("configs[0].threads: `threads` is also a [matrix] axis"),
        "{errs:?}"
    );
    let errs = errors("[matrix]\nthreads = 2\n");
    assert!(
        errs[0].contains("expected an array of alternatives, found the integer 2"),
        "{errs:?}"
    );
}

#[test]
fn toml_syntax_errors_have_a_position() {
    let errs = errors("[settings]\nthreads = = 2\n");
    assert!(errs[0].starts_with("/tmp/exp.toml:2:"), "{errs:?}");
    assert!(errs[0].contains("invalid TOML"), "{errs:?}");
}

#[test]
fn settings_that_do_not_apply_are_refused() {
    let errs = errors("[settings]\nrequests = 100\nduration = \"5s\"\nruns = 3\n");
    assert!(
        errs[0].contains("settings.requests: give either `duration` or `requests`, not both"),
        "{errs:?}"
    );
    assert!(
        errs[1].contains("settings.runs: `runs` does not apply to workload = \"http\""),
        "{errs:?}"
    );
    let errs = errors(
        "[settings]\nserver = \"custom\"\nserver_argv = [\"{ruby}\", \"x.rb\", \"{prot}\"]\n",
    );
    assert!(errs[0].contains("settings.server_argv: "), "{errs:?}");
    let env_table = parse("[settings.env]\nA = \"1\"\n").unwrap();
    assert_eq!(env_table.configs[0].settings.env["A"], "1");
}

#[test]
fn script_timeout_is_a_script_setting() {
    std::fs::write("/tmp/rubyrace-exp-test-s.rb", "").unwrap();
    let e = parse("[settings]\nworkload = \"script\"\nscript = \"rubyrace-exp-test-s.rb\"\nscript_timeout = \"30s\"\n").unwrap();
    assert_eq!(
        e.configs[0].settings.script.as_ref().unwrap().timeout,
        Duration::from_secs(30)
    );
    let errs = errors("[settings]\nscript_timeout = \"30s\"\n");
    assert!(
        errs[0].contains("`script_timeout` does not apply to workload = \"http\""),
        "{errs:?}"
    );
}

#[test]
fn a_script_workload_needs_its_script() {
    let errs = errors("[settings]\nworkload = \"script\"\n");
    assert!(
        errs[0].contains("workload = \"script\" needs `script`"),
        "{errs:?}"
    );
    let errs = errors("[settings]\nscript = \"x.rb\"\n");
    assert!(
        errs[0].contains("`script` is only used with workload = \"script\""),
        "{errs:?}"
    );
}

#[test]
fn smoke_shortens_but_never_lengthens() {
    let e = parse("batches = 20\n[settings]\nwarmup = \"500ms\"\nduration = \"1m\"\n")
        .unwrap()
        .smoke();
    assert_eq!(e.batches, 2);
    let load = &e.configs[0].settings.load;
    assert_eq!(
        (load.warmup, load.duration),
        (Duration::from_millis(500), Duration::from_secs(2))
    );
    // A smoke run of a file that waits for quiet and repeats noisy trials looks once and
    // does not wait, repeats none, and says so.
    let e = parse(
        "quiet = true
repeat_noisy = 2
",
    )
    .unwrap()
    .smoke();
    assert_eq!(
        e.conditions.quiet.as_ref().map(|q| q.max_wait),
        Some(Duration::ZERO)
    );
    assert_eq!(e.conditions.repeat_noisy, 0);
    assert!(
        e.smoke_note().ends_with(
            "one look for quiet and no wait, and no noisy trial repeated; no adaptive blocks"
        ),
        "{}",
        e.smoke_note()
    );
}

/// A Ruby as `rubyrace rubies` would report it; `error` makes it one that does not run.
fn found(name: &str, path: &str, error: bool) -> DiscoveredRuby {
    DiscoveredRuby {
        name: name.into(),
        path: path.into(),
        source: "PATH".into(),
        description: (!error).then(|| format!("{name} (fake)")),
        version: Some("3.3.0".into()),
        error: error.then(|| "exit status 1".into()),
    }
}

fn no_discovery() -> Vec<DiscoveredRuby> {
    panic!("discovery must not run when the file has [rubies]")
}

#[test]
fn ruby_all_in_the_matrix_is_every_ruby_of_the_rubies_table_in_file_order() {
    let text =
        "[rubies]\nzz = \"/bin/sh\"\naa = { argv = [\"/bin/sh\", \"-e\"], env = { X = \"1\" } }\n\
                [matrix]\nruby = \"all\"\nthreads = [1, 2]\n";
    let e = Experiment::parse_with(Path::new("/tmp/e.toml"), text, &no_discovery, &cached_ruby)
        .unwrap();
    assert_eq!(
        labels(&e),
        [
            "ruby=zz threads=1",
            "ruby=zz threads=2",
            "ruby=aa threads=1",
            "ruby=aa threads=2"
        ]
    );
    let aa = &e.configs[2].settings;
    assert_eq!(
        (aa.ruby.as_str(), aa.ruby_argv.as_slice()),
        ("aa", &["/bin/sh".to_string(), "-e".to_string()][..])
    );
    assert_eq!(aa.env["X"], "1");
    assert_eq!(e.configs[0].axes["ruby"], "zz");
    // Exclusions match the names it expanded to.
    let text = format!("{text}[[exclude]]\nruby = \"aa\"\nthreads = 2\n");
    let e = Experiment::parse_with(Path::new("/tmp/e.toml"), &text, &no_discovery, &cached_ruby)
        .unwrap();
    assert_eq!(
        labels(&e),
        [
            "ruby=zz threads=1",
            "ruby=zz threads=2",
            "ruby=aa threads=1"
        ]
    );
    // One Ruby: still named in the label, since what "all" finds depends on the machine.
    let e = parse("[matrix]\nruby = \"all\"\nthreads = [1, 2]\n").unwrap();
    assert_eq!(labels(&e), ["ruby=r threads=1", "ruby=r threads=2"]);
}

#[test]
fn ruby_all_without_a_rubies_table_is_every_ruby_found_on_the_machine() {
    // A second name for /bin/sh's executable: the same Ruby found twice.
    let link = std::env::temp_dir().join(format!("rubyrace-exp-all-{}", std::process::id()));
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink("/bin/sh", &link).unwrap();
    let sh = std::fs::canonicalize("/bin/sh").unwrap();
    let other = std::fs::canonicalize("/bin/true").unwrap();
    let machine = || {
        vec![
            found("rbenv-3.4.1", sh.to_str().unwrap(), false),
            found("broken", "/bin/false", true),
            found("system", link.to_str().unwrap(), false),
            found("3.3.0", other.to_str().unwrap(), false),
        ]
    };
    let text = "[matrix]\nruby = \"all\"\n[settings]\nthreads = 2\n";
    let e = Experiment::parse_with(Path::new("/tmp/e.toml"), text, &machine, &cached_ruby).unwrap();
    assert_eq!(labels(&e), ["ruby=rbenv-3.4.1", "ruby=3.3.0"]);
    assert_eq!(
        e.configs[1].settings.ruby_argv,
        [other.display().to_string()]
    );
    assert_eq!(
        e.rubies.keys().collect::<Vec<_>>(),
        ["3.3.0", "rbenv-3.4.1"]
    );
    std::fs::remove_file(&link).unwrap();

    let nothing = Experiment::parse_with(
        Path::new("/tmp/e.toml"),
        text,
        &|| vec![found("broken", "/bin/false", true)],
        &cached_ruby,
    )
    .unwrap_err()
    .to_string();
    assert!(
        nothing.starts_with("/tmp/e.toml:2:8: matrix.ruby: ruby = \"all\": no Ruby that runs was found on this machine"),
        "{nothing}"
    );
}

#[test]
fn ruby_all_is_only_a_matrix_value_and_near_misses_keep_their_error() {
    let errs = errors("[matrix]\nruby = \"al\"\n");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("/tmp/exp.toml:2:8: matrix.ruby: expected an array of alternatives, found the string \"al\""),
        "{errs:?}"
    );
    assert!(
        errs[0].contains("help: did you mean ruby = \"all\""),
        "{errs:?}"
    );
    let errs = errors("[matrix]\nthreads = \"all\"\n");
    assert!(
        errs[0].contains(
            "matrix.threads: expected an array of alternatives, found the string \"all\""
        ),
        "{errs:?}"
    );
    let errs = errors("[settings]\nruby = \"all\"\n");
    assert_eq!(
        errs,
        ["/tmp/exp.toml:2:8: settings.ruby: no Ruby named \"all\" in [rubies]\n    help: ruby = \"all\" (every Ruby) is a [matrix] axis: move it into [matrix]"]
    );
    // In an array, "all" is a Ruby's name like any other.
    let errs = errors("[matrix]\nruby = [\"all\"]\n");
    assert!(
        errs[0].contains("no Ruby named \"all\" in [rubies]"),
        "{errs:?}"
    );
}

#[test]
fn a_settings_key_that_is_also_a_matrix_axis_is_an_error_at_both_places() {
    let errs = errors("[settings]\nthreads = 4\n[matrix]\nthreads = [1, 2]\n");
    assert_eq!(
        errs,
        ["/tmp/exp.toml:2:11: settings.threads: `threads` is also a [matrix] axis, at /tmp/exp.toml:4:1, whose values would replace this one\n    help: set it in one place: in [settings] or in [matrix]"]
    );
    // The same clash with a [[configs]] entry names the axis's place too.
    let errs = errors("[matrix]\nthreads = [1, 2]\n[[configs]]\nthreads = 1\n");
    assert_eq!(
        errs,
        ["/tmp/exp.toml:4:11: configs[0].threads: `threads` is also a [matrix] axis, at /tmp/exp.toml:2:1, whose values would replace this one\n    help: set it in one place: in the [[configs]] entries or in [matrix]"]
    );
    // `env` is merged, not replaced.
    let e =
        parse("[settings]\nenv = { A = \"1\" }\n[matrix]\nenv = [{ B = \"1\" }, { B = \"2\" }]\n")
            .unwrap();
    assert_eq!(e.configs[1].settings.env["A"], "1");
}

#[test]
fn every_problem_of_a_configuration_is_reported_at_once() {
    let errs = errors("[settings]\npath = \"nope\"\nmethod = \"get\"\nheaders = [\"A: b\", \"NoColon\"]\ntimeout = \"0s\"\n");
    assert_eq!(
        errs,
        [
            "/tmp/exp.toml:2:8: settings.path: path \"nope\" must start with '/'\n    help: did you mean \"/nope\"?",
            "/tmp/exp.toml:3:10: settings.method: method \"get\" is not an upper-case HTTP method\n    help: did you mean \"GET\"?",
            "/tmp/exp.toml:4:20: settings.headers[1]: header \"NoColon\": expected \"Name: value\"",
            "/tmp/exp.toml:5:11: settings.timeout: timeout must be longer than zero\n    help: a request needs time to answer, e.g. timeout = \"10s\"",
        ]
    );
    // An unknown Ruby does not hide the other problems of its configuration.
    let errs = errors("[settings]\nruby = \"rr\"\napp = \"no-such-app\"\n");
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(
        errs[0].contains("settings.ruby: no Ruby named \"rr\""),
        "{errs:#?}"
    );
    assert!(
        errs[1].contains("settings.app: no config.ru in"),
        "{errs:#?}"
    );
    // Nor does another problem hide a custom server argv's.
    let errs = errors(
        "[settings]\nserver = \"custom\"\nserver_argv = [\"{ruby}\", \"{prot}\"]\npath = \"x\"\n",
    );
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(errs[0].contains("settings.server_argv: "), "{errs:#?}");
    assert!(errs[1].contains("settings.path: "), "{errs:#?}");
}

#[test]
fn an_earlier_error_causes_no_follow_on_errors() {
    // A Ruby that does not resolve is reported once, not again where it is used.
    let text = "[rubies]\n\"3.9\" = \"/no/such/ruby3.9\"\n[settings]\nruby = \"3.9\"\n";
    let errs = Experiment::parse(Path::new("/tmp/e.toml"), text).unwrap_err();
    assert_eq!(errs.0.len(), 1, "{errs}");
    assert!(
        errs.0[0]
            .to_string()
            .starts_with("/tmp/e.toml:2:9: rubies.3.9: "),
        "{errs}"
    );
    let text = "[rubies]\n\"3.9\" = \"/no/such/ruby3.9\"\nok = \"/bin/sh\"\n[matrix]\nruby = [\"3.9\", \"ok\"]\n";
    let errs = Experiment::parse(Path::new("/tmp/e.toml"), text).unwrap_err();
    assert_eq!(errs.0.len(), 1, "{errs}");
    // A mistyped workload does not make its script settings errors of their own.
    let errs = errors("[settings]\nworkload = \"scrip\"\nscript = \"x.rb\"\nruns = 3\n");
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].contains("settings.workload: expected one of"),
        "{errs:#?}"
    );
    // Two values of an axis with one label: said once, at the axis, not also at 1:1.
    let errs =
        errors("[matrix]\nenv = [{ A = \"1\" }, { label = \"A=1\", value = { B = \"2\" } }]\n");
    assert_eq!(
        errs,
        ["/tmp/exp.toml:2:21: matrix.env: two values of this axis have the label \"A=1\"\n    help: give each value its own label: { label = \"...\", value = ... }"]
    );
    // A rejected value does not make an exclusion that uses it match nothing, and a
    // rejected value in an exclusion hides no error of the configurations.
    let errs = errors("[settings]\nthreads = \"4\"\n[[exclude]]\nthreads = 4\n");
    assert_eq!(errs.len(), 1, "{errs:#?}");
    let errs =
        errors("[settings]\nserver = \"unicorn\"\nthreads = 4\n[[exclude]]\nthreads = \"x\"\n");
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(
        errs[0].contains("unicorn does not take a thread count"),
        "{errs:#?}"
    );
    // A Ruby table with a wrong `path` is not also said to lack one.
    let errs =
        Experiment::parse(Path::new("/tmp/e.toml"), "[rubies]\nx = { path = 3 }\n").unwrap_err();
    assert_eq!(errs.0.len(), 1, "{errs}");
}

#[test]
fn unreadable_files_say_why_with_a_real_position_or_none() {
    let dir = std::env::temp_dir().join(format!("rubyrace-exp-read-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("nope.toml");
    let err = Experiment::load(&missing).unwrap_err().to_string();
    assert_eq!(
        err,
        format!(
            "cannot read {}: No such file or directory\n1 error in the experiment file; nothing was run",
            missing.display()
        )
    );
    let latin1 = dir.join("latin1.toml");
    std::fs::write(&latin1, b"name = \"x\"\ndescription = \"caf\xe9\"\n").unwrap();
    let err = Experiment::load(&latin1).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "{}:2:19: the file is not valid UTF-8: invalid byte 0xE9 at byte offset 29\n    help: save it as UTF-8",
            latin1.display()
        )),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn duplicate_labels_point_at_the_second_label_and_mention_the_first() {
    let errs = errors("[[configs]]\nlabel = \"a\"\n[[configs]]\nlabel = \"a\"\n");
    assert_eq!(
        errs,
        ["/tmp/exp.toml:4:9: configs[1].label: configurations 0 and 1 have the same label \"a\"; the first is from /tmp/exp.toml:2:9\n    help: give them distinct labels: `label` in [[configs]], or { label = \"...\", value = ... } in [matrix]"]
    );
    // Across two axes: at the value of the second configuration where they part.
    let errs = errors("[matrix]\nruby_opts = [{ label = \"a\", value = [] }, { label = \"a b\", value = [\"-W0\"] }]\nthreads = [{ label = \"b c\", value = 1 }, { label = \"c\", value = 2 }]\n");
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].starts_with("/tmp/exp.toml:2:43: matrix.ruby_opts[1]: configurations 0 and 3 have the same label \"a b c\"; the first is from /tmp/exp.toml:2:14"),
        "{errs:#?}"
    );
}

fn interleaved(slice_ms: u64, rounds: u32) -> crate::design::Design {
    crate::design::Design::Interleaved {
        slice: Duration::from_millis(slice_ms),
        rounds,
    }
}

#[test]
fn an_interleaved_design_takes_its_rounds_from_the_duration_unless_written() {
    // The default duration, 10 s, in the default 50 ms slices (held-open connections).
    let e = parse("design = \"interleaved\"\n[matrix]\nthreads = [1, 2]\n").unwrap();
    assert_eq!(e.design, interleaved(50, 200));
    assert!(
        e.defaults.contains(&"duration = \"10s\"".to_string()),
        "the duration's default measures it: {:?}",
        e.defaults
    );
    assert!(
        !e.defaults.iter().any(|d| d.starts_with("design")),
        "design is written: {:?}",
        e.defaults
    );
    // A slice alone: as many rounds as fill the duration (rounded up).
    let e = parse("design = \"interleaved\"\nslice = \"300ms\"\n[settings]\nduration = \"1s\"\n[matrix]\nthreads = [1, 2]\n").unwrap();
    assert_eq!(e.design, interleaved(300, 4));
    // Neither: equal slices of at most 50 ms that add up to the duration exactly (1008 ms
    // is 20.16 slices of 50 ms: 21 of 48 ms).
    let e = parse(
        "design = \"interleaved\"\n[settings]\nduration = \"1008ms\"\n[matrix]\nthreads = [1, 2]\n",
    )
    .unwrap();
    assert_eq!(e.design, interleaved(48, 21));
    // Rounds written: the duration does not apply, and its default is not named.
    let e = parse("design = \"interleaved\"\nrounds = 6\n[matrix]\nthreads = [1, 2]\n").unwrap();
    assert_eq!(e.design, interleaved(50, 6));
    assert!(
        !e.defaults.iter().any(|d| d.starts_with("duration")),
        "{:?}",
        e.defaults
    );
    // A smoke run measures each configuration for at most a second a block: 20 slices of
    // 50 ms, or 2 of 500 ms.
    let smoke = parse("design = \"interleaved\"\nrounds = 100\n[matrix]\nthreads = [1, 2]\n")
        .unwrap()
        .smoke();
    assert_eq!(smoke.design, interleaved(50, 20));
    let smoke =
        parse("design = \"interleaved\"\nslice = \"2s\"\nrounds = 5\n[matrix]\nthreads = [1, 2]\n")
            .unwrap()
            .smoke();
    assert_eq!(smoke.design, interleaved(500, 2));
    // A separate load host runs a load per slice on new connections: its default slice is
    // 500 ms, not one it would refuse.
    let e = parse("design = \"interleaved\"\n[settings]\nduration = \"2s\"\n[fleet]\nload = \"separate\"\n[matrix]\nthreads = [1, 2]\n").unwrap();
    assert_eq!(e.design, interleaved(500, 4));
    let e = parse(
        "[settings]\nduration = \"2s\"\n[fleet]\nload = \"separate\"\n[matrix]\nthreads = [1, 2]\n",
    )
    .unwrap();
    assert_eq!(e.design, interleaved(500, 4), "the default design too");
    assert_eq!(e.default_design(&e.configs), interleaved(500, 4));
}

#[test]
fn two_to_eight_http_configurations_are_interleaved_unless_the_file_says_otherwise() {
    let e = parse("[settings]\nduration = \"3s\"\n[matrix]\nthreads = [1, 2]\n").unwrap();
    assert_eq!(e.design, interleaved(50, 60));
    assert_eq!(e.default_design(&e.configs), interleaved(50, 60));
    assert!(
        e.defaults
            .contains(&"design = \"interleaved\" (60 rounds of 50ms slices)".to_string()),
        "the default design is named with the other defaults: {:?}",
        e.defaults
    );
    // slice and rounds apply to the default design.
    let e = parse("slice = \"250ms\"\nrounds = 4\n[matrix]\nthreads = [1, 2]\n").unwrap();
    assert_eq!(e.design, interleaved(250, 4));
    // Eight are interleaved, nine are not.
    let eight = parse("[matrix]\nthreads = [1, 2, 3, 4, 5, 6, 7, 8]\n").unwrap();
    assert_eq!(eight.design, interleaved(50, 200));
    let nine = parse("[matrix]\nthreads = [1, 2, 3, 4, 5, 6, 7, 8, 9]\n").unwrap();
    assert_eq!(nine.design, crate::design::Design::Blocks);
    assert!(
        nine.defaults.iter().any(|d| d.starts_with(
            "design = \"blocks\" (9 configurations: an interleaved block keeps every server in memory at once"
        )),
        "{:?}",
        nine.defaults
    );
    // Blocks, and why, for what cannot be interleaved.
    std::fs::write("/tmp/rubyrace-exp-test-d.rb", "").unwrap();
    for (file, why) in [
        ("[settings]\nduration = \"3s\"\n", None),
        ("design = \"blocks\"\n[matrix]\nthreads = [1, 2]\n", None),
        ("[settings]\nworkload = \"script\"\nscript = \"rubyrace-exp-test-d.rb\"\n[matrix]\nruns = [1, 2]\n", Some("script workloads")),
        ("[settings]\nport = 9000\n[matrix]\nthreads = [1, 2]\n", Some("port = 9000 is fixed")),
        ("[settings]\nrequests = 100\n[matrix]\nthreads = [1, 2]\n", Some("requests is set")),
        ("[settings]\nprofile = \"rbspy\"\n[matrix]\nthreads = [1, 2]\n", Some("profile is set")),
        ("[settings]\nsetup = [[\"true\"]]\n[matrix]\nthreads = [1, 2]\n", Some("setup is set")),
        ("repeat_noisy = 1\n[matrix]\nthreads = [1, 2]\n", Some("repeat_noisy is set")),
        ("[[configs]]\nlabel = \"a\"\nduration = \"2s\"\n[[configs]]\nlabel = \"b\"\nduration = \"3s\"\n", Some("the configurations' durations differ")),
        ("[settings]\nduration = \"10ms\"\n[matrix]\nthreads = [1, 2]\n", Some("duration is shorter than the shortest slice, 20ms")),
    ] {
        let e = parse(file).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert_eq!(e.design, crate::design::Design::Blocks, "{file}");
        let note: Vec<&String> = e.defaults.iter().filter(|d| d.starts_with("design")).collect();
        match why {
            Some(why) => assert_eq!(note, [&format!("design = \"blocks\" ({why})")], "{file}"),
            None => assert!(note.is_empty(), "{file}: {note:?}"),
        }
    }
}

#[test]
fn an_interleaved_design_refuses_what_cannot_be_interleaved() {
    let errs = errors("design = \"interleaved\"\nrepeat_noisy = 1\nrounds = 4\n[settings]\nport = 9000\nduration = \"5s\"\n");
    let all = errs.join("\n");
    for want in [
        "/tmp/exp.toml:1:10: design: an interleaved design measures configurations against each other in the same seconds, and this file has 1",
        "design: port = 9000 is fixed",
        "design: duration and rounds are both set: an interleaved design measures each configuration for rounds × slice, so give either",
        "design: repeat_noisy applies to the blocks design",
    ] {
        assert!(all.contains(want), "{want:?} not in\n{all}");
    }
    let errs = errors("design = \"interleaved\"\n[[configs]]\nlabel = \"a\"\nduration = \"2s\"\n[[configs]]\nlabel = \"b\"\nduration = \"3s\"\n");
    assert!(
        errs[0].contains("design: the configurations' durations differ (2s, 3s), and an interleaved design measures every configuration of a block for the same rounds × slice"),
        "{errs:#?}"
    );
    let errs = errors(
        "design = \"interleaved\"\n[settings]\nduration = \"10ms\"\n[matrix]\nthreads = [1, 2]\n",
    );
    assert!(
        errs[0].contains("design: duration = \"10ms\" is shorter than the shortest slice, 20ms"),
        "{errs:#?}"
    );
    // slice and rounds where the design is blocks: written, or by default.
    let errs =
        errors("design = \"blocks\"\nslice = \"1s\"\nrounds = 3\n[matrix]\nthreads = [1, 2]\n");
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(
        errs[0].starts_with("/tmp/exp.toml:2:9: slice: slice applies to design = \"interleaved\" or \"co-scheduled\", and this file sets design = \"blocks\""),
        "{errs:#?}"
    );
    assert!(
        errs[1].starts_with("/tmp/exp.toml:3:10: rounds: rounds applies to design"),
        "{errs:#?}"
    );
    let errs = errors("slice = \"1s\"\n[settings]\nrequests = 10\n[matrix]\nthreads = [1, 2]\n");
    assert!(
        errs[0].starts_with("/tmp/exp.toml:1:9: slice: slice applies to design = \"interleaved\" or \"co-scheduled\", and this file's design is blocks by default (requests is set)"),
        "{errs:#?}"
    );
    let errs = errors("design = \"interleaved\"\nslice = \"10ms\"\n[matrix]\nthreads = [1, 2]\n");
    assert!(
        errs[0].contains("slice: a slice of 10ms is shorter than 20ms"),
        "{errs:#?}"
    );
    let errs = errors("design = \"alternating\"\n[matrix]\nthreads = [1, 2]\n");
    assert!(
        errs[0].contains(
            "design: expected one of \"blocks\", \"interleaved\" or \"co-scheduled\", found \"alternating\""
        ),
        "{errs:#?}"
    );
}

#[test]
fn a_co_scheduled_design_reads_like_an_interleaved_one_and_names_itself_in_errors() {
    let e = parse(
        "design = \"co-scheduled\"\nslice = \"2s\"\nrounds = 3\n[matrix]\nthreads = [1, 2]\n",
    )
    .unwrap();
    assert_eq!(
        e.design,
        crate::design::Design::CoScheduled {
            slice: Duration::from_secs(2),
            rounds: 3
        }
    );
    let smoke = e.smoke();
    assert_eq!(
        smoke.design,
        crate::design::Design::CoScheduled {
            slice: Duration::from_millis(500),
            rounds: 2
        }
    );
    // Co-scheduled windows keep the 500 ms they were measured with when no slice is written.
    let e = parse(
        "design = \"co-scheduled\"\n[settings]\nduration = \"2s\"\n[matrix]\nthreads = [1, 2]\n",
    )
    .unwrap();
    assert_eq!(
        e.design,
        crate::design::Design::CoScheduled {
            slice: Duration::from_millis(500),
            rounds: 4
        }
    );
    let errs = errors("design = \"co-scheduled\"\n[settings]\nport = 9000\nrequests = 100\n");
    let all = errs.join("\n");
    for want in [
        "/tmp/exp.toml:1:10: design: a co-scheduled design measures configurations against each other in the same seconds, and this file has 1",
        "design: port = 9000 is fixed, and the servers of a co-scheduled block run at the same time",
        "design: requests does not apply to a co-scheduled design",
    ] {
        assert!(all.contains(want), "{want:?} not in\n{all}");
    }
}

#[test]
fn negative_durations_say_they_cannot_be_negative() {
    let errs = errors("[settings]\nduration = \"-5s\"\n");
    assert_eq!(
        errs,
        ["/tmp/exp.toml:2:12: settings.duration: expected a duration string such as \"500ms\", \"10s\" or \"2m\", found \"-5s\": a duration cannot be negative\n    help: write a positive duration, e.g. \"5s\""]
    );
}

#[test]
fn labels_with_control_characters_are_rejected() {
    let errs = errors("[[configs]]\nlabel = \"a\\nb\"\n[[configs]]\nlabel = \"c\"\n");
    assert_eq!(
        errs,
        ["/tmp/exp.toml:2:9: configs[0].label: a label cannot contain control characters, found \"a\\nb\"\n    help: labels name configurations in progress lines, tables and Markdown: use printable characters"]
    );
    // Labels made from values: a chosen label, a string value, an env value.
    let errs = errors("[matrix]\nthreads = [{ label = \"one\\u0007\", value = 1 }, 2]\nenv = [{ A = \"1\\t2\" }, {}]\n");
    assert_eq!(errs.len(), 2, "{errs:#?}");
    assert!(errs[0].starts_with("/tmp/exp.toml:2:12: matrix.threads[0]: a label cannot contain control characters, found \"one\\u{7}\""), "{errs:#?}");
    assert!(errs[1].starts_with("/tmp/exp.toml:3:8: matrix.env[0]: a label cannot contain control characters, found \"A=1\\t2\""), "{errs:#?}");
    // Labels made from the keys of [[configs]] entries.
    let errs = errors("[[configs]]\nenv = { A = \"x\\ry\" }\n[[configs]]\nthreads = 2\n");
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].starts_with(
            "/tmp/exp.toml:2:7: configs[0].env: a label cannot contain control characters"
        ),
        "{errs:#?}"
    );
}

#[test]
fn the_name_must_make_a_results_directory() {
    for (name, why) in [
        ("", "expected a non-empty name, found \"\""),
        ("  ", "expected a non-empty name, found \"  \""),
        ("a/b", "a name cannot contain '/', found \"a/b\""),
        ("a\\\\b", "a name cannot contain '\\\\', found \"a\\\\b\""),
        (
            "a\\nb",
            "a name cannot contain control characters, found \"a\\nb\"",
        ),
    ] {
        let errs = errors(&format!("name = \"{name}\"\n"));
        assert_eq!(errs.len(), 1, "{errs:#?}");
        assert!(
            errs[0].starts_with(&format!("/tmp/exp.toml:1:8: name: {why}")),
            "{errs:#?}"
        );
        assert!(
            errs[0].contains("results/NAME-YYYYMMDD-HHMMSS"),
            "{errs:#?}"
        );
    }
}

#[test]
fn several_rubies_need_a_choice() {
    let errs = Experiment::parse(
        Path::new("/tmp/e.toml"),
        "[rubies]\na = \"/bin/sh\"\nb = \"/bin/sh\"\n",
    )
    .unwrap_err();
    assert!(
        errs.to_string()
            .contains("several Rubies are defined (a, b)"),
        "{errs}"
    );
    let ok = Experiment::parse(
        Path::new("/tmp/e.toml"),
        "[rubies]\na = \"/bin/sh\"\nb = \"/bin/sh\"\n[matrix]\nruby = [\"a\", \"b\"]\n",
    )
    .unwrap();
    assert_eq!(labels(&ok), ["ruby=a", "ruby=b"]);
}

#[test]
fn profile_takes_one_profiler_or_several_and_its_mistakes_are_named() {
    let e = parse("[settings]\nprofile = \"rbspy\"\n").unwrap();
    assert_eq!(e.configs[0].settings.profile, [crate::Profiler::Rbspy]);
    assert!(!e.configs[0].settings.profile_measured);
    let e =
        parse("[settings]\nprofile = [\"perf\", \"rbspy\"]\nprofile_measured = true\n").unwrap();
    assert_eq!(
        e.configs[0].settings.profile,
        [crate::Profiler::Perf, crate::Profiler::Rbspy]
    );
    assert!(e.configs[0].settings.profile_measured);
    assert!(parse("[settings]\n").unwrap().configs[0]
        .settings
        .profile
        .is_empty());

    let errs = errors("[settings]\nprofile = \"rbspi\"\n");
    assert!(
        errs[0].starts_with("/tmp/exp.toml:2:11: settings.profile: expected one of \"rbspy\" or \"perf\", or an array of them, found \"rbspi\""),
        "{errs:#?}"
    );
    assert!(errs[0].contains("did you mean \"rbspy\"?"), "{errs:#?}");
    let errs = errors("[settings]\nprofile = [\"perf\", \"perf\"]\n");
    assert!(errs[0].contains("found \"perf\" twice"), "{errs:#?}");
    let errs = errors("[settings]\nprofile_measured = \"yes\"\n");
    assert!(errs[0].contains("expected true or false"), "{errs:#?}");
    let errs = errors("[settings]\nprofile_measured = true\n");
    assert!(
        errs[0].contains("profile_measured = true, but no profiler is chosen"),
        "{errs:#?}"
    );
    let errs = errors(
        "design = \"interleaved\"\n[settings]\nprofile = \"perf\"\n[matrix]\nthreads = [1, 2]\n",
    );
    assert!(
        errs.iter().any(
            |e| e.contains("sets profile: profiles are taken in a phase of a trial of its own")
        ),
        "{errs:#?}"
    );
    // Setup runs before a trial of its own; an interleaved block would skip it.
    let errs = errors(
        "design = \"interleaved\"\n[settings]\nsetup = [[\"true\"]]\n[matrix]\nthreads = [1, 2]\n",
    );
    assert!(
        errs.iter()
            .any(|e| e.contains("sets setup: setup commands run before a trial of their own")),
        "{errs:#?}"
    );
    std::fs::write("/tmp/rubyrace-exp-test-p.rb", "").unwrap();
    // A script is profiled in a run of its own; `profile_measured` does not apply to it.
    let errs = errors(
        "[settings]\nworkload = \"script\"\nscript = \"rubyrace-exp-test-p.rb\"\nprofile = \"rbspy\"\nprofile_measured = true\n",
    );
    assert_eq!(errs.len(), 1, "{errs:#?}");
    assert!(
        errs[0].contains("`profile_measured` does not apply to workload = \"script\""),
        "{errs:#?}"
    );
}

#[test]
fn profile_rate_and_profile_runs_are_read_checked_and_default_to_99_hz_and_one_run() {
    let e = parse("[settings]\nprofile = \"rbspy\"\n").unwrap();
    assert_eq!(e.configs[0].settings.profile_rate, 99);
    assert_eq!(e.configs[0].settings.profile_runs, 1);
    // Per configuration, as `profile`.
    let e = parse(
        "[settings]\nprofile = \"rbspy\"\nprofile_rate = 499\n[[configs]]\nlabel = \"a\"\n[[configs]]\nlabel = \"b\"\nprofile_rate = 1000\n",
    )
    .unwrap();
    let rates: Vec<u32> = e.configs.iter().map(|c| c.settings.profile_rate).collect();
    assert_eq!(rates, [499, 1000]);
    // Left out of the stored settings at their defaults, so older results read the same.
    let stored = serde_json::to_value(
        &parse("[settings]\nprofile = \"perf\"\n").unwrap().configs[0].settings,
    )
    .unwrap();
    assert!(stored.get("profile_rate").is_none(), "{stored}");
    assert!(stored.get("profile_runs").is_none(), "{stored}");
    let stored = serde_json::to_value(&e.configs[1].settings).unwrap();
    assert_eq!(stored["profile_rate"], 1000);
    let back: crate::ConfigSettings = serde_json::from_value(stored).unwrap();
    assert_eq!(back.profile_rate, 1000);
    assert_eq!(back.profile_runs, 1);

    let errs = errors("[settings]\nprofile = \"perf\"\nprofile_rate = 20000\n");
    assert!(
        errs[0].starts_with("/tmp/exp.toml:3:16: settings.profile_rate: expected an integer from 1 to 10000, found 20000"),
        "{errs:#?}"
    );
    assert!(
        errs[0].contains("kernel.perf_event_max_sample_rate"),
        "{errs:#?}"
    );
    assert!(errs[0].contains("profile longer"), "{errs:#?}");
    let errs = errors("[settings]\nprofile = \"perf\"\nprofile_rate = 99.5\n");
    assert!(
        errs[0].contains(
            "settings.profile_rate: expected an integer from 1 to 10000, found the number 99.5"
        ),
        "{errs:#?}"
    );
    let errs = errors("[settings]\nprofile = \"perf\"\nprofile_rate = 0\n");
    assert!(errs[0].contains("found 0"), "{errs:#?}");
    let errs = errors("[settings]\nprofile_rate = 199\n");
    assert!(
        errs[0].starts_with("/tmp/exp.toml:2:16: settings.profile_rate: profile_rate is set, but no profiler is chosen"),
        "{errs:#?}"
    );

    // A script's profiled runs; HTTP has its profiled phase of `duration` instead.
    std::fs::write("/tmp/rubyrace-exp-test-runs.rb", "").unwrap();
    let e = parse(
        "[settings]\nworkload = \"script\"\nscript = \"rubyrace-exp-test-runs.rb\"\nruns = 2\nprofile = \"rbspy\"\nprofile_runs = 5\n",
    )
    .unwrap();
    assert_eq!(e.configs[0].settings.profile_runs, 5);
    // 2 s per run, the profiled runs too.
    assert_eq!(
        e.configs[0].settings.estimated_trial_time(&e.design, 1),
        std::time::Duration::from_secs(14)
    );
    let errs = errors("[settings]\nprofile = \"rbspy\"\nprofile_runs = 3\n");
    assert!(
        errs[0].contains(
            "settings.profile_runs: `profile_runs` does not apply to workload = \"http\""
        ),
        "{errs:#?}"
    );
    let errs = errors(
        "[settings]\nworkload = \"script\"\nscript = \"rubyrace-exp-test-runs.rb\"\nprofile = \"rbspy\"\nprofile_runs = 0\n",
    );
    assert!(
        errs[0].contains("settings.profile_runs: expected an integer from 1 to 1000, found 0"),
        "{errs:#?}"
    );
}

#[test]
fn a_rate_above_the_kernels_limit_is_refused_only_with_perf() {
    use crate::resolve::perf_refuses;
    use crate::Profiler::{Perf, Rbspy};
    let (message, help) = perf_refuses(5000, &[Rbspy, Perf], Some(4000)).unwrap();
    assert_eq!(
        message,
        "profile_rate = 5000, but perf refuses a rate above this machine's kernel.perf_event_max_sample_rate, 4000 now"
    );
    assert!(
        help.contains("sysctl kernel.perf_event_max_sample_rate=5000"),
        "{help}"
    );
    assert_eq!(perf_refuses(4000, &[Perf], Some(4000)), None);
    assert_eq!(perf_refuses(5000, &[Rbspy], Some(4000)), None);
    assert_eq!(perf_refuses(5000, &[Perf], None), None);
}

#[test]
fn services_and_setup_are_read_with_their_defaults() {
    let e = parse(
        "[settings]\nsetup = [[\"{ruby}\", \"{app}/bin/rails\", \"db:prepare\"], [\"true\"]]\n\
         [services.postgres]\nreset = \"template\"\ndatabase = \"forum\"\n\
         settings = { fsync = \"off\", max_connections = 50 }\n[services.redis]\n",
    )
    .unwrap();
    let pg = e.services.postgres.as_ref().unwrap();
    assert_eq!(pg.database, "forum");
    assert_eq!(pg.reset, crate::services::Reset::Template);
    assert_eq!(pg.lifetime, crate::services::Lifetime::Run);
    assert_eq!(pg.listen, crate::services::Listen::Tcp);
    assert_eq!(pg.settings["max_connections"], "50");
    let redis = e.services.redis.as_ref().unwrap();
    assert_eq!(redis.reset, crate::services::Reset::None);
    let setup = &e.configs[0].settings.setup;
    // {ruby} is the Ruby's own argv (here /bin/sh), {app} the app directory.
    assert_eq!(setup[0][0], "/bin/sh");
    assert!(
        setup[0][1].ends_with("ruby/apps/rack-hello/bin/rails"),
        "{setup:?}"
    );
    assert_eq!(setup[1], vec!["true".to_string()]);
    // No services: none at all, and blocks are not forced.
    assert!(parse("[settings]\n").unwrap().services.is_empty());
}

#[test]
fn services_mistakes_are_reported_where_they_are() {
    let errs = errors("[services.postgress]\n");
    assert!(
        errs[0].starts_with("/tmp/exp.toml:1:11: services.postgress: unknown key `postgress`"),
        "{errs:#?}"
    );
    assert!(errs[0].contains("did you mean `postgres`?"), "{errs:#?}");
    let errs = errors("[services.postgres]\nreset = \"templat\"\n");
    assert!(
        errs[0].starts_with(
            "/tmp/exp.toml:2:9: services.postgres.reset: expected one of \"none\" or \"template\""
        ),
        "{errs:#?}"
    );
    assert!(errs[0].contains("did you mean \"template\"?"), "{errs:#?}");
    let errs = errors("[services.redis]\nreset = \"template\"\n");
    assert!(
        errs[0].contains("expected one of \"none\" or \"flush\""),
        "{errs:#?}"
    );
    let errs = errors("[services.postgres]\nlifetime = \"trial\"\nreset = \"template\"\n");
    assert!(
        errs[0].starts_with("/tmp/exp.toml:3:9: services.postgres.reset"),
        "{errs:#?}"
    );
    let errs = errors("[services.postgres]\ndatabase = \"My-DB\"\n");
    assert!(errs[0].contains("expected a database name"), "{errs:#?}");
    let errs = errors("[services.postgres]\nsettings = { fsync = [1] }\n");
    assert!(errs[0].starts_with("/tmp/exp.toml:2:22: services.postgres.settings.fsync: expected a string, number or boolean"), "{errs:#?}");
    let errs = errors("[services.redis]\nport = 6379\n");
    assert!(errs[0].contains("unknown key `port`"), "{errs:#?}");
    let errs = errors("services = 1\n");
    assert!(errs[0].contains("services: expected a table"), "{errs:#?}");
    let errs = errors("design = \"interleaved\"\n[matrix]\nthreads = [1, 2]\n[services.redis]\n");
    assert!(
        errs.iter()
            .any(|e| e.contains("[services] with an interleaved")),
        "{errs:#?}"
    );
    let errs = errors("[settings]\nsetup = [\"rails\", \"db:prepare\"]\n");
    assert!(
        errs[0].starts_with("/tmp/exp.toml:2:9: settings.setup: expected an array of commands"),
        "{errs:#?}"
    );
    let errs = errors("[settings]\nsetup = [[\"{rubby}\", \"x\"]]\n");
    assert!(errs[0].contains("unknown placeholder {rubby}"), "{errs:#?}");
    let errs = errors("[settings]\nsetup = [[\"x{ruby}\"]]\n");
    assert!(
        errs[0].contains("{ruby} must be an argument on its own"),
        "{errs:#?}"
    );
}

#[test]
fn blocks_is_the_key_and_batches_its_older_name() {
    assert_eq!(parse("blocks = 7\n").unwrap().batches, 7);
    assert_eq!(parse("batches = 8\n").unwrap().batches, 8);
    assert!(parse("")
        .unwrap()
        .defaults
        .contains(&"blocks = 5".to_string()));
    assert!(!parse("batches = 5\n")
        .unwrap()
        .defaults
        .iter()
        .any(|d| d.starts_with("blocks")));

    let both = errors("blocks = 7\nbatches = 8\n");
    assert_eq!(both.len(), 1, "{both:?}");
    assert!(
        both[0].starts_with(
            "/tmp/exp.toml:2:11: batches: `batches` and `blocks` name the same setting"
        ),
        "{both:?}"
    );

    let adaptive = "precision = \"1%\"\n";
    let two = "[matrix]\nthreads = [1, 2]\n";
    let e = parse(&format!("blocks = 6\n{adaptive}max_blocks = 9\n{two}")).unwrap();
    assert_eq!(
        e.precision.map(|p| (p.min_batches, p.max_batches)),
        Some((6, 9))
    );
    let e = parse(&format!("batches = 6\n{adaptive}max_batches = 9\n{two}")).unwrap();
    assert_eq!(
        e.precision.map(|p| (p.min_batches, p.max_batches)),
        Some((6, 9))
    );
    // The error answers in the names the file used.
    let low = errors(&format!("blocks = 9\n{adaptive}max_blocks = 7\n{two}"));
    assert!(
        low.iter()
            .any(|m| m.contains("max_blocks = 7 is below blocks = 9")),
        "{low:?}"
    );
    let low = errors(&format!("batches = 9\n{adaptive}max_batches = 7\n{two}"));
    assert!(
        low.iter()
            .any(|m| m.contains("max_batches = 7 is below batches = 9")),
        "{low:?}"
    );
    let both = errors(&format!("{adaptive}max_batches = 9\nmax_blocks = 9\n{two}"));
    assert!(both.iter().any(|m| m.contains("max_blocks: `max_blocks` and `max_batches` name the same setting")), "{both:?}");
}

/// `in_checkout` moves every path inside the repository (the app's directory, the Gemfile,
/// `BUNDLE_GEMFILE`, setup commands) to the same place in the checkout, leaves the others,
/// and changes nothing the second time, even when the checkout is inside the repository
/// (results under the repository's own `results/`).
#[test]
fn settings_move_into_the_checkout_and_only_once() {
    let e = parse("").unwrap();
    let mut s = e.configs[0].settings.clone();
    assert_eq!(
        s.in_checkout(Path::new("/elsewhere")),
        s,
        "no app_commit: unchanged"
    );
    s.app_commit = Some(AppCommit {
        repo: PathBuf::from("/work/app"),
        git_ref: "v1".into(),
        commit: "abc".into(),
    });
    s.app_dir = PathBuf::from("/work/app/web");
    s.gemfile = Some(PathBuf::from("/work/app/web/Gemfile"));
    s.env
        .insert("BUNDLE_GEMFILE".into(), "/work/app/web/Gemfile".into());
    s.env.insert("OTHER".into(), "/work/application".into());
    s.setup = vec![vec![
        "/usr/bin/ruby".into(),
        "/work/app/web/bin/setup".into(),
    ]];
    let checkout = Path::new("/work/app/results/r1/checkouts/abc");
    let moved = s.in_checkout(checkout);
    assert_eq!(moved.app_dir, checkout.join("web"));
    assert_eq!(moved.gemfile, Some(checkout.join("web/Gemfile")));
    assert_eq!(
        moved.env["BUNDLE_GEMFILE"],
        checkout.join("web/Gemfile").to_string_lossy()
    );
    assert_eq!(
        moved.env["OTHER"], "/work/application",
        "not inside the repository"
    );
    assert_eq!(moved.setup[0][0], "/usr/bin/ruby");
    assert_eq!(
        moved.setup[0][1],
        checkout.join("web/bin/setup").to_string_lossy()
    );
    assert_eq!(moved.in_checkout(checkout), moved);
}

/// A git repository in `dir` with two commits (tagged `one` and `two`).
fn ruby_repository(dir: &Path) {
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    };
    git(&["init", "--quiet"]);
    for tag in ["one", "two"] {
        std::fs::write(dir.join("NEWS"), tag).unwrap();
        git(&["add", "NEWS"]);
        git(&["commit", "--quiet", "-m", tag]);
        git(&["tag", tag]);
    }
}

/// `ruby_ref` with `ruby_repo`: each ref resolved to its commit and its Ruby asked of the
/// build once per commit (the test's build answers with `/bin/sh`, which the knob checks
/// accept as they do for every other test here); the configuration runs on it, named by
/// the commit, and records the commit. A build that fails is an error at the `ruby_ref`.
#[test]
fn ruby_ref_builds_the_ruby_of_each_commit_once() {
    let dir = tempfile::tempdir().unwrap();
    ruby_repository(dir.path());
    let file = dir.path().join("exp.toml");
    let text = r#"
[settings]
workload = "script"
script = "s.rb"
ruby_repo = "."
ruby_configure_opts = ["--disable-yjit"]

[matrix]
ruby_ref = ["one", "two"]
runs = [1, 2]
"#;
    std::fs::write(dir.path().join("s.rb"), "").unwrap();
    let asked = std::cell::RefCell::new(Vec::new());
    let build = |r: &rubies::build::BuildRequest| {
        asked.borrow_mut().push(r.clone());
        Ok(PathBuf::from("/bin/sh"))
    };
    let e = Experiment::parse_with(&file, text, &|| Vec::new(), &build).unwrap();
    let asked = asked.into_inner();
    assert_eq!(asked.len(), 2, "once per commit: {asked:?}");
    assert_eq!(asked[0].options.configure_opts, ["--disable-yjit"]);
    assert!(asked[0].cache.ends_with("commits"), "{:?}", asked[0].cache);
    assert_eq!(e.configs.len(), 4);
    for c in &e.configs {
        let commit = c
            .settings
            .ruby_commit
            .as_ref()
            .expect("the commit is recorded");
        assert_eq!(commit.commit.len(), 40);
        assert_eq!(c.settings.ruby, format!("commit-{}", &commit.commit[..12]));
        assert_eq!(c.settings.ruby_argv[0], "/bin/sh");
        assert_eq!(commit.repo, dir.path().canonicalize().unwrap());
        assert_eq!(commit.configure_opts, ["--disable-yjit"]);
    }
    assert_ne!(
        e.configs[0].settings.ruby_commit.as_ref().unwrap().commit,
        e.configs[3].settings.ruby_commit.as_ref().unwrap().commit
    );

    let refuse =
        |_: &rubies::build::BuildRequest| Err("configure failed (exit status 1)".to_string());
    let err = Experiment::parse_with(&file, text, &|| Vec::new(), &refuse)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("exp.toml:9:13: matrix.ruby_ref[0]: one (")
            && err.contains("): configure failed"),
        "{err}"
    );
}

#[test]
fn ruby_ref_is_checked_with_its_companions() {
    let dir = tempfile::tempdir().unwrap();
    ruby_repository(dir.path());
    let file = dir.path().join("exp.toml");
    std::fs::write(dir.path().join("s.rb"), "").unwrap();
    let read = |text: &str| {
        Experiment::parse_with(
            &file,
            text,
            &|| Vec::new(),
            &|_: &rubies::build::BuildRequest| Ok(PathBuf::from("/bin/sh")),
        )
        .unwrap_err()
        .to_string()
    };
    let alone = read("[settings]\nworkload = \"script\"\nscript = \"s.rb\"\nruby_ref = \"one\"\n");
    assert!(
        alone.contains("exp.toml:4:12: settings.ruby_ref: `ruby_ref` needs `ruby_repo`"),
        "{alone}"
    );
    let unknown = read("[settings]\nworkload = \"script\"\nscript = \"s.rb\"\nruby_repo = \".\"\nruby_ref = \"three\"\n");
    assert!(
        unknown.contains("exp.toml:5:12: settings.ruby_ref:") && unknown.contains("git -C"),
        "{unknown}"
    );
    let both = read("[rubies]\nr = \"/bin/sh\"\n[settings]\nworkload = \"script\"\nscript = \"s.rb\"\nruby = \"r\"\nruby_repo = \".\"\nruby_ref = \"one\"\n");
    assert!(both.contains("settings.ruby_ref: `ruby_ref` builds this configuration's Ruby from a commit, and `settings.ruby` names another"), "{both}");
    let opts = read(
        "[settings]\nworkload = \"script\"\nscript = \"s.rb\"\nruby_configure_opts = [\"--x\"]\n",
    );
    assert!(opts.contains("exp.toml:4:23: settings.ruby_configure_opts: `ruby_configure_opts` is for a Ruby built from a commit"), "{opts}");
    let not_a_repo = tempfile::tempdir().unwrap();
    let elsewhere = read(&format!("[settings]\nworkload = \"script\"\nscript = \"s.rb\"\nruby_repo = {:?}\nruby_ref = \"one\"\n", not_a_repo.path()));
    assert!(
        elsewhere.contains("exp.toml:4:13: settings.ruby_repo:"),
        "{elsewhere}"
    );
}

#[test]
fn a_fleet_table_is_read_with_its_defaults() {
    let e = parse("[fleet]\nnodes = 8\npartition = \"bench\"\ntime_limit = \"45m\"\nsbatch = [\"--constraint=quiet\"]\nretries = 1\n").unwrap();
    let f = e.fleet.expect("[fleet]");
    assert_eq!(
        (f.engine.as_str(), f.nodes, f.partition.as_deref()),
        ("slurm", 8, Some("bench"))
    );
    assert_eq!(f.time_limit, Some(Duration::from_secs(45 * 60)));
    assert_eq!(
        (f.sbatch, f.retries, f.load.as_str()),
        (vec!["--constraint=quiet".to_string()], 1, "same")
    );
    // Absent keys take the defaults; no [fleet] is None.
    let f = parse("[fleet]\n").unwrap().fleet.unwrap();
    assert_eq!(f, crate::fleet::Fleet::default());
    assert_eq!(
        f.block_time_limit(Duration::from_secs(60)),
        Duration::from_secs(780)
    );
    assert!(parse("").unwrap().fleet.is_none());
}

#[test]
fn a_fleet_table_is_checked_key_by_key() {
    let e = errors("[fleet]\nnodes = 0\nengine = \"lsf\"\nsbatch = [\"--array=1-3\"]\ntime_limit = \"30s\"\nload = \"apart\"\nnode = 2\n");
    let all = e.join("\n");
    assert!(
        all.contains("exp.toml:2:9: fleet.nodes: expected an integer from 1 to 10000"),
        "{all}"
    );
    assert!(
        all.contains("exp.toml:3:10: fleet.engine:") && all.contains("slurm"),
        "{all}"
    );
    assert!(
        all.contains("fleet.sbatch: `--array=1-3` is set by rubyrace for every block"),
        "{all}"
    );
    assert!(
        all.contains("fleet.time_limit: expected at least a minute"),
        "{all}"
    );
    assert!(
        all.contains("exp.toml:6:8: fleet.load:") && all.contains("separate"),
        "{all}"
    );
    let separate = parse("[fleet]\nload = \"separate\"\n")
        .unwrap()
        .fleet
        .unwrap();
    assert!(separate.separate_load());
    // A separate load host runs a load per slice on new connections: no 20 ms slices.
    let errs = errors("design = \"interleaved\"\nslice = \"50ms\"\n[fleet]\nload = \"separate\"\n[matrix]\nthreads = [1, 2]\n");
    assert!(
        errs[0].contains("exp.toml:2:9: slice: a slice of 50ms with [fleet] load = \"separate\"")
            && errs[0].contains("shorter than 100ms"),
        "{errs:#?}"
    );
    assert!(parse("design = \"interleaved\"\nslice = \"100ms\"\n[fleet]\nload = \"separate\"\n[matrix]\nthreads = [1, 2]\n").is_ok());
    // What makes a slice valid has one home (design::slice_problem), whether the slice is
    // written, cut from the duration, or chosen for a file without a design (and by
    // `check` and `bisect`, through default_design): 60 ms of load is one slice of 60 ms,
    // too short for a separate load host.
    let short = "[settings]\nduration = \"60ms\"\n[fleet]\nload = \"separate\"\n[matrix]\nthreads = [1, 2]\n";
    let errs = errors(&format!("design = \"interleaved\"\n{short}"));
    assert!(
        errs[0].contains("exp.toml:1:10: design: duration = \"60ms\" is shorter than the shortest slice with [fleet] load = \"separate\", 100ms"),
        "{errs:#?}"
    );
    let e = parse(short).unwrap();
    assert_eq!(e.design, crate::design::Design::Blocks);
    assert!(
        e.defaults.iter().any(|d| d.starts_with("design = \"blocks\" (duration is shorter than the shortest slice with [fleet] load = \"separate\", 100ms")),
        "{:?}",
        e.defaults
    );
    assert_eq!(e.default_design(&e.configs), crate::design::Design::Blocks);
    // The same 60 ms on held-open connections (no separate load host) is a valid slice.
    let e = parse("[settings]\nduration = \"60ms\"\n[matrix]\nthreads = [1, 2]\n").unwrap();
    assert_ne!(e.design, crate::design::Design::Blocks);
    assert_ne!(e.default_design(&e.configs), crate::design::Design::Blocks);
    assert!(
        all.contains("fleet.node: unknown key `node`") && all.contains("did you mean `nodes`?"),
        "{all}"
    );
    let e = errors("fleet = 3\n");
    assert!(e[0].contains("fleet: expected a table"), "{e:?}");
}
