//! Whom a service runs as, and where its files live: as root, rubyrace runs PostgreSQL
//! (which refuses root) and Redis as an unprivileged system user (`postgres`, `redis`, else
//! `nobody`); as any other user, as itself. The service's files go in a directory that
//! user owns: under the results directory when the user can reach it, else (a results
//! directory under `/root`, mode 700) in a private directory under `/var/tmp` that the
//! results directory links to as `outside`, which every cleanup follows. Such a directory
//! names its owner (the rubyrace that made it: pid and start time, in `rubyrace.owner`), so
//! that one left by a rubyrace killed with SIGKILL is removed by the next rubyrace that
//! starts services or a run ([`sweep_abandoned`]), even when its results directory was
//! deleted meanwhile.
//!
//! Each service gets a password made for it ([`new_password`]): on a shared machine (a CI
//! runner) another local user could otherwise read or change the benchmark's data in the
//! middle of a run. The password reaches the app only in `DATABASE_URL` and `REDIS_URL`;
//! records and output carry the URLs without it.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// The name of the link from a service's directory to its private directory elsewhere.
const OUTSIDE: &str = "outside";
/// Where private directories go when the results directory is out of the user's reach.
const PRIVATE_ROOT: &str = "/var/tmp";
/// The prefix of every private directory's name (`rubyrace-postgres-`, `rubyrace-redis-`).
const PRIVATE_PREFIX: &str = "rubyrace-";
/// The file in a private directory naming the rubyrace that made it: `PID START_TIME`.
const OWNER_FILE: &str = "rubyrace.owner";

/// An unprivileged user a service runs as.
#[derive(Clone, Debug)]
pub struct ServiceUser {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

impl ServiceUser {
    pub fn ids(&self) -> (u32, u32) {
        (self.uid, self.gid)
    }
}

/// The user `service` runs as: None (rubyrace's own) unless rubyrace runs as root, then the
/// first of `names` that exists.
pub fn service_user(service: &str, names: &[&str]) -> Result<Option<ServiceUser>> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    for &name in names {
        if let Ok(Some(u)) = nix::unistd::User::from_name(name) {
            return Ok(Some(ServiceUser {
                name: name.to_string(),
                uid: u.uid.as_raw(),
                gid: u.gid.as_raw(),
            }));
        }
    }
    bail!(
        "rubyrace runs as root, and runs {service} as an unprivileged user: none of {} exists",
        names.join(", ")
    )
}

/// The name of the user a service runs as, for the record.
pub fn user_name(user: Option<&ServiceUser>) -> String {
    if let Some(u) = user {
        return u.name.clone();
    }
    let uid = nix::unistd::getuid();
    nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .unwrap_or_else(|| uid.to_string())
}

/// Whether `uid`/`gid` may reach (search) every directory above `dir`.
fn reachable_by(dir: &Path, uid: u32, gid: u32) -> bool {
    dir.ancestors().skip(1).all(|d| match std::fs::metadata(d) {
        Ok(m) => {
            let mode = m.permissions().mode();
            (m.uid() == uid && mode & 0o100 != 0)
                || (m.gid() == gid && mode & 0o010 != 0)
                || mode & 0o001 != 0
        }
        Err(_) => false,
    })
}

/// Gives `path` to `user` (when there is one) and lets no one else in (mode 700).
pub fn make_private(path: &Path, user: Option<&ServiceUser>) -> Result<()> {
    if let Some(u) = user {
        std::os::unix::fs::chown(path, Some(u.uid), Some(u.gid))
            .with_context(|| format!("cannot give {} to the user {}", path.display(), u.name))?;
    }
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o700))
        .with_context(|| format!("cannot make {} private", path.display()))
}

/// The directory a service's files go in, owned by `user` and private to it: `home` itself,
/// or a new directory under `/var/tmp` (named `prefix…`) when `user` cannot reach `home`;
/// `home/outside` then links to it, and [`remove_outside`] removes it.
pub fn private_dir(home: &Path, user: Option<&ServiceUser>, prefix: &str) -> Result<PathBuf> {
    match user {
        Some(u) if !reachable_by(home, u.uid, u.gid) => {
            let private = tempfile::Builder::new()
                .prefix(prefix)
                .tempdir_in(PRIVATE_ROOT)
                .with_context(|| format!("cannot create a private directory under {PRIVATE_ROOT}"))?
                .keep();
            let me = std::process::id() as i32;
            let owner = format!("{me} {}\n", sys::process::start_time(me).unwrap_or(0));
            std::fs::write(private.join(OWNER_FILE), owner)
                .with_context(|| format!("cannot write {}", private.join(OWNER_FILE).display()))?;
            make_private(&private, user)?;
            std::os::unix::fs::symlink(&private, home.join(OUTSIDE)).with_context(|| {
                format!("cannot link {} from {}", private.display(), home.display())
            })?;
            Ok(private)
        }
        _ => Ok(home.to_path_buf()),
    }
}

