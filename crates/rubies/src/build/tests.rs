//! The tests of the builds: the key, names and configure argv, the bundled-gems rule, the
//! record's field names.

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::check_label;
use super::{
    build_key, configure_argv, default_name, format_elapsed, remove_missing_bundled_gems,
    BuildOptions, BuildRecord, SourceRecord, SCHEMA,
};

fn tarball(sha: &str) -> SourceRecord {
    SourceRecord::Tarball {
        path: PathBuf::from("/x.tar.gz"),
        sha256: sha.into(),
    }
}

#[test]
fn the_key_depends_on_content_version_and_options_not_on_paths() {
    let opts = BuildOptions::default();
    let base = build_key(&tarball("aa"), "3.3.8", &opts);
    assert_eq!(base.len(), 64);
    assert_eq!(base, build_key(&tarball("aa"), "3.3.8", &opts), "stable");
    let elsewhere = SourceRecord::Tarball {
        path: PathBuf::from("/elsewhere/y.tar.xz"),
        sha256: "aa".into(),
    };
    assert_eq!(base, build_key(&elsewhere, "3.3.8", &opts));

    let mut keys = vec![
        base.clone(),
        build_key(&tarball("ab"), "3.3.8", &opts),
        build_key(&tarball("aa"), "3.3.9", &opts),
        build_key(
            &SourceRecord::Git {
                path: PathBuf::from("/x"),
                commit: "aa".into(),
                git_ref: "HEAD".into(),
            },
            "3.3.8",
            &opts,
        ),
    ];
    for o in [
        BuildOptions {
            yjit: true,
            ..opts.clone()
        },
        BuildOptions {
            jemalloc: true,
            ..opts.clone()
        },
        BuildOptions {
            configure_opts: vec!["--a".into(), "--b".into()],
            ..opts.clone()
        },
        BuildOptions {
            configure_opts: vec!["--b".into(), "--a".into()],
            ..opts.clone()
        },
    ] {
        keys.push(build_key(&tarball("aa"), "3.3.8", &o));
    }
    let n = keys.len();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), n, "every difference gives another key");
}

#[test]
fn names_and_configure_argv() {
    let o = BuildOptions {
        yjit: true,
        jemalloc: true,
        configure_opts: vec!["CFLAGS=-O3 -g".into()],
    };
    assert_eq!(default_name("3.3.8", &o), "3.3.8-yjit-jemalloc");
    assert_eq!(default_name("3.3.8", &BuildOptions::default()), "3.3.8");
    assert_eq!(
        configure_argv(Path::new("/c/p"), &o),
        [
            "./configure",
            "--prefix=/c/p",
            "--disable-install-doc",
            "--enable-yjit",
            "--with-jemalloc",
            "CFLAGS=-O3 -g"
        ]
    );
    assert!(check_label("v", "3.3.8").is_ok());
    assert!(check_label("v", "3.4.0-preview1+x_y").is_ok());
    for bad in ["", ".", "../x", "a/b", "-x", "a b", "é"] {
        assert!(check_label("v", bad).is_err(), "{bad:?}");
    }
    assert_eq!(format_elapsed(Duration::from_millis(420)), "0.4 s");
    assert_eq!(format_elapsed(Duration::from_secs(187)), "3m07s");
}

#[test]
fn bundled_gems_are_dropped_only_without_gem_files() {
    let tmp = tempfile::Builder::new()
        .prefix("bundled-gems")
        .tempdir()
        .unwrap();
    let gems = tmp.path().join("gems");
    fs::create_dir_all(&gems).unwrap();
    let list = "# gem-name version repository-url\n\nminitest 5.20.0 https://x\n  # indented\nrake    13.1.0  https://y rev\n";
    fs::write(gems.join("bundled_gems"), list).unwrap();

    fs::write(gems.join("rake-13.1.0.gem"), "").unwrap();
    assert!(remove_missing_bundled_gems(tmp.path()).unwrap().is_empty());
    assert_eq!(fs::read_to_string(gems.join("bundled_gems")).unwrap(), list);

    fs::remove_file(gems.join("rake-13.1.0.gem")).unwrap();
    assert_eq!(
        remove_missing_bundled_gems(tmp.path()).unwrap(),
        ["minitest 5.20.0", "rake 13.1.0"]
    );
    assert_eq!(
        fs::read_to_string(gems.join("bundled_gems")).unwrap(),
        "# gem-name version repository-url\n\n  # indented\n"
    );
    assert!(
        remove_missing_bundled_gems(tmp.path()).unwrap().is_empty(),
        "idempotent"
    );
    assert!(remove_missing_bundled_gems(&tmp.path().join("nowhere"))
        .unwrap()
        .is_empty());
}

#[test]
fn records_round_trip_with_the_documented_field_names() {
    let record = BuildRecord {
        schema: SCHEMA.into(),
        version: "3.3.8".into(),
        name: "3.3.8".into(),
        key: "k".into(),
        prefix: PathBuf::from("/c/rubies/3.3.8-k"),
        source: SourceRecord::Git {
            path: PathBuf::from("/src"),
            commit: "c0ffee".into(),
            git_ref: "v3_3_8".into(),
        },
        options: BuildOptions::default(),
        configure_argv: vec!["./configure".into()],
        jobs: 2,
        bundled_gems_removed: vec![],
        ruby_description: "ruby 3.3.8".into(),
        mainlibs: "-lm".into(),
        log: PathBuf::from("/c/rubies/3.3.8-k.log"),
        built_at: "2025-01-01T00:00:00Z".into(),
        build_seconds: 1.5,
        rubyrace_version: "0.1.0".into(),
    };
    let value = serde_json::to_value(&record).unwrap();
    assert_eq!(value["source"]["kind"], "git");
    assert_eq!(value["source"]["ref"], "v3_3_8");
    assert_eq!(value["source"]["commit"], "c0ffee");
    assert_eq!(value["options"]["yjit"], false);
    let back: BuildRecord = serde_json::from_value(value).unwrap();
    assert_eq!(back, record);
}
