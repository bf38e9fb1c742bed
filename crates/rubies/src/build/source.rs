//! Which sources a build is made from, identified by their content: a release tarball by
//! its SHA-256, a git repository by the commit of a ref (or of a clean work tree's `HEAD`);
//! and the build key, derived from that identity, the version and the options.

use std::fs::{self, File};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{anyhow, bail, Context};
use sha2::{Digest, Sha256};
use sys::environment::git_command;
use sys::process::describe_status;

use super::record::{BuildOptions, SourceRecord};

/// Part of every build key: bump it when the way rubyrace builds changes (steps, flags,
/// the bundled-gems rule), so that old builds are not reused for new requests.
const RECIPE: u32 = 1;

/// The build key: SHA-256 (hex) of a JSON object with sorted keys holding the recipe
/// version, the source's identity, the version and the options. The configure options keep
/// their order (a later option can override an earlier one).
pub fn build_key(source: &SourceRecord, version: &str, options: &BuildOptions) -> String {
    // serde_json's maps are sorted by key.
    let material = serde_json::json!({
        "recipe": RECIPE,
        "source": source.identity(),
        "version": version,
        "yjit": options.yjit,
        "jemalloc": options.jemalloc,
        "configure_opts": options.configure_opts,
    });
    hex(&Sha256::digest(material.to_string().as_bytes()))
}

/// Identifies the sources: a file is a tarball (its SHA-256); a directory is a git
/// repository at `git_ref`, or at `HEAD` of a clean work tree when no ref is given.
pub(super) fn identify_source(path: &Path, git_ref: Option<&str>) -> anyhow::Result<SourceRecord> {
    let meta = fs::metadata(path).with_context(|| format!("source {}", path.display()))?;
    let path = path
        .canonicalize()
        .with_context(|| format!("source {}", path.display()))?;
    if meta.is_file() {
        if git_ref.is_some() {
            bail!(
                "--ref is for a git source directory; {} is a file (a tarball)",
                path.display()
            );
        }
        let sha256 = sha256_file(&path)
            .with_context(|| format!("cannot read the tarball {}", path.display()))?;
        return Ok(SourceRecord::Tarball { path, sha256 });
    }
    if !meta.is_dir() {
        bail!(
            "source {} is neither a file nor a directory",
            path.display()
        );
    }

    let bare = git(&path, &["rev-parse", "--is-bare-repository"]).map_err(|e| {
        anyhow!(
            "source {} is a directory but not a git repository ({e}). rubyrace builds a \
             directory only from a git commit, which identifies its content: commit it \
             (`git init && git add -A && git commit`), or pass a release tarball",
            path.display()
        )
    })?;
    if bare != "true" {
        let top = git(&path, &["rev-parse", "--show-toplevel"])?;
        let top = PathBuf::from(top);
        if top.canonicalize().unwrap_or(top.clone()) != path {
            bail!(
                "source {} is inside the git repository {}: pass the repository's top \
                 directory",
                path.display(),
                top.display()
            );
        }
    }
    let wanted = match git_ref {
        Some(r) => {
            if r.is_empty() || r.starts_with('-') {
                bail!("--ref `{r}` is not a git revision");
            }
            r.to_string()
        }
        None => {
            if bare == "true" {
                "HEAD".to_string()
            } else {
                let status = git(&path, &["status", "--porcelain"])?;
                if !status.is_empty() {
                    let shown: Vec<&str> = status.lines().take(5).collect();
                    bail!(
                        "{} has uncommitted changes ({}{}); commit them, or pass --ref to \
                         build a commit",
                        path.display(),
                        shown.join(", "),
                        if status.lines().count() > 5 {
                            ", ..."
                        } else {
                            ""
                        }
                    );
                }
                "HEAD".to_string()
            }
        }
    };
    let commit = git(
        &path,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{wanted}^{{commit}}"),
        ],
    )
    .map_err(|_| {
        anyhow!(
            "`{wanted}` is not a commit of the git repository {}",
            path.display()
        )
    })?;
    Ok(SourceRecord::Git {
        path,
        commit,
        git_ref: wanted,
    })
}

/// `git -C dir ARGS`: its trimmed stdout, or an error with its stderr.
fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = git_command(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| anyhow!("could not run git: {e}"))?;
    if !out.status.success() {
        bail!(
            "`git -C {} {}` {}: {}",
            dir.display(),
            args.join(" "),
            describe_status(out.status),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn sha256_file(path: &Path) -> io::Result<String> {
    let mut file = File::open(path)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
