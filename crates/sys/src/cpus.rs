//! CPU sets as Linux writes them (`0-3,6`), this process's affinity, pinning every thread
//! of this process to a set, and the split of the CPUs between a server and the load
//! generator (`cpus = "split"`).

use nix::sched::{sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// Why a CPU list (`0-3,6`) does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CpuSetError {
    /// A part that is not a number (`a`, the empty end of `1-`).
    #[error("{0:?} is not a CPU number")]
    NotANumber(String),
    /// A range whose start is above its end (`3-1`).
    #[error("{0:?} is an empty range")]
    EmptyRange(String),
    /// Nothing but commas and spaces.
    #[error("no CPU is named")]
    NoCpu,
    /// A number at or above the kernel's `CPU_SETSIZE`.
    #[error("CPU numbers stop at {}", .max)]
    TooHigh { max: usize },
}

/// Why CPUs cannot be split between the server and the load generator, or a given split is
/// not possible here.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CpuSplitError {
    /// [`CpuSplit::split`] on fewer than 2 CPUs.
    #[error("cpus = \"split\" needs at least 2 CPUs, and rubyrace may use only {available}")]
    TooFewCpus { available: CpuSet },
    /// [`CpuSplit::check`]: the two sets share a CPU.
    #[error(
        "the server's CPUs ({server}) and the load generator's ({load}) overlap; they must be disjoint"
    )]
    Overlap { server: CpuSet, load: CpuSet },
    /// [`CpuSplit::check`]: `who`'s set (`server` or `load`) names a CPU rubyrace may not use.
    #[error("{who} = \"{set}\" names CPU {cpu}, and rubyrace may use only {available}")]
    Unavailable {
        who: &'static str,
        set: CpuSet,
        cpu: usize,
        available: CpuSet,
    },
}

/// A set of CPU numbers, written as Linux writes them (`0-3,6`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CpuSet(Vec<usize>);

impl CpuSet {
    pub fn cpus(&self) -> &[usize] {
        &self.0
    }

    /// Parses `0-3,6` (as `Cpus_allowed_list` and `taskset -c` write it).
    pub fn parse(text: &str) -> Result<CpuSet, CpuSetError> {
        let mut cpus = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let number = |s: &str| {
                s.trim()
                    .parse::<usize>()
                    .map_err(|_| CpuSetError::NotANumber(s.to_string()))
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (number(a)?, number(b)?);
                    if a > b {
                        return Err(CpuSetError::EmptyRange(part.to_string()));
                    }
                    cpus.extend(a..=b);
                }
                None => cpus.push(number(part)?),
            }
        }
        if cpus.is_empty() {
            return Err(CpuSetError::NoCpu);
        }
        if cpus.iter().any(|&c| c >= libc::CPU_SETSIZE as usize) {
            return Err(CpuSetError::TooHigh {
                max: libc::CPU_SETSIZE as usize - 1,
            });
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuSet(cpus))
    }

    /// The CPUs this process may run on (its affinity mask).
    pub fn of_this_process() -> std::io::Result<CpuSet> {
        let set = sched_getaffinity(Pid::from_raw(0))?;
        let cpus = (0..nix::sched::CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect();
        Ok(CpuSet(cpus))
    }

    /// The kernel's mask for this set.
    pub fn mask(&self) -> nix::sched::CpuSet {
        let mut set = nix::sched::CpuSet::new();
        for &c in &self.0 {
            // Every number was checked below CPU_SETSIZE.
            let _ = set.set(c);
        }
        set
    }

    pub fn overlaps(&self, other: &CpuSet) -> bool {
        self.0.iter().any(|c| other.0.contains(c))
    }
}

impl std::fmt::Display for CpuSet {
    /// The compact form (`0-3,6`).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            parts.push(if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            });
            i += 1;
        }
        f.write_str(&parts.join(","))
    }
}

impl TryFrom<String> for CpuSet {
    type Error = CpuSetError;
    fn try_from(s: String) -> Result<Self, CpuSetError> {
        CpuSet::parse(&s)
    }
}

impl From<CpuSet> for String {
    fn from(s: CpuSet) -> String {
        s.to_string()
    }
}

/// The server's tree on one set of CPUs, rubyrace (the load generator) on another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuSplit {
    pub server: CpuSet,
    pub load: CpuSet,
}

