//! What `memgym bench` reads about a server process: resident memory and CPU time, from `/proc`.
//!
//! The in-process mode probes its own process (client and server together); the two-process mode
//! probes the spawned `memgym serve` child, so its numbers are the server's alone. Linux only: on
//! another OS (or without `/proc`) the readings are `None` and the report says "n/a". [`RssSampler`]
//! reads the RSS on a timer during the load: its peak, and once a second.

use std::path::PathBuf;
use std::time::{Duration, Instant};

/// `/proc` readings of one process.
#[derive(Debug, Clone)]
pub struct Probe {
    dir: PathBuf,
}

/// Linux reports `utime`/`stime` in clock ticks of `USER_HZ`, which is 100 on every Linux ABI.
const USER_HZ: f64 = 100.0;

impl Probe {
    /// This process.
    pub fn this_process() -> Self {
        Probe { dir: PathBuf::from("/proc/self") }
    }

    /// Process `pid`.
    pub fn pid(pid: u32) -> Self {
        Probe { dir: PathBuf::from(format!("/proc/{pid}")) }
    }

    /// Resident set size in bytes (`VmRSS`).
    pub fn rss_bytes(&self) -> Option<u64> {
        let status = std::fs::read_to_string(self.dir.join("status")).ok()?;
        parse_rss_kib(&status).map(|kib| kib * 1024)
    }

    /// Anonymous memory on transparent huge pages, in bytes (`AnonHugePages` of `smaps_rollup`).
    pub fn anon_huge_bytes(&self) -> Option<u64> {
        let rollup = std::fs::read_to_string(self.dir.join("smaps_rollup")).ok()?;
        parse_kib(&rollup, "AnonHugePages:").map(|kib| kib * 1024)
    }

    /// User + system CPU time in seconds.
    pub fn cpu_secs(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(self.dir.join("stat")).ok()?;
        parse_cpu_ticks(&stat).map(|t| t as f64 / USER_HZ)
    }
}

fn parse_rss_kib(status: &str) -> Option<u64> {
    parse_kib(status, "VmRSS:")
}

/// The value of the `/proc` line that starts with `key` (`key   123 kB`), in KiB.
fn parse_kib(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// `utime + stime` from `/proc/PID/stat`. The command name (field 2) is in parentheses and may hold
/// spaces, so fields are counted after its closing parenthesis: state is field 3, utime 14, stime 15.
fn parse_cpu_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// Samples RSS on a timer: the peak, and one reading per second.
pub struct RssSampler {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<(u64, Vec<(f64, u64)>)>,
}

impl RssSampler {
    pub fn start(probe: Probe) -> Self {
        let (stop, mut stopped) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(async move {
            let t0 = Instant::now();
            let (mut peak, mut timeline) = (0u64, Vec::new());
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            let mut next_second = 0.0;
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = &mut stopped => break,
                }
                let Some(rss) = probe.rss_bytes() else { break };
                peak = peak.max(rss);
                let t = t0.elapsed().as_secs_f64();
                if t >= next_second {
                    timeline.push((t, rss));
                    next_second += 1.0;
                }
            }
            (peak, timeline)
        });
        RssSampler { stop, task }
    }

    pub async fn finish(self) -> (u64, Vec<(f64, u64)>) {
        let _ = self.stop.send(());
        self.task.await.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_formats() {
        assert_eq!(parse_rss_kib("Name:\tmemgym\nVmPeak:\t  9 kB\nVmRSS:\t  123456 kB\n"), Some(123_456));
        assert_eq!(parse_rss_kib("Name: x\n"), None);
        let rollup = "Rss:              812 kB\nAnonymous:        400 kB\nAnonHugePages:   4096 kB\nShmemPmdMapped:     0 kB\n";
        assert_eq!(parse_kib(rollup, "AnonHugePages:"), Some(4096));
        assert_eq!(parse_kib(rollup, "FilePmdMapped:"), None);
        let stat = "4242 (mem gym) S 1 4242 4242 0 -1 4194560 500 0 0 0 731 269 0 0 20 0 9 0 1000 1 1";
        assert_eq!(parse_cpu_ticks(stat), Some(1000));
        assert_eq!(parse_cpu_ticks("garbage"), None);
    }

    #[test]
    fn reads_this_process_on_linux() {
        if !std::path::Path::new("/proc/self/status").exists() {
            return; // not Linux: readings are None by design
        }
        let p = Probe::this_process();
        assert!(p.rss_bytes().is_some_and(|b| b > 1024 * 1024), "a test binary has more than 1 MiB resident");
        assert!(p.cpu_secs().is_some_and(|s| s >= 0.0));
        assert!(p.anon_huge_bytes().is_some(), "smaps_rollup has AnonHugePages (Linux 4.14 on)");
    }
}
