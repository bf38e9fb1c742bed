//! The registry of live process groups: a directory where every process group rubyrace
//! starts (servers, services, profilers) has a file `PGID.pid` holding `PGID STARTTIME`
//! while it lives (`process::Supervised` writes and removes them). Reading it tells which
//! groups are the run's own: to kill them after a crash, or to count their CPU as the run's.

use std::fs;
use std::path::Path;

/// The process groups registered in `registry` (the leaders' pids, which are the groups'
/// ids), sorted.
pub fn registered_groups(registry: &Path) -> Vec<i32> {
    let Ok(entries) = fs::read_dir(registry) else {
        return Vec::new();
    };
    let mut groups: Vec<i32> = entries
        .flatten()
        .filter_map(|e| {
            let text = fs::read_to_string(e.path()).ok()?;
            text.split_whitespace().next()?.parse().ok()
        })
        .filter(|&pgid| pgid > 1)
        .collect();
    groups.sort_unstable();
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_read_from_their_files() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("300.pid"), "300 12345\n").unwrap();
        fs::write(dir.path().join("20.pid"), "20 99\n").unwrap();
        fs::write(dir.path().join("junk.pid"), "not a pid\n").unwrap();
        fs::write(dir.path().join("1.pid"), "1 1\n").unwrap();
        assert_eq!(registered_groups(dir.path()), vec![20, 300]);
        assert!(registered_groups(&dir.path().join("absent")).is_empty());
    }
}