impl CpuSplit {
    /// `cpus = "split"`: of the CPUs rubyrace may use, the first quarter (at least one) for
    /// the load generator and the rest for the server. On 2 CPUs: load on the first, the
    /// server on the second.
    pub fn split(available: &CpuSet) -> Result<CpuSplit, CpuSplitError> {
        let cpus = available.cpus();
        if cpus.len() < 2 {
            return Err(CpuSplitError::TooFewCpus {
                available: available.clone(),
            });
        }
        let load = (cpus.len() / 4).max(1);
        Ok(CpuSplit {
            load: CpuSet(cpus[..load].to_vec()),
            server: CpuSet(cpus[load..].to_vec()),
        })
    }

    /// Both sets non-empty, disjoint, and within the CPUs rubyrace may use.
    pub fn check(&self, available: &CpuSet) -> Result<(), CpuSplitError> {
        if self.server.overlaps(&self.load) {
            return Err(CpuSplitError::Overlap {
                server: self.server.clone(),
                load: self.load.clone(),
            });
        }
        for (who, set) in [("server", &self.server), ("load", &self.load)] {
            if let Some(&cpu) = set.cpus().iter().find(|c| !available.cpus().contains(c)) {
                return Err(CpuSplitError::Unavailable {
                    who,
                    set: set.clone(),
                    cpu,
                    available: available.clone(),
                });
            }
        }
        Ok(())
    }
}

/// Pins every thread of this process (and so every thread and child it starts later) to
/// `set`.
pub fn pin_this_process(set: &CpuSet) -> std::io::Result<()> {
    let mask = set.mask();
    for entry in std::fs::read_dir("/proc/self/task")? {
        let tid: i32 = match entry?.file_name().to_string_lossy().parse() {
            Ok(t) => t,
            Err(_) => continue,
        };
        match sched_setaffinity(Pid::from_raw(tid), &mask) {
            // A thread that ended since the listing is not an error.
            Ok(()) | Err(nix::errno::Errno::ESRCH) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// `Cpus_allowed_list` of a process or thread (`/proc/PID/status`, or
/// `/proc/PID/task/TID/status`).
pub fn cpus_allowed(status_path: &str) -> Option<CpuSet> {
    let text = std::fs::read_to_string(status_path).ok()?;
    let line = text.lines().find(|l| l.starts_with("Cpus_allowed_list:"))?;
    CpuSet::parse(line.split_once(':')?.1).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_are_read_and_written_as_linux_writes_them() {
        let s = CpuSet::parse("0-3, 6,2").unwrap();
        assert_eq!(s.cpus(), &[0, 1, 2, 3, 6]);
        assert_eq!(s.to_string(), "0-3,6");
        assert_eq!(CpuSet::parse("1").unwrap().to_string(), "1");
        for bad in ["", "a", "3-1", "1-", "99999"] {
            assert!(CpuSet::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn split_gives_the_load_a_quarter_and_at_least_one() {
        let two = CpuSplit::split(&CpuSet::parse("0-1").unwrap()).unwrap();
        assert_eq!(
            (two.load.to_string(), two.server.to_string()),
            ("0".into(), "1".into())
        );
        let eight = CpuSplit::split(&CpuSet::parse("0-7").unwrap()).unwrap();
        assert_eq!(
            (eight.load.to_string(), eight.server.to_string()),
            ("0-1".into(), "2-7".into())
        );
        assert!(CpuSplit::split(&CpuSet::parse("3").unwrap()).is_err());
    }

    #[test]
    fn overlapping_or_unavailable_sets_are_refused() {
        let available = CpuSet::parse("0-1").unwrap();
        let split = |server: &str, load: &str| CpuSplit {
            server: CpuSet::parse(server).unwrap(),
            load: CpuSet::parse(load).unwrap(),
        };
        assert!(split("1", "0").check(&available).is_ok());
        assert!(split("0-1", "1")
            .check(&available)
            .unwrap_err()
            .to_string()
            .contains("overlap"));
        assert!(split("2", "0")
            .check(&available)
            .unwrap_err()
            .to_string()
            .contains("CPU 2"));
    }

    #[test]
    fn this_process_has_an_affinity_and_it_reads_back_from_proc() {
        let mine = CpuSet::of_this_process().unwrap();
        assert!(!mine.cpus().is_empty());
        assert_eq!(cpus_allowed("/proc/self/status").unwrap(), mine);
    }
}
