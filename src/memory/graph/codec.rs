//! The HNSW graph as bytes, so that a bank's index can be saved with it and loaded instead of rebuilt
//! (building is the slow part of opening a large bank: minutes at 100,000 experiences, where reading
//! the graph back takes milliseconds).
//!
//! The layout is little-endian: `width`, `top`, `entry` (u32), `n` (u64), layer 0 as `n × width` u32
//! (padded with `u32::MAX`), then per node its upper-layer count (u8) and each upper layer as a u32
//! length and its ids. Decoding checks every length and every id against `n`, so bytes that decode
//! give a graph whose searches cannot index outside the rows; integrity of the bytes themselves
//! (a checksum) is the caller's concern.

use super::{Graph, NONE};

/// The most layers a decoded graph may have (builds use at most 16).
const MAX_LAYERS: usize = 64;
/// The widest layer-0 row a decoded graph may have.
const MAX_WIDTH: usize = 4_096;

/// Why bytes are not a graph over `n` rows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("graph bytes: {0}")]
pub struct Malformed(pub String);

fn put_u32(out: &mut Vec<u8>, x: u32) {
    out.extend_from_slice(&x.to_le_bytes());
}

/// Reads the bytes front to back, every read checked.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize, what: &str) -> Result<&'a [u8], Malformed> {
        if self.bytes.len() < len {
            return Err(Malformed(format!("{what}: {len} bytes wanted, {} left", self.bytes.len())));
        }
        let (head, tail) = self.bytes.split_at(len);
        self.bytes = tail;
        Ok(head)
    }
    fn u8(&mut self, what: &str) -> Result<u8, Malformed> {
        Ok(self.take(1, what)?[0])
    }
    fn u32(&mut self, what: &str) -> Result<u32, Malformed> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, what: &str) -> Result<u64, Malformed> {
        let b = self.take(8, what)?;
        Ok(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    }
    fn ids(&mut self, count: usize, n: usize, what: &str, padded: bool) -> Result<Vec<u32>, Malformed> {
        let bytes = count.checked_mul(4).ok_or_else(|| Malformed(format!("{what}: length overflows")))?;
        let raw = self.take(bytes, what)?;
        let ids: Vec<u32> = raw.chunks_exact(4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        if let Some(bad) = ids.iter().find(|&&id| id as usize >= n && !(padded && id == NONE)) {
            return Err(Malformed(format!("{what}: node {bad} is not below {n}")));
        }
        Ok(ids)
    }
}

impl Graph {
    /// Appends the graph's bytes to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let n = self.upper.len();
        out.reserve(20 + self.layer0.len() * 4 + n);
        put_u32(out, self.width as u32);
        put_u32(out, self.top as u32);
        put_u32(out, self.entry);
        out.extend_from_slice(&(n as u64).to_le_bytes());
        for &x in &self.layer0 {
            put_u32(out, x);
        }
        for layers in &self.upper {
            out.push(layers.len() as u8);
            for layer in layers.iter() {
                put_u32(out, layer.len() as u32);
                for &x in layer.iter() {
                    put_u32(out, x);
                }
            }
        }
    }

    /// Decodes a graph over `n` rows from the front of `bytes`; returns it and the bytes after it.
    pub fn decode(bytes: &[u8], n: usize) -> Result<(Graph, &[u8]), Malformed> {
        let mut r = Reader { bytes };
        let width = r.u32("width")? as usize;
        let top = r.u32("top")? as usize;
        let entry = r.u32("entry")?;
        let nodes = r.u64("node count")?;
        if nodes != n as u64 || n == 0 {
            return Err(Malformed(format!("{nodes} nodes, the rows are {n}")));
        }
        if width == 0 || width > MAX_WIDTH || top >= MAX_LAYERS || entry as usize >= n {
            return Err(Malformed(format!("width {width}, top {top}, entry {entry} out of range")));
        }
        let cells = n.checked_mul(width).ok_or_else(|| Malformed("layer 0 overflows".into()))?;
        let layer0 = r.ids(cells, n, "layer 0", true)?;
        let mut upper = Vec::with_capacity(n);
        for node in 0..n {
            let count = usize::from(r.u8("layer count")?);
            if count > top {
                return Err(Malformed(format!("node {node} has {count} upper layers, the top is {top}")));
            }
            let mut layers = Vec::with_capacity(count);
            for _ in 0..count {
                let len = r.u32("layer length")? as usize;
                if len > MAX_WIDTH {
                    return Err(Malformed(format!("node {node}: a layer of {len} neighbours")));
                }
                layers.push(r.ids(len, n, "upper layer", false)?.into_boxed_slice());
            }
            upper.push(layers.into_boxed_slice());
        }
        if upper[entry as usize].len() != top {
            return Err(Malformed(format!("the entry {entry} is not on the top layer {top}")));
        }
        Ok((Graph::assemble(width, layer0, upper, entry, top), r.bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{build, rows};
    use super::*;
    use crate::memory::base::NoTombstones;
    use proptest::prelude::*;

    #[test]
    fn a_decoded_graph_answers_as_the_built_one() {
        let (dim, n) = (16, 800);
        let v = rows(n + 20, dim, 6, 3);
        let (_, g) = build(&v[..n * dim], dim, true);
        let mut bytes = Vec::new();
        g.encode(&mut bytes);
        bytes.extend_from_slice(b"rest");
        let (back, rest) = Graph::decode(&bytes, n).expect("decodes");
        assert_eq!(rest, b"rest");
        for q in v[n * dim..].chunks_exact(dim) {
            let rows = crate::memory::vectors::VectorRows::Full(&v[..n * dim]);
            assert_eq!(g.search(q, rows, dim, 32, &NoTombstones), back.search(q, rows, dim, 32, &NoTombstones));
        }
        assert!(Graph::decode(&bytes, n + 1).is_err(), "the wrong row count is refused");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// Any truncation or any one changed byte either fails to decode or decodes to a graph whose
        /// every id is below `n` (so a search cannot panic); it never panics itself.
        #[test]
        fn damaged_bytes_never_decode_to_an_unsafe_graph(n in 1usize..60, seed in any::<u64>(), cut in any::<prop::sample::Index>(), at in any::<prop::sample::Index>(), byte in any::<u8>()) {
            let dim = 4;
            let v = rows(n, dim, 2, seed);
            let (_, g) = build(&v, dim, false);
            let mut bytes = Vec::new();
            g.encode(&mut bytes);
            prop_assert!(Graph::decode(&bytes[..cut.index(bytes.len())], n).is_err());
            let i = at.index(bytes.len());
            bytes[i] = byte;
            if let Ok((d, _)) = Graph::decode(&bytes, n) {
                prop_assert!(d.layer0.iter().all(|&x| x == NONE || (x as usize) < n));
                prop_assert!(d.upper.iter().flat_map(|l| l.iter()).flat_map(|l| l.iter()).all(|&x| (x as usize) < n));
                let q = &v[..dim];
                let _ = d.search(q, crate::memory::vectors::VectorRows::Full(&v), dim, 8, &NoTombstones);
            }
        }
    }
}
