//! Memory (swap) and the kernel (ASLR).

use nix::sys::personality::{self, Persona};

use crate::finding::{Finding, Status};
use crate::readers::read_trimmed;

pub(crate) fn swap_finding() -> Finding {
    let swappiness = read_trimmed("/proc/sys/vm/swappiness");
    let with_swappiness = |s: String| match &swappiness {
        Some(v) => format!("{s}; swappiness {v}"),
        None => s,
    };
    let meminfo = {
        use procfs::Current;
        procfs::Meminfo::current()
    };
    let Some((total, free)) = meminfo.ok().map(|m| (m.swap_total, m.swap_free)) else {
        return Finding::new("swap", Status::Info, "not visible (/proc/meminfo)", "");
    };
    if total == 0 {
        return Finding::ok("swap", with_swappiness("no swap".to_string()));
    }
    let used = total.saturating_sub(free);
    let value = with_swappiness(format!(
        "{} of swap, {} used",
        units::bytes(total),
        units::bytes(used)
    ));
    if used > 0 {
        Finding::new(
            "swap",
            Status::Warn,
            value,
            "some memory is on the swap device: a process touching it waits for the disk, and \
             memory pressure during a trial can swap the server out; free memory, then bring \
             it back with `sudo swapoff -a && sudo swapon -a` (needs as much free memory as \
             is swapped), or lower swappiness (`sudo sysctl vm.swappiness=1`)",
        )
    } else {
        Finding::ok("swap", value)
    }
}

/// Whether this process runs with address-space randomization off (`setarch -R`).
pub(crate) fn personality_no_randomize() -> bool {
    personality::get().is_ok_and(|p| p.contains(Persona::ADDR_NO_RANDOMIZE))
}

pub(crate) fn aslr_finding() -> Finding {
    let Some(v) = read_trimmed("/proc/sys/kernel/randomize_va_space") else {
        return Finding::new(
            "aslr",
            Status::Info,
            "not visible (/proc/sys/kernel/randomize_va_space)",
            "",
        );
    };
    let meaning = match v.as_str() {
        "0" => "off",
        "1" => "stack, mmap and vDSO randomized",
        "2" => "stack, mmap, vDSO and heap randomized",
        _ => "unknown setting",
    };
    let here = personality_no_randomize();
    let mut value = format!("{v} ({meaning})");
    if here {
        value.push_str("; off for this process and its children (setarch -R)");
    }
    match v.as_str() {
        "0" => Finding::new(
            "aslr",
            Status::Info,
            value,
            "layouts repeat from run to run, but it is off for the whole system, a security \
             cost: turn it back on after the experiment \
             (`sudo sysctl kernel.randomize_va_space=2`) \
             and use `setarch -R` instead",
        ),
        _ if here => Finding::ok("aslr", value),
        _ => Finding::new(
            "aslr",
            Status::Info,
            value,
            "each process gets a different memory layout, which adds some variance between \
             trials (cache and TLB effects); for an experiment, run rubyrace without it: \
             `setarch -R rubyrace run ...` turns it off for rubyrace and the servers it \
             starts only; do not turn it off for the whole system",
        ),
    }
}
