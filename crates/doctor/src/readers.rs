//! Small readers of /proc and /sys files, and CPU lists as Linux writes them.

use rubies::discovery;
use std::path::{Path, PathBuf};

/// A file's contents, trimmed; None if it cannot be read.
pub(crate) fn read_trimmed(path: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// A program on PATH, as `rubyrace` would find it.
pub(crate) fn on_path(program: &str) -> Option<PathBuf> {
    discovery::resolve_executable(program).ok()
}

/// Parses a kernel CPU list ("0-3,8,10-11") into CPU numbers; None if malformed. An empty
/// list is no CPUs.
pub fn parse_cpu_list(text: &str) -> Option<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.trim().is_empty()) {
        match part.trim().split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b {
                    return None;
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(part.trim().parse().ok()?),
        }
    }
    Some(cpus)
}

/// Writes CPU numbers as a kernel CPU list ("0-3,8").
pub fn format_cpu_list(cpus: &[u32]) -> String {
    units::ranges(cpus)
}
