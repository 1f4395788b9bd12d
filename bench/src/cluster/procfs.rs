//! What `/proc/<pid>/stat` says of a process: its parent, its start and the CPU it used.
//! Several parts of `cluster/` ask (who owns a folder, a postmaster's backends, a server's CPU
//! per sale), so the line is parsed here, once.

use std::time::Duration;

/// The fields of one `/proc/<pid>/stat` line lockbench reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// Field 3: `R`, `S`, `Z` …
    pub state: char,
    /// Field 4.
    pub ppid: u32,
    /// Fields 14 and 15, user and system CPU, in clock ticks.
    pub cpu_ticks: u64,
    /// Fields 16 and 17: the CPU of children it waited for, in clock ticks (a postmaster's
    /// backends that ended).
    pub children_ticks: u64,
    /// Field 22, clock ticks after boot.
    pub start: u64,
}

/// The stat line of process `pid`, if it runs.
pub fn stat(pid: u32) -> Option<Stat> {
    parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// The command name (field 2) may hold spaces and parentheses, so fields are counted after its
/// last `)`: field 3 is the first there.
fn parse(line: &str) -> Option<Stat> {
    let f: Vec<&str> = line
        .get(line.rfind(')')? + 1..)?
        .split_whitespace()
        .collect();
    let n = |i: usize| f.get(i - 3)?.parse::<u64>().ok();
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: u32::try_from(n(4)?).ok()?,
        cpu_ticks: n(14)? + n(15)?,
        children_ticks: n(16)? + n(17)?,
        start: n(22)?,
    })
}

/// Every running process: its pid and stat line.
pub fn all() -> Vec<(u32, Stat)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        Some((pid, stat(pid)?))
    })
    .collect()
}

/// `pid` and every process below it in `procs` (a snapshot of [`all`]), `pid` first; empty
/// when `pid` is gone.
fn tree(pid: u32, procs: &[(u32, Stat)]) -> Vec<(u32, Stat)> {
    let Some(root) = procs.iter().find(|(p, _)| *p == pid) else {
        return Vec::new();
    };
    let mut tree = vec![*root];
    let mut i = 0;
    while i < tree.len() {
        let parent = tree[i].0;
        for c in procs.iter().filter(|(c, s)| s.ppid == parent && *c != pid) {
            if !tree.iter().any(|(t, _)| *t == c.0) {
                tree.push(*c);
            }
        }
        i += 1;
    }
    tree
}

/// Clock ticks a second (`CLK_TCK`, 100 on Linux).
pub fn ticks_per_s() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|t| *t > 0)
        .unwrap_or(100) as u64
}

/// The CPU process `pid` and every process below it in `procs` (a snapshot of [`all`]) have
/// used, those that ended and were waited for included (a PostgreSQL server is a postmaster
/// and a process per connection); `None` when `pid` is gone.
pub fn tree_cpu(pid: u32, procs: &[(u32, Stat)]) -> Option<Duration> {
    let tree = tree(pid, procs);
    if tree.is_empty() {
        return None;
    }
    let ticks: u64 = tree
        .iter()
        .map(|(_, s)| s.cpu_ticks + s.children_ticks)
        .sum();
    Some(Duration::from_micros(ticks * 1_000_000 / ticks_per_s()))
}

/// The CPU ticks this process's tree has used, split in two: the processes running this
/// process's own executable (it and its worker processes), and every other process below it
/// (the servers it started). Children waited for count with their parent.
pub fn own_tree_ticks(procs: &[(u32, Stat)]) -> [u64; 2] {
    let exe = |pid: u32| std::fs::read_link(format!("/proc/{pid}/exe")).ok();
    let me = std::process::id();
    let mine = exe(me);
    let mut split = [0, 0];
    for (pid, s) in tree(me, procs) {
        let own = pid == me || (mine.is_some() && exe(pid) == mine);
        split[usize::from(!own)] += s.cpu_ticks + s.children_ticks;
    }
    split
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_with_spaces_and_parentheses_is_skipped() {
        let line = "42 (a (b) c) S 7 42 42 0 -1 4194560 100 0 0 0 250 50 3 4 20 0 1 0 9876 \
                    1000 10 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let s = parse(line).unwrap();
        assert_eq!(
            s,
            Stat {
                state: 'S',
                ppid: 7,
                cpu_ticks: 300,
                children_ticks: 7,
                start: 9876
            }
        );
        assert_eq!(parse("42 (x"), None);
    }

    #[test]
    fn this_process_uses_cpu_and_a_child_s_counts_in_its_tree() {
        let me = std::process::id();
        let s = stat(me).unwrap();
        assert_eq!(s.ppid, nix::unistd::getppid().as_raw() as u32);
        let before = tree_cpu(me, &all()).unwrap();
        // A child that spins ~200 ms of CPU: the tree's total must rise by about that.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; end=$(($(date +%s%N) + 200000000)); while [ $(date +%s%N) -lt $end ]; do i=$((i+1)); done; sleep 5"])
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1500));
        let during = tree_cpu(me, &all()).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(
            during >= before + Duration::from_millis(50),
            "{before:?} → {during:?}"
        );
        assert_eq!(tree_cpu(u32::MAX, &all()), None);
    }

    #[test]
    fn a_child_running_another_program_counts_as_a_server_not_as_the_harness() {
        let before = own_tree_ticks(&all());
        // ~300 ms of CPU in a shell child, ~300 ms in this process.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "end=$(($(date +%s%N) + 300000000)); while [ $(date +%s%N) -lt $end ]; do :; done; sleep 5"])
            .spawn()
            .unwrap();
        let end = std::time::Instant::now() + Duration::from_millis(300);
        let mut x = 0u64;
        while std::time::Instant::now() < end {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        std::thread::sleep(Duration::from_millis(1200));
        let procs = all();
        let after = own_tree_ticks(&procs);
        let shell = procs.iter().find(|(p, _)| *p == child.id()).unwrap().1;
        child.kill().unwrap();
        child.wait().unwrap();
        // 5 ticks (50 ms) of each at least, whatever else the machine runs. The servers' part
        // is judged on the shell itself: another test's child that ended in between moved
        // its ticks to this process's part.
        assert!(after[0] >= before[0] + 5, "own {before:?} → {after:?}");
        let ticks = shell.cpu_ticks + shell.children_ticks;
        assert!(ticks >= 5 && after[1] >= ticks, "{shell:?} in {after:?}");
    }
}
