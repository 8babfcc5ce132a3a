//! What `memgym bench` reads about a server process: resident memory and CPU time, from `/proc`.
//!
//! The in-process mode probes its own process (client and server together); the two-process mode
//! probes the spawned `memgym serve` child, so its numbers are the server's alone. Linux only: on
//! another OS (or without `/proc`) the readings are `None` and the report says "n/a".

use std::path::PathBuf;

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

    /// User + system CPU time in seconds.
    pub fn cpu_secs(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(self.dir.join("stat")).ok()?;
        parse_cpu_ticks(&stat).map(|t| t as f64 / USER_HZ)
    }
}

fn parse_rss_kib(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_formats() {
        assert_eq!(parse_rss_kib("Name:\tmemgym\nVmPeak:\t  9 kB\nVmRSS:\t  123456 kB\n"), Some(123_456));
        assert_eq!(parse_rss_kib("Name: x\n"), None);
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
    }
}
