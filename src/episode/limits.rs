//! Server-wide caps and defaults for episodes, and the clock the idle reaper reads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::tools::ToolLimits;

/// Caps and defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    /// Open episodes at most (CreateEpisode beyond → ResourceExhausted).
    pub max_open_episodes: usize,
    /// Step budget when the request sets none.
    pub default_max_steps: u32,
    /// Largest step budget a request may ask for.
    pub max_steps_cap: u32,
    /// Episodes untouched this long are closed by the reaper.
    pub idle_ttl: Duration,
    /// The ids of closed and reaped episodes are remembered (not reusable) this long.
    pub forget_closed_after: Duration,
    /// At most this many such ids are remembered (oldest forgotten first).
    pub max_closed_ids: usize,
    /// Most initial memories a custom episode may bring.
    pub max_custom_memories: usize,
    /// Per-call caps of the tools.
    pub tools: ToolLimits,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_open_episodes: 16_384,
            default_max_steps: 30,
            max_steps_cap: 1_000,
            idle_ttl: Duration::from_secs(600),
            forget_closed_after: Duration::from_secs(3_600),
            max_closed_ids: 100_000,
            max_custom_memories: 5_000,
            tools: ToolLimits::default(),
        }
    }
}

/// Milliseconds on a monotonic clock. Behind a trait so reaper tests can move time by hand.
pub trait Clock: Send + Sync + 'static {
    /// Now, in milliseconds since an arbitrary origin.
    fn now_ms(&self) -> u64;
}

/// The real monotonic clock.
#[derive(Debug)]
pub struct SystemClock(Instant);

impl Default for SystemClock {
    fn default() -> Self {
        SystemClock(Instant::now())
    }
}

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        self.0.elapsed().as_millis() as u64
    }
}

/// A clock moved by hand (tests).
#[derive(Debug, Default)]
pub struct ManualClock(AtomicU64);

impl ManualClock {
    /// Moves the clock forward.
    pub fn advance(&self, d: Duration) {
        self.0.fetch_add(d.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}