/// Removes the private directories under `/var/tmp` whose rubyrace is gone (its pid is
/// not running, or runs another program since); their services died with it (the
/// parent-death signal). A directory without an owner file is left alone; one whose owner
/// still runs is in use. Returns the directories removed.
pub fn sweep_abandoned() -> Vec<PathBuf> {
    sweep_abandoned_in(Path::new(PRIVATE_ROOT))
}

fn sweep_abandoned_in(root: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        if !entry
            .file_name()
            .to_string_lossy()
            .starts_with(PRIVATE_PREFIX)
        {
            continue;
        }
        let dir = entry.path();
        let Ok(owner) = std::fs::read_to_string(dir.join(OWNER_FILE)) else {
            continue;
        };
        let mut fields = owner.split_whitespace().map(|f| f.parse::<u64>().ok());
        let (Some(Some(pid)), Some(Some(started))) = (fields.next(), fields.next()) else {
            continue;
        };
        let alive = sys::process::start_time(pid as i32).is_some_and(|t| t == started);
        if !alive && std::fs::remove_dir_all(&dir).is_ok() {
            removed.push(dir);
        }
    }
    removed
}

/// Removes the private directory `home/outside` links to (only under `/var/tmp`), and the
/// link: after a service stopped, or what a killed rubyrace left.
pub fn remove_outside(home: &Path) {
    let link = home.join(OUTSIDE);
    if let Ok(target) = std::fs::read_link(&link) {
        if target.starts_with(PRIVATE_ROOT) {
            let _ = std::fs::remove_dir_all(target);
        }
    }
    let _ = std::fs::remove_file(link);
}

/// A password made for one service: 128 random bits from the kernel, as 32 hex digits (no
/// character a URL must escape).
pub fn new_password() -> Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes)
        .map_err(|e| anyhow::anyhow!("cannot draw a random password for a service: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes `text` to a new file `path` that only `user` (or rubyrace) may read (mode 600):
/// how a password reaches a service without appearing in its argv.
pub fn write_private_file(path: &Path, text: &str, user: Option<&ServiceUser>) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot create {}", path.display()))?;
    file.write_all(text.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    if let Some(u) = user {
        std::os::unix::fs::chown(path, Some(u.uid), Some(u.gid))
            .with_context(|| format!("cannot give {} to the user {}", path.display(), u.name))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_directories_of_a_gone_rubyrace_are_swept() {
        let root = tempfile::tempdir().unwrap();
        let me = std::process::id() as i32;
        let mine = sys::process::start_time(me).unwrap();
        let make = |name: &str, owner: Option<String>| {
            let dir = root.path().join(name);
            std::fs::create_dir(&dir).unwrap();
            std::fs::write(dir.join("data"), "x").unwrap();
            if let Some(o) = owner {
                std::fs::write(dir.join(OWNER_FILE), o).unwrap();
            }
            dir
        };
        let live = make("rubyrace-postgres-live", Some(format!("{me} {mine}")));
        // This pid, but another start time: the pid was reused.
        let reused = make(
            "rubyrace-postgres-reused",
            Some(format!("{me} {}", mine + 1)),
        );
        let gone = make("rubyrace-redis-gone", Some(format!("{} 1", i32::MAX)));
        let unknown = make("rubyrace-postgres-old", None);
        let other = make("someone-else", Some(format!("{} 1", i32::MAX)));
        let mut removed = sweep_abandoned_in(root.path());
        removed.sort();
        let mut expected = vec![gone.clone(), reused.clone()];
        expected.sort();
        assert_eq!(removed, expected);
        assert!(live.exists() && unknown.exists() && other.exists());
        assert!(!gone.exists() && !reused.exists());
    }

    #[test]
    fn passwords_are_fresh_and_need_no_escaping_in_a_url() {
        let a = new_password().unwrap();
        let b = new_password().unwrap();
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()), "{a}");
    }
}
