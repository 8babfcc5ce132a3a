//! An episode's trace, packed: every tool call it applied, as GetEpisode returns it, in a few flat buffers.
//!
//! A server holds tens of thousands of open episodes of 30 or more calls each. As a list of
//! [`TraceEntry`] values, each call cost two heap allocations (its arguments and its ids) and a 72-byte
//! entry; packed, a call is 24 bytes of entry plus its arguments' bytes and 4 bytes per id, in buffers that
//! grow by a quarter rather than double ([`crate::util::grow`]).

use super::TraceEntry;
use crate::memory::MemoryId;
use crate::tools::{ToolCall, TOOL_NAMES};
use crate::util::grow::{extra, room};

#[derive(Debug, Clone, Copy)]
struct Packed {
    /// End of this call's arguments in `json`, and of its ids in `ids`.
    json_end: usize,
    ids_end: usize,
    step: u32,
    /// The tool's place in [`TOOL_NAMES`].
    tool: u8,
}

/// The calls an episode applied, in order.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    entries: Vec<Packed>,
    json: String,
    ids: Vec<u32>,
}

impl Trace {
    /// Appends a call.
    pub fn push(&mut self, step: u32, call: &ToolCall, arguments_json: &str, result_ids: &[MemoryId]) {
        if self.json.capacity() - self.json.len() < arguments_json.len() {
            self.json.reserve_exact(extra(self.json.len(), arguments_json.len()));
        }
        self.json.push_str(arguments_json);
        room(&mut self.ids, result_ids.len());
        self.ids.extend(result_ids.iter().map(|m| m.0));
        room(&mut self.entries, 1);
        // TOOL_NAMES has six names: the index fits a byte.
        self.entries.push(Packed { json_end: self.json.len(), ids_end: self.ids.len(), step, tool: call.index() as u8 });
    }

    /// The calls, unpacked.
    pub fn entries(&self) -> Vec<TraceEntry> {
        let (mut json_at, mut ids_at) = (0usize, 0usize);
        self.entries
            .iter()
            .map(|p| {
                let (json_end, ids_end) = (p.json_end, p.ids_end);
                let e = TraceEntry {
                    step: p.step,
                    tool_name: TOOL_NAMES[usize::from(p.tool)],
                    arguments_json: self.json[json_at..json_end].to_string(),
                    result_ids: self.ids[ids_at..ids_end].iter().map(|i| MemoryId(*i)).collect(),
                };
                (json_at, ids_at) = (json_end, ids_end);
                e
            })
            .collect()
    }

    /// Heap bytes held.
    #[cfg(test)]
    pub fn heap_bytes(&self) -> usize {
        self.entries.capacity() * std::mem::size_of::<Packed>() + self.json.capacity() + self.ids.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Unpacking gives back every call as it was pushed, in order.
        #[test]
        fn a_packed_trace_unpacks_to_its_calls(calls in proptest::collection::vec(
            (any::<u32>(), 0usize..3, "\\PC{0,40}", proptest::collection::vec(any::<u32>(), 0..8)), 0..40)) {
            let limits = crate::tools::ToolLimits::default();
            let tools = [("search_memory", r#"{"query": "x"}"#), ("sample_memory", "{}"), ("delete_memory", r#"{"memory_id": "m1"}"#)]
                .map(|(name, args)| crate::tools::llm_calls::parse_call(name, args, &limits).unwrap());
            let mut t = Trace::default();
            for (step, tool, json, ids) in &calls {
                let ids: Vec<MemoryId> = ids.iter().map(|i| MemoryId(*i)).collect();
                t.push(*step, &tools[*tool], json, &ids);
            }
            let want: Vec<TraceEntry> = calls
                .iter()
                .map(|(step, tool, json, ids)| TraceEntry {
                    step: *step,
                    tool_name: tools[*tool].name(),
                    arguments_json: json.clone(),
                    result_ids: ids.iter().map(|i| MemoryId(*i)).collect(),
                })
                .collect();
            prop_assert_eq!(t.entries(), want);
            prop_assert!(t.heap_bytes() >= t.json.len());
        }
    }
}
