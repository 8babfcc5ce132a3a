//! What an open episode holds, counted in the bytes its own parts allocate after 30 calls that each write a
//! memory: the issue-42 budget is 65,536 open episodes in 1 GiB of server RSS, 16 KiB each, which only
//! holds if each part costs what it must and no more. The server-wide figure (RSS, allocator and transport
//! included) is `memgym bench --spawn-server`'s, in the book's Benchmarks chapter.

use super::*;

#[tokio::test]
async fn an_episode_holds_its_writes_in_half_precision_and_a_packed_trace() {
    let env = env();
    env.create_episode(locomo("fp", "conv-26:q0")).await.unwrap();
    let mut written = Vec::new();
    for i in 0..30 {
        let text = format!("Caroline told Melanie about the support group meeting number {i} and the art show after it");
        let r = env.call_tool("fp", call("manage_memory", &format!(r#"{{"operation": "create", "content": "{text}"}}"#))).await.unwrap();
        written.push(r.output.result_ids()[0]);
    }
    let entry = env.entry("fp").unwrap();
    let ep = entry.episode.lock().await;
    assert_eq!(ep.memory.changed_count(), 30);
    let (overlay, trace) = (ep.memory.overlay_bytes(), ep.trace.heap_bytes());
    // Each written memory costs its vector in half precision (768 bytes; 1,536 in f32), its text and a
    // bounded record: no doubled buffers.
    let texts: usize = written.iter().map(|id| ep.memory.get(*id).unwrap().text.len()).sum();
    let per_record = 320;
    assert!(overlay <= 30 * 384 * 2 + texts + 30 * per_record, "overlay {overlay} B for {texts} B of text");
    // The trace costs its calls' canonical arguments (no nulls) and a small entry per call.
    let args: usize = ep.trace.entries().iter().map(|e| e.arguments_json.len()).sum();
    assert!(!ep.trace.entries().iter().any(|e| e.arguments_json.contains("null")));
    assert!(trace <= args * 3 / 2 + 30 * 48 + 64, "trace {trace} B for {args} B of arguments");
    // A record's vector decodes to the half-precision rounding of its text's embedding, as M₀'s would.
    let id = *written.last().unwrap();
    let text = ep.memory.get(id).unwrap().text.clone();
    let mut want = env.embed.embed(vec![text]).await.unwrap().remove(0);
    crate::memory::half::round(&mut want);
    assert_eq!(ep.memory.vector(id).unwrap().as_ref(), want.as_slice());
}
