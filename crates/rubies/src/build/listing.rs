//! The complete builds of a cache, each with the names (symlinks in `<cache>/rubies/`)
//! that point at it: what `rubyrace ruby list` shows.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::record::{read_record, BuildRecord};
use crate::cache::rubies_dir;

/// One complete build found in a cache by [`cache_builds`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CachedBuild {
    /// The prefix directory.
    pub prefix: PathBuf,
    /// The names (symlinks in `<cache>/rubies/`) that point at it, sorted.
    pub names: Vec<String>,
    pub record: BuildRecord,
}

impl CachedBuild {
    /// The interpreter, through its first name when it has one (that path follows the
    /// name if it is rebuilt), else in the prefix.
    pub fn ruby(&self) -> PathBuf {
        match self.names.first() {
            Some(name) => self
                .prefix
                .parent()
                .unwrap_or(Path::new("/"))
                .join(name)
                .join("bin/ruby"),
            None => self.prefix.join("bin/ruby"),
        }
    }
}

/// The complete builds of `cache` (prefixes holding a readable record of this schema),
/// sorted by version then name. Interrupted builds, logs and build directories are skipped.
pub fn cache_builds(cache: &Path) -> Vec<CachedBuild> {
    let dir = rubies_dir(cache);
    let Ok(entries) = fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut builds: Vec<CachedBuild> = Vec::new();
    let mut links: Vec<(String, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        if file_name.starts_with('.') {
            continue;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        if kind.is_symlink() {
            if let Ok(target) = fs::read_link(entry.path()) {
                links.push((file_name, dir.join(target)));
            }
            continue;
        }
        if !kind.is_dir() {
            continue;
        }
        let Some(record) = read_record(&entry.path()) else {
            continue;
        };
        builds.push(CachedBuild {
            prefix: entry.path(),
            names: Vec::new(),
            record,
        });
    }
    for (name, target) in links {
        let target = target.canonicalize().unwrap_or(target);
        if let Some(build) = builds
            .iter_mut()
            .find(|b| b.prefix.canonicalize().as_ref().unwrap_or(&b.prefix) == &target)
        {
            build.names.push(name);
        }
    }
    for b in &mut builds {
        b.names.sort();
    }
    builds.sort_by(|a, b| {
        a.record
            .version
            .cmp(&b.record.version)
            .then_with(|| a.names.cmp(&b.names))
            .then_with(|| a.prefix.cmp(&b.prefix))
    });
    builds
}
