//! Settings shared by every criterion bench, so one change tunes them all: 20 samples after a 0.5 s
//! warm-up over 2 s of measurement (enough for stable medians on a noisy 2-core machine, short enough
//! that `cargo test --all-targets`, which runs each bench once, stays fast).

use std::time::Duration;

use criterion::Criterion;

/// The criterion configuration of the memgym benches.
pub fn criterion() -> Criterion {
    Criterion::default().sample_size(20).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2))
}
