//! What a build is made of and what it leaves behind: the options built in, where the
//! sources came from, and the record (`rubyrace-build.json`) written last into the prefix,
//! whose presence marks a complete build.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The `schema` of a [`BuildRecord`].
pub const SCHEMA: &str = "rubyrace.ruby-build/1";
/// The record's file name in a prefix. Its presence marks a complete build.
pub const RECORD_FILE: &str = "rubyrace-build.json";

/// What is built into the interpreter; part of the build key.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BuildOptions {
    /// `--enable-yjit` (needs rustc at configure time).
    pub yjit: bool,
    /// `--with-jemalloc` (needs jemalloc's headers and library).
    pub jemalloc: bool,
    /// More arguments for `./configure`, in the order given.
    pub configure_opts: Vec<String>,
}

/// Where the sources came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum SourceRecord {
    /// A release tarball, identified by the SHA-256 of its bytes.
    Tarball { path: PathBuf, sha256: String },
    /// A commit of a git repository; `ref` is what was asked for (`HEAD` by default).
    Git {
        path: PathBuf,
        commit: String,
        #[serde(rename = "ref")]
        git_ref: String,
    },
}

impl SourceRecord {
    /// What identifies the sources in the build key (not the path: the same tarball or
    /// commit elsewhere is the same build).
    pub(super) fn identity(&self) -> String {
        match self {
            SourceRecord::Tarball { sha256, .. } => format!("tarball:sha256:{sha256}"),
            SourceRecord::Git { commit, .. } => format!("git:{commit}"),
        }
    }

    /// One line for people: "tarball PATH (sha256 1a2b...)", "git PATH at REF (commit ...)".
    pub fn describe(&self) -> String {
        match self {
            SourceRecord::Tarball { path, sha256 } => format!(
                "tarball {} (sha256 {})",
                path.display(),
                &sha256[..sha256.len().min(12)]
            ),
            SourceRecord::Git {
                path,
                commit,
                git_ref,
            } => format!(
                "git {} at {git_ref} (commit {})",
                path.display(),
                &commit[..commit.len().min(12)]
            ),
        }
    }
}

/// `<prefix>/rubyrace-build.json`: what was built, from what, how, and what the result
/// says it is. Written last, so its presence marks a complete build.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    /// [`SCHEMA`].
    pub schema: String,
    /// The VERSION given to `rubyrace ruby build`.
    pub version: String,
    /// The name the build was made under (later builds may add other names).
    pub name: String,
    /// The build key (SHA-256, hex); the prefix ends with its first 12 digits.
    pub key: String,
    pub prefix: PathBuf,
    pub source: SourceRecord,
    pub options: BuildOptions,
    /// The whole `./configure` argv, as run in the source directory.
    pub configure_argv: Vec<String>,
    /// `make -j` value.
    pub jobs: usize,
    /// Bundled gems dropped from `gems/bundled_gems` because their `.gem` files were not in
    /// the sources ("name version"); empty when nothing was dropped.
    pub bundled_gems_removed: Vec<String>,
    /// `RUBY_DESCRIPTION` of the built interpreter (without `--yjit`).
    pub ruby_description: String,
    /// `RbConfig::CONFIG["MAINLIBS"]`.
    pub mainlibs: String,
    /// The build log.
    pub log: PathBuf,
    /// When the build finished (RFC 3339, UTC).
    pub built_at: String,
    pub build_seconds: f64,
    pub rubyrace_version: String,
}

/// The record of the prefix `prefix`, if it has a readable one of this schema.
pub fn read_record(prefix: &Path) -> Option<BuildRecord> {
    let text = fs::read_to_string(prefix.join(RECORD_FILE)).ok()?;
    let record: BuildRecord = serde_json::from_str(&text).ok()?;
    (record.schema == SCHEMA).then_some(record)
}
