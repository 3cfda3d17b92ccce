//! A bounded parser of `text/event-stream` (the WHATWG "server-sent events" format), for the
//! older HTTP+SSE transport (`sse_transport.rs`).
//!
//! Bytes go in as they arrive, cut anywhere; whole events come out. Lines end with CRLF, LF or
//! CR (a CR at the end of one chunk and an LF at the start of the next are one line end); a
//! UTF-8 BOM at the start of the stream is skipped; `:` starts a comment; `event` and `data` are
//! the fields read (one space after the colon is dropped); `id`, `retry` and any other field
//! are ignored (no resumption; Ishiki reconnects on its own schedule). An event is dispatched at an
//! empty line when it has data; what is left at the end of the stream is discarded, as the
//! format says.
//!
//! Bounded: one line and one event (its data and type) hold at most `max` bytes; past that
//! [`Parser::feed`] fails and what was read of them is dropped, so a line without end or an
//! event that never ends cannot grow the host.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    /// Its type: the last `event` field, `message` when there was none.
    pub(crate) event: String,
    /// Its `data` lines joined with `\n`.
    pub(crate) data: String,
}

/// What went past the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TooLong {
    /// One line (no line end within the limit).
    Line,
    /// One event (its data lines together).
    Event,
}

/// The parser's state between chunks.
#[derive(Debug)]
pub(crate) struct Parser {
    max: usize,
    /// The line read so far (without its end).
    line: Vec<u8>,
    /// The last chunk ended with CR: an LF that starts the next one ends nothing.
    after_cr: bool,
    /// Whether the first line is still being read (it may start with a BOM).
    first: bool,
    event: String,
    data: String,
    /// Whether a `data` field was seen in this event.
    has_data: bool,
}

impl Parser {
    /// A parser holding at most `max` bytes of one line or one event.
    pub(crate) fn new(max: usize) -> Parser {
        Parser {
            max,
            line: Vec::new(),
            after_cr: false,
            first: true,
            event: String::new(),
            data: String::new(),
            has_data: false,
        }
    }

