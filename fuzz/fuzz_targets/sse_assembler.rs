//! SSE bytes → `gyre_api::sse_events` → `MessageAssembler`: never panics, whatever the
//! server sends or however the network splits it.
//!
//! The first byte picks the chunk size the bytes are delivered in (1–64 bytes, the way a
//! network would cut them); the rest is the body of the response.
#![no_main]

use std::convert::Infallible;

use bytes::Bytes;
use futures::StreamExt;
use gyre_api::{Assembled, MessageAssembler, sse_events};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&first, body)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(first % 64) + 1;
    let chunks: Vec<Result<Bytes, Infallible>> = body
        .chunks(chunk)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    futures::executor::block_on(async {
        let events = sse_events(futures::stream::iter(chunks));
        futures::pin_mut!(events);
        let mut assembler = MessageAssembler::new();
        while let Some(event) = events.next().await {
            let Ok(event) = event else {
                // An error ends the attempt, as in the client.
                break;
            };
            // Every event the decoder accepts must serialize again.
            let _ = serde_json::to_string(&event);
            match assembler.push(&event) {
                Ok(Some(Assembled::Message(message))) => {
                    assert!(assembler.is_finished());
                    let _ = serde_json::to_string(&message);
                }
                Ok(Some(Assembled::Block { block, .. })) => {
                    // An invalid tool input is replaced by the marker, never kept raw.
                    if let Some((_, _, input)) = block.as_tool_use() {
                        assert!(input.is_object(), "tool input is not an object: {input}");
                    }
                }
                Ok(None) => {}
                Err(_) => break,
            }
        }
    });
});
