//! Where a command's output goes: stdout, where a closed pipe (`| head`) ends the output
//! quietly, or a file written atomically (a temporary file in the same directory, then a
//! rename), so an interrupted write never leaves half a file. No output ever replaces a
//! results database, or any file of a results directory other than the report files
//! rubyrace names itself (`report.html` and its siblings, `export.json`, `charts/`).

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The files `-o` may write at the top of a results directory.
const REPORT_FILES: [&str; 6] = [
    "report.html",
    "report.md",
    "report.csv",
    "report.json",
    "report.txt",
    "export.json",
];
/// The subdirectory of a results directory that `--charts` may write into.
const CHARTS_DIR: &str = "charts";

/// Writes `text` to stdout; a closed pipe is the end of output, not an error.
pub fn write_stdout(text: &str) -> Result<()> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other.context("cannot write to stdout")?),
    }
}

/// Writes `text` to `path` if given (after `check_output_file`), else to stdout.
pub fn write(path: Option<&Path>, text: &str) -> Result<()> {
    match path {
        Some(path) => write_file(path, text.as_bytes()),
        None => write_stdout(text),
    }
}

/// Writes `bytes` to `path` atomically: a temporary file next to it, synced, then renamed
/// over it. Checks `path` first (`check_output_file`).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    let pending = PendingFile::new(path)?;
    let written = (|| -> io::Result<()> {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(pending.temporary())?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    match written {
        Ok(()) => pending.commit(),
        Err(e) => bail!("cannot write {}: {e}", path.display()),
    }
}

/// An output file being written under a temporary name next to its final place (checked
/// with `check_output_file` first), renamed over it by `commit`. Dropped uncommitted, the
/// temporary file is removed: an interrupted or failed write never leaves half a file.
pub struct PendingFile {
    path: PathBuf,
    temporary: PathBuf,
    committed: bool,
}

impl PendingFile {
    pub fn new(path: &Path) -> Result<Self> {
        check_output_file(path)?;
        let name = path
            .file_name()
            .with_context(|| format!("{} names no file", path.display()))?;
        let temporary = parent_dir(path).join(format!(
            ".{}.rubyrace-{}.tmp",
            name.to_string_lossy(),
            std::process::id()
        ));
        Ok(PendingFile {
            path: path.to_path_buf(),
            temporary,
            committed: false,
        })
    }

    /// Where to write until `commit`.
    pub fn temporary(&self) -> &Path {
        &self.temporary
    }

    /// Renames the temporary file over the output file.
    pub fn commit(mut self) -> Result<()> {
        fs::rename(&self.temporary, &self.path)
            .with_context(|| format!("cannot write {}", self.path.display()))?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for PendingFile {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.temporary);
        }
    }
}

/// Refuses an output file that is a directory, an SQLite database (a results database,
/// wherever it lies), in a directory that does not exist, or inside a results directory
/// other than as one of `REPORT_FILES` at its top.
pub fn check_output_file(path: &Path) -> Result<()> {
    if path.is_dir() {
        bail!("{} is a directory; give a file name", path.display());
    }
    if is_sqlite_database(path) {
        bail!(
            "{} is an SQLite database (a results database?); rubyrace never writes over one: choose another file",
            path.display()
        );
    }
    let dir = parent_dir(path);
    if !dir.is_dir() {
        bail!(
            "cannot write {}: the directory {} does not exist",
            path.display(),
            dir.display()
        );
    }
    // Where the file really is: its directory resolved, or the file itself if it is a link.
    let real = fs::canonicalize(path).unwrap_or_else(|_| {
        fs::canonicalize(&dir)
            .unwrap_or_else(|_| dir.clone())
            .join(path.file_name().unwrap_or_default())
    });
    if let Some(results) = results_dir_holding(&real) {
        let inside = real.strip_prefix(&results).unwrap_or(&real);
        let allowed = inside
            .to_str()
            .is_some_and(|name| REPORT_FILES.contains(&name));
        if !allowed {
            bail!(
                "{} is inside the results directory {}; rubyrace writes only its own report files there ({}) and charts into {}/{CHARTS_DIR}: choose one of those or a path outside it",
                path.display(),
                results.display(),
                REPORT_FILES.join(", "),
                results.display()
            );
        }
    }
    Ok(())
}

/// Checks the directory of `--charts` before anything is computed, and creates it: it must
/// not be a file, nor a results directory or a part of one other than its `charts/`.
pub fn prepare_charts_dir(dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        bail!(
            "--charts {}: this is a file; give a directory for the chart files",
            dir.display()
        );
    }
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let real = fs::canonicalize(&absolute).unwrap_or(absolute);
    if let Some(results) = results_dir_holding(&real) {
        if !real.starts_with(results.join(CHARTS_DIR)) {
            bail!(
                "--charts {}: this is inside the results directory {}; write the charts into {}/{CHARTS_DIR} or outside it",
                dir.display(),
                results.display(),
                results.display()
            );
        }
    }
    fs::create_dir_all(dir).with_context(|| format!("--charts: cannot create {}", dir.display()))
}

/// The results directory (a directory holding `results.db`) that `path` is or lies in.
fn results_dir_holding(path: &Path) -> Option<PathBuf> {
    path.ancestors()
        .find(|a| a.join(results::store::DB_FILE).is_file())
        .map(Path::to_path_buf)
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn is_sqlite_database(path: &Path) -> bool {
    let mut header = [0u8; 16];
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .is_ok_and(|_| &header == b"SQLite format 3\0")
}
