//! The HNSW search beam, and the rule by which it grows with the graph.
//!
//! A graph search keeps its `ef` best candidates; a wider beam finds more of the true top k (recall) for
//! proportionally more distance computations (latency). One beam does not fit every size. Measured on this
//! project's 2-core machine (`memgym bench banks --ef-sweep`, the Banks chapter's runs 10–14), `ef` 64 gives
//! recall@10 above 0.96 up to 200,000 experiences but 0.925–0.939 at 1,000,000, where 96 gave 0.949–0.962
//! and 112 gave 0.962–0.963 (p99 1.53–1.91 ms) on each graph measured. A fixed 112 would cost every
//! smaller bank latency for recall it already has. So the default beam grows with the logarithm of the
//! graph's size, as an HNSW search's path does: [`SearchBeam::Auto`]. A fixed beam stays available
//! (`--banks-hnsw-ef-search 96`), and is what the bench's sweep measures.

use std::fmt;
use std::str::FromStr;

/// How wide a graph search's beam is (before it is raised to 2·k for a larger k).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SearchBeam {
    /// The same beam at every size.
    Fixed(usize),
    /// [`AUTO_BASE`] up to [`AUTO_FROM`] nodes, then [`AUTO_PER_FIVEFOLD`] more for each fivefold growth
    /// (112 at 1,000,000), never above [`AUTO_MAX`]. The default.
    #[default]
    Auto,
}

/// The automatic beam at or below [`AUTO_FROM`] nodes.
pub const AUTO_BASE: usize = 64;
/// The graph size up to which the automatic beam is [`AUTO_BASE`].
pub const AUTO_FROM: usize = 200_000;
/// How much the automatic beam widens for each fivefold growth past [`AUTO_FROM`].
pub const AUTO_PER_FIVEFOLD: f64 = 48.0;
/// The automatic beam's ceiling.
pub const AUTO_MAX: usize = 512;
/// The widest beam a caller may set (`--banks-hnsw-ef-search`, the bench's `--ef-sweep`).
pub const MAX_BEAM: usize = 4_096;

impl SearchBeam {
    /// The beam a search of a graph of `nodes` nodes uses.
    pub fn for_nodes(self, nodes: usize) -> usize {
        match self {
            SearchBeam::Fixed(ef) => ef,
            SearchBeam::Auto if nodes <= AUTO_FROM => AUTO_BASE,
            SearchBeam::Auto => {
                let fivefolds = (nodes as f64 / AUTO_FROM as f64).ln() / 5f64.ln();
                let ef = AUTO_BASE as f64 + AUTO_PER_FIVEFOLD * fivefolds;
                (ef.round() as usize).min(AUTO_MAX)
            }
        }
    }
}

impl FromStr for SearchBeam {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        if t.eq_ignore_ascii_case("auto") {
            return Ok(SearchBeam::Auto);
        }
        let prefix: String = t.chars().take(16).collect();
        match t.parse::<usize>() {
            Ok(ef) if (1..=MAX_BEAM).contains(&ef) => Ok(SearchBeam::Fixed(ef)),
            Ok(_) => Err(format!("search beam {prefix} is out of range (expected auto or 1..={MAX_BEAM})")),
            Err(_) => Err(format!("search beam {prefix:?} is not a number (expected auto or 1..={MAX_BEAM})")),
        }
    }
}

impl fmt::Display for SearchBeam {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SearchBeam::Fixed(ef) => write!(f, "{ef}"),
            SearchBeam::Auto => f.write_str("auto"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_automatic_beam_is_64_to_200_000_nodes_and_112_at_a_million() {
        for n in [0, 1, 2_000, 100_000, AUTO_FROM] {
            assert_eq!(SearchBeam::Auto.for_nodes(n), AUTO_BASE, "{n} nodes");
        }
        assert_eq!(SearchBeam::Auto.for_nodes(1_000_000), 112);
        assert_eq!(SearchBeam::Auto.for_nodes(usize::MAX), AUTO_MAX);
        assert_eq!(SearchBeam::Fixed(96).for_nodes(1_000_000), 96);
    }

    #[test]
    fn a_beam_reads_auto_or_a_number_in_range_and_names_what_is_wrong() {
        assert_eq!("auto".parse::<SearchBeam>(), Ok(SearchBeam::Auto));
        assert_eq!(" AUTO ".parse::<SearchBeam>(), Ok(SearchBeam::Auto));
        assert_eq!("96".parse::<SearchBeam>(), Ok(SearchBeam::Fixed(96)));
        let zero = "0".parse::<SearchBeam>().unwrap_err();
        assert!(zero.contains("out of range"), "{zero}");
        let long = "x".repeat(1_000).parse::<SearchBeam>().unwrap_err();
        assert!(long.contains("not a number") && long.len() < 120, "{long}");
    }

    proptest! {
        #[test]
        fn the_automatic_beam_never_narrows_as_the_graph_grows(a in 0usize..50_000_000, b in 0usize..50_000_000) {
            let (small, large) = (a.min(b), a.max(b));
            prop_assert!(SearchBeam::Auto.for_nodes(small) <= SearchBeam::Auto.for_nodes(large));
            prop_assert!((AUTO_BASE..=AUTO_MAX).contains(&SearchBeam::Auto.for_nodes(large)));
        }

        #[test]
        fn a_beam_prints_as_it_reads(ef in 1usize..=MAX_BEAM, auto in any::<bool>()) {
            let beam = if auto { SearchBeam::Auto } else { SearchBeam::Fixed(ef) };
            prop_assert_eq!(beam.to_string().parse::<SearchBeam>(), Ok(beam));
        }
    }
}
