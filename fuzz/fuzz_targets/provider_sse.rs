//! The provider stream reader (SEC-3): the SSE parser and each API's stream assembler take any
//! bytes, in any split, without panicking; every event comes from the input, and assembly
//! ends in a body or a clear error.
#![no_main]

use ishiki_provider::{Protocol, StreamEvent};
use ishiki_provider::sse::{MAX_STREAM_ITEMS, SseReader, StreamAssembler};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&control, stream)) = data.split_first() else {
        return;
    };
    // The low bits choose the API, the rest how the stream is cut into pushes.
    let protocol = match control % 3 {
        0 => Protocol::OpenAi,
        1 => Protocol::Anthropic,
        _ => Protocol::OpenAiResponses,
    };
    let chunk = usize::from(control / 3).max(1);

    let mut reader = SseReader::new();
    let mut data_bytes = 0usize;
    for piece in stream.chunks(chunk) {
        match reader.push(piece) {
            Ok(events) => {
                for event in events {
                    data_bytes += event.data.len();
                }
            }
            Err(_) => break,
        }
    }
    // Data lines are joined by one `\n` each, and a byte that is not UTF-8 becomes U+FFFD
    // (three bytes): the events never hold more than three times the input.
    assert!(
        data_bytes <= stream.len().saturating_mul(3),
        "{data_bytes} data bytes from {}",
        stream.len()
    );

    let mut assembler = StreamAssembler::new(protocol);
    let mut calls = 0usize;
    let mut on_event = |event: StreamEvent| {
        if matches!(event, StreamEvent::ToolCall { .. }) {
            calls += 1;
        }
    };
    let mut failed = false;
    for piece in stream.chunks(chunk) {
        if assembler.push(piece, &mut on_event).is_err() {
            failed = true;
            break;
        }
    }
    assert!(calls <= MAX_STREAM_ITEMS, "{calls} tool calls announced");
    if !failed {
        // A body, or an error that says what was wrong: never a panic.
        let _ = assembler.finish();
    }
});