    /// Reads `chunk`, pushing every event it completes onto `out`. After an `Err` the parser
    /// must not be fed again (the stream is to be closed).
    pub(crate) fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) -> Result<(), TooLong> {
        // An empty chunk between a CR and its LF changes nothing.
        if self.after_cr && !chunk.is_empty() {
            self.after_cr = false;
            if let Some(rest) = chunk.strip_prefix(b"\n") {
                chunk = rest;
            }
        }
        while !chunk.is_empty() {
            let Some(end) = chunk.iter().position(|b| matches!(b, b'\r' | b'\n')) else {
                return self.extend_line(chunk);
            };
            self.extend_line(&chunk[..end])?;
            let terminator = chunk[end];
            chunk = &chunk[end + 1..];
            if terminator == b'\r' {
                match chunk.first() {
                    Some(b'\n') => chunk = &chunk[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
            self.end_line(out)?;
        }
        Ok(())
    }

    fn extend_line(&mut self, bytes: &[u8]) -> Result<(), TooLong> {
        if self.line.len().saturating_add(bytes.len()) > self.max {
            self.line = Vec::new();
            return Err(TooLong::Line);
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    /// One whole line: a field, a comment, or the empty line that dispatches the event.
    fn end_line(&mut self, out: &mut Vec<Event>) -> Result<(), TooLong> {
        let mut line = std::mem::take(&mut self.line);
        if std::mem::take(&mut self.first) && line.starts_with(b"\xEF\xBB\xBF") {
            line.drain(..3);
        }
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|b| *b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        let value = String::from_utf8_lossy(value);
        // The event's size as this field would leave it, checked before it grows.
        let after = match field {
            b"event" => self.data.len().saturating_add(value.len()),
            b"data" => (self.data.len() + self.event.len()).saturating_add(value.len() + 1),
            _ => 0,
        };
        if after > self.max {
            self.data = String::new();
            self.event = String::new();
            return Err(TooLong::Event);
        }
        match field {
            b"event" => self.event = value.into_owned(),
            b"data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.has_data = true;
                self.data.push_str(&value);
            }
            // `id` and `retry` are read and ignored: the transport does not resume a stream
            // (the 2024-11-05 revision has no resumption) and reconnects on its own schedule.
            // Not kept, so an `id` cannot be carried into every later event.
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) {
        let event = std::mem::take(&mut self.event);
        let data = std::mem::take(&mut self.data);
        if !std::mem::take(&mut self.has_data) {
            return;
        }
        out.push(Event {
            event: if event.is_empty() {
                "message".to_owned()
            } else {
                event
            },
            data,
        });
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn events(chunks: &[&[u8]], max: usize) -> Result<Vec<Event>, TooLong> {
        let mut parser = Parser::new(max);
        let mut out = Vec::new();
        for chunk in chunks {
            parser.feed(chunk, &mut out)?;
        }
        Ok(out)
    }

    fn event(kind: &str, data: &str) -> Event {
        Event {
            event: kind.to_owned(),
            data: data.to_owned(),
        }
    }

    #[test]
    fn fields_comments_and_every_line_end_are_read() {
        let stream = b"\xEF\xBB\xBF: a comment\r\nevent: endpoint\r\ndata: /message?s=1\r\n\r\n\
                       id: 7\nretry: 1000\ndata:{\"a\":\ndata: 1}\n\nevent:x\rdata\r\r\
                       unknown: field\ndata: y\n\n";
        assert_eq!(
            events(&[stream], 1024),
            Ok(vec![
                event("endpoint", "/message?s=1"),
                event("message", "{\"a\":\n1}"),
                event("x", ""),
                event("message", "y"),
            ])
        );
    }

    #[test]
    fn an_event_without_data_is_not_dispatched_and_an_unfinished_one_is_dropped() {
        assert_eq!(
            events(&[b"event: endpoint\n\ndata: cut off"], 1024),
            Ok(vec![])
        );
    }

    #[test]
    fn a_cr_at_the_end_of_a_chunk_and_an_lf_after_it_are_one_line_end_even_with_an_empty_chunk_between()
     {
        assert_eq!(
            events(&[b"data: a\r", b"", b"\ndata: b\r", b"\r"], 1024),
            Ok(vec![event("message", "a\nb")])
        );
    }

    #[test]
    fn a_line_without_end_fails_at_the_limit_without_being_kept() {
        let mut parser = Parser::new(16);
        let mut out = Vec::new();
        assert_eq!(parser.feed(b"data: 0123456789", &mut out), Ok(()));
        assert_eq!(parser.feed(b"abc", &mut out), Err(TooLong::Line));
        assert!(parser.line.capacity() <= 16);
    }

    #[test]
    fn an_id_at_the_line_limit_is_not_carried_into_the_events_after_it() {
        // One id as long as a line may be, then a chunk of empty events: what comes out is
        // the events' own few bytes, not the id once per event.
        let max = 64 * 1024;
        let mut stream = format!("id: {}\n", "i".repeat(max - 8)).into_bytes();
        stream.extend(b"data:\n\n".repeat(1000));
        let out = events(&[&stream], max).expect("within the limit");
        assert_eq!(out.len(), 1000);
        let held: usize = out.iter().map(|e| e.event.len() + e.data.len()).sum();
        assert_eq!(held, 1000 * "message".len());
    }

    #[test]
    fn an_event_of_many_short_lines_fails_at_the_limit() {
        let line = b"data: 0123456789\n".repeat(10);
        assert_eq!(events(&[&line], 64), Err(TooLong::Event));
        // The same lines split into events of their own are fine.
        let split = b"data: 0123456789\n\n".repeat(10);
        assert_eq!(events(&[&split], 64).map(|e| e.len()), Ok(10));
    }

    /// A valid stream of one event per payload, each with every kind of line end, comments,
    /// fields, and two `data` lines with its type between them (so a line end taken for two
    /// would dispatch it early, cut and untyped).
    fn stream(payloads: &[(String, String, u8)]) -> Vec<u8> {
        let mut out = b"\xEF\xBB\xBF".to_vec();
        for (k, (first, second, style)) in payloads.iter().enumerate() {
            let end: &[u8] = match style % 3 {
                0 => b"\n",
                1 => b"\r\n",
                _ => b"\r",
            };
            for line in [
                b": keep-alive".to_vec(),
                format!("id: {k}").into_bytes(),
                format!("data: {first}").into_bytes(),
                format!("event: e{k}").into_bytes(),
                format!("data: {second}").into_bytes(),
                b"retry: 10".to_vec(),
                Vec::new(),
            ] {
                out.extend_from_slice(&line);
                out.extend_from_slice(end);
            }
        }
        out
    }

    proptest! {
        #[test]
        fn any_chunking_of_a_valid_stream_yields_the_same_events(
            payloads in prop::collection::vec(
                ("[a-z{}\":, ]{0,20}", "[a-z{}\":, ]{0,20}", 0u8..3),
                0..8,
            ),
            cuts in prop::collection::vec(0usize..600, 0..30),
        ) {
            let bytes = stream(&payloads);
            let whole = events(&[&bytes], 1024).expect("within the limit");
            prop_assert_eq!(whole.len(), payloads.len());
            for (k, (got, (first, second, _))) in whole.iter().zip(&payloads).enumerate() {
                prop_assert_eq!(&got.data, &format!("{first}\n{second}"));
                prop_assert_eq!(&got.event, &format!("e{k}"));
            }
            let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
            cuts.sort_unstable();
            let mut chunks = Vec::new();
            let mut at = 0;
            for cut in cuts {
                chunks.push(&bytes[at..cut]);
                at = cut;
            }
            chunks.push(&bytes[at..]);
            prop_assert_eq!(events(&chunks, 1024), Ok(whole.clone()));
            let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
            prop_assert_eq!(events(&bytewise, 1024), Ok(whole));
        }
    }
}
