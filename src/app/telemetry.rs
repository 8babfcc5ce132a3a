//! Tracing setup: one fmt subscriber, filtered by `RUST_LOG` (default `info`, with noisy transport
//! crates quieted).

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber (once; later calls are no-ops).
pub fn init() {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,h2=error,tower=warn,hyper=warn,rmcp=warn"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_target(false).with_ansi(ansi).with_writer(std::io::stderr).try_init();
}
