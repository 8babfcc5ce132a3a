//! ImportBankStream's messages put back together: a library over one gRPC message (32 MiB, about 300,000
//! short experiences) arrives in chunks, and becomes the one `ImportBank` write once the stream ends.
//!
//! The first message names the bank and the options; a later one may repeat them unchanged or leave them
//! unset, and any other value is refused (a client that interleaved two imports on one stream would
//! otherwise write one bank with the other's bytes). The bytes are checked as UTF-8 once, whole: a chunk
//! may end inside a character.

use crate::api::pb;
use crate::banks::BankError;

/// The most bytes one streamed import may hold: the file is held whole before it is parsed.
pub const MAX_IMPORT_BYTES: usize = 1 << 30;

/// The options of the first message and the bytes so far.
#[derive(Debug)]
pub struct Assembly {
    head: Option<Head>,
    data: Vec<u8>,
    /// [`MAX_IMPORT_BYTES`] (smaller in the tests).
    limit: usize,
}

impl Default for Assembly {
    fn default() -> Self {
        Assembly { head: None, data: Vec::new(), limit: MAX_IMPORT_BYTES }
    }
}

/// What the first message set.
#[derive(Debug)]
struct Head {
    bank: String,
    format: i32,
    replace: bool,
    expected_version: Option<u64>,
}

impl Assembly {
    /// Takes the next message.
    pub fn push(&mut self, chunk: pb::ImportBankChunk) -> Result<(), BankError> {
        let pb::ImportBankChunk { bank, format, data, replace, expected_version } = chunk;
        match &self.head {
            None => {
                if bank.is_empty() {
                    return Err(BankError::invalid("bank", "is required in the first message of ImportBankStream"));
                }
                self.head = Some(Head { bank, format, replace, expected_version });
            }
            Some(h) => {
                let differs = |field: &str| {
                    BankError::invalid(field, "differs from the first message of the stream (set it there only, or repeat it unchanged)")
                };
                if !bank.is_empty() && bank != h.bank {
                    return Err(differs("bank"));
                }
                if format != 0 && format != h.format {
                    return Err(differs("format"));
                }
                if replace && !h.replace {
                    return Err(differs("replace"));
                }
                if expected_version.is_some() && expected_version != h.expected_version {
                    return Err(differs("expected_version"));
                }
            }
        }
        if self.data.len().saturating_add(data.len()) > self.limit {
            return Err(BankError::ResourceExhausted { message: format!("data: a streamed import holds at most {} bytes", self.limit) });
        }
        self.data.extend_from_slice(&data);
        Ok(())
    }

    /// The import the stream described, once it has ended.
    pub fn finish(self) -> Result<pb::ImportBankRequest, BankError> {
        let Some(h) = self.head else {
            return Err(BankError::invalid("bank", "ImportBankStream ended before its first message"));
        };
        let data = String::from_utf8(self.data)
            .map_err(|e| BankError::invalid("data", format!("is not UTF-8: invalid bytes at offset {}", e.utf8_error().valid_up_to())))?;
        Ok(pb::ImportBankRequest { bank: h.bank, format: h.format, data, replace: h.replace, expected_version: h.expected_version })
    }
}

/// A library file as the messages of an ImportBankStream: `size` bytes each (the last one shorter), the
/// first naming the bank and the format. What a Rust client sends (the bench, the tests).
pub fn import_chunks(bank: &str, format: pb::BankFormat, data: &[u8], size: usize) -> Vec<pb::ImportBankChunk> {
    data.chunks(size.max(1))
        .enumerate()
        .map(|(k, c)| pb::ImportBankChunk {
            bank: if k == 0 { bank.to_string() } else { String::new() },
            format: if k == 0 { format as i32 } else { 0 },
            data: c.to_vec(),
            ..Default::default()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn chunk(bank: &str, data: &[u8]) -> pb::ImportBankChunk {
        pb::ImportBankChunk { bank: bank.into(), format: pb::BankFormat::UpstreamJson as i32, data: data.to_vec(), ..Default::default() }
    }

    proptest! {
        /// Any split of a UTF-8 file, through characters too, gives the file back, with the first message's
        /// options; later messages may repeat them or leave them out.
        #[test]
        fn any_split_gives_the_file_back(text in "\\PC{0,200}", cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..8), repeat in any::<bool>()) {
            let bytes = text.as_bytes();
            let mut at: Vec<usize> = cuts.iter().map(|c| c.index(bytes.len() + 1)).collect();
            at.push(0);
            at.push(bytes.len());
            at.sort_unstable();
            let mut a = Assembly::default();
            for (k, w) in at.windows(2).enumerate() {
                let mut c = chunk(if k == 0 || repeat { "b" } else { "" }, &bytes[w[0]..w[1]]);
                if k > 0 && !repeat {
                    c.format = 0;
                }
                a.push(c).expect("a valid chunk");
            }
            let r = a.finish().expect("a valid stream");
            prop_assert_eq!(r.data, text);
            prop_assert_eq!(r.bank, "b");
            prop_assert_eq!(r.format, pb::BankFormat::UpstreamJson as i32);
        }
    }

    #[test]
    fn refusals_name_the_field() {
        let field = |e: BankError| e.to_string();
        let mut a = Assembly::default();
        assert!(field(a.push(chunk("", b"{}")).unwrap_err()).contains("bank"));
        assert!(field(Assembly::default().finish().unwrap_err()).contains("bank"));
        let mut a = Assembly::default();
        a.push(chunk("one", b"{")).expect("first");
        assert!(field(a.push(chunk("two", b"}")).unwrap_err()).contains("bank"));
        let mut c = chunk("one", b"}");
        c.format = pb::BankFormat::SeedJson as i32;
        assert!(field(a.push(c).unwrap_err()).contains("format"));
        let c = pb::ImportBankChunk { expected_version: Some(3), ..chunk("", b"") };
        assert!(field(a.push(c).unwrap_err()).contains("expected_version"));
        let c = pb::ImportBankChunk { replace: true, ..chunk("", b"") };
        assert!(field(a.push(c).unwrap_err()).contains("replace"));
        let mut a = Assembly::default();
        a.push(chunk("one", &[b'{', 0xE2, 0x82])).expect("first");
        let e = field(a.finish().unwrap_err());
        assert!(e.contains("data") && e.contains("offset 1"), "{e}");
        let mut a = Assembly { limit: 4, ..Assembly::default() };
        a.push(chunk("one", b"xyz")).expect("under the cap");
        a.push(chunk("", b"x")).expect("up to the cap");
        let e = a.push(chunk("", b"y")).unwrap_err();
        assert!(matches!(&e, BankError::ResourceExhausted { .. }) && e.to_string().contains("data"), "{e}");
        assert_eq!(Assembly::default().limit, MAX_IMPORT_BYTES);
    }
}
