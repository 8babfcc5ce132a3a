//! The deterministic offline embedder: hashed word, word-bigram and character-trigram features.
//!
//! Each lowercase word is lightly stemmed (a few English suffixes), weighted (stopwords count little),
//! and hashed with FNV-1a into a signed bucket of a fixed-size vector, along with its bigram with the
//! next word and its padded character trigrams (which let "painting" meet "paints"). The vector is
//! L2-normalised by [`super::EmbedService`]. Same text, same vector, on every machine — a floor for
//! retrieval quality and the default until real models are configured.

use super::{EmbedError, Embedder, EmbedderIdentity};
use crate::util::fnv::{fnv1a, fnv1a_extend};

const STOPWORDS: &[&str] = &[
    "a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "at", "for", "with", "by", "from", "as", "is", "was", "are", "were",
    "be", "been", "being", "it", "its", "this", "that", "these", "those", "he", "she", "they", "them", "his", "her", "their", "i", "you",
    "we", "me", "my", "your", "our", "do", "does", "did", "has", "have", "had", "what", "when", "where", "who", "whom", "which", "why",
    "how", "would", "could", "should", "will", "can", "about", "into", "than", "then", "so", "if", "not", "no", "yes", "also", "some",
    "any", "there", "here", "after", "before",
];

/// Feature-hashing embedder (see the module doc).
#[derive(Debug, Clone)]
pub struct HashEmbedder {
    identity: EmbedderIdentity,
}

impl Default for HashEmbedder {
    fn default() -> Self {
        Self::new(384)
    }
}

impl HashEmbedder {
    /// An embedder producing `dim`-dimensional vectors.
    pub fn new(dim: usize) -> Self {
        let fingerprint = format!("{:016x}", salted_hash(0, format!("hash-ngram-v1;dim={dim};w=1.0,0.5,0.25;stop=0.1").as_bytes()));
        HashEmbedder { identity: EmbedderIdentity { name: "hash-ngram-v1".into(), dim, fingerprint } }
    }

    /// Embeds one text (not normalised).
    pub fn embed_one(&self, text: &str) -> Vec<f32> {
        let dim = self.identity.dim;
        let mut v = vec![0.0f32; dim];
        let words: Vec<String> =
            text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()).map(|w| stem(&w.to_lowercase())).collect();
        let mut add = |mut h: u64, w: f32| {
            let idx = (h % dim as u64) as usize;
            h >>= 63;
            v[idx] += if h == 1 { -w } else { w };
        };
        for (i, w) in words.iter().enumerate() {
            let stop = STOPWORDS.contains(&w.as_str());
            let weight = if stop { 0.1 } else { 1.0 };
            add(salted_hash(1, w.as_bytes()), weight);
            if let Some(next) = words.get(i + 1) {
                add(bigram_hash(w, next), if stop { 0.05 } else { 0.5 });
            }
            if !stop {
                let padded: Vec<char> = std::iter::once('#').chain(w.chars()).chain(std::iter::once('#')).collect();
                let mut buf = String::new();
                for tri in padded.windows(3) {
                    buf.clear();
                    buf.extend(tri);
                    add(salted_hash(3, buf.as_bytes()), 0.25);
                }
            }
        }
        v
    }
}

impl Embedder for HashEmbedder {
    fn identity(&self) -> &EmbedderIdentity {
        &self.identity
    }
    /// Feature hashing of a short text takes a few microseconds.
    fn is_cheap(&self) -> bool {
        true
    }
    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbedError> {
        Ok(texts.iter().map(|t| self.embed_one(t)).collect())
    }
}

/// A light suffix stripper so inflections share a unigram feature.
fn stem(w: &str) -> String {
    for suf in ["ing", "edly", "ed", "ies", "es", "ly", "s"] {
        if let Some(root) = w.strip_suffix(suf) {
            if root.chars().count() >= 3 {
                return if suf == "ies" { format!("{root}y") } else { root.to_string() };
            }
        }
    }
    w.to_string()
}

/// FNV-1a of the salt byte then `bytes`, finished with an avalanche (a different hash per feature kind).
fn salted_hash(salt: u8, bytes: &[u8]) -> u64 {
    avalanche(fnv1a_extend(salted(salt), bytes))
}

/// [`salted_hash`] of the bigram `"{w} {next}"`, hashed in three steps rather than formatted first.
fn bigram_hash(w: &str, next: &str) -> u64 {
    avalanche([w.as_bytes(), b" ", next.as_bytes()].iter().fold(salted(2), |h, part| fnv1a_extend(h, part)))
}

/// FNV-1a's state after the salt byte.
fn salted(salt: u8) -> u64 {
    fnv1a(&[salt])
}

/// The final avalanche, so that the low bits (the bucket) depend on every byte.
fn avalanche(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::vector::{dot, normalize};

    fn unit(e: &HashEmbedder, t: &str) -> Vec<f32> {
        let mut v = e.embed_one(t);
        normalize(&mut v);
        v
    }

    #[test]
    fn deterministic_and_sensible() {
        let e = HashEmbedder::default();
        assert_eq!(e.embed_one("Melanie paints sunsets"), e.embed_one("Melanie paints sunsets"));
        let q = unit(&e, "What does Melanie like to paint?");
        let hit = unit(&e, "Melanie enjoys painting sunsets by the lake.");
        let miss = unit(&e, "Caroline attended an LGBTQ support group.");
        assert!(dot(&q, &hit) > dot(&q, &miss) + 0.1, "{} vs {}", dot(&q, &hit), dot(&q, &miss));
    }

    #[test]
    fn identity_is_stable() {
        // A change here changes every stored vector: bump the name when the features change.
        assert_eq!(HashEmbedder::default().identity().name, "hash-ngram-v1");
        assert_eq!(HashEmbedder::default().identity(), HashEmbedder::new(384).identity());
        assert_ne!(HashEmbedder::new(64).identity().fingerprint, HashEmbedder::new(384).identity().fingerprint);
    }

    proptest::proptest! {
        /// A bigram hashed in parts is the hash of the formatted bigram, so no stored vector changes.
        #[test]
        fn a_bigram_hashed_in_parts_is_the_formatted_ones(w in "\\PC{0,12}", next in "\\PC{0,12}") {
            proptest::prop_assert_eq!(bigram_hash(&w, &next), salted_hash(2, format!("{w} {next}").as_bytes()));
        }
    }
}
