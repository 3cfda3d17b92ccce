//! `--format pretty`: the transcript as text for a person reading a run.
//!
//! The same events as the JSON Lines, in the same order, but laid out to answer "what did the
//! model see at step 7?": each request lists its tools and every message with its role and
//! parts; media show as `[image: URL MEDIA_TYPE N bytes]` markers, never as base64.

use std::fmt::Write as _;

use serde_json::Value;

use crate::transcript::{
    Attachment, CatalogEntry, Event, Media, Message, Part, RequestEvent, ToolResultEvent,
};

/// Renders one event, ending with a newline. Control characters other than newline and tab
/// (a tool's output may carry terminal escape sequences) are shown escaped, as `\u{1b}`, so
/// printing a transcript never drives the terminal (issue 13).
pub(crate) fn render_event(event: &Event) -> String {
    escape_controls(&render_raw(event))
}

/// Every control character but `\n` and `\t` as a visible `\u{…}` escape.
fn escape_controls(text: &str) -> String {
    if !text.chars().any(is_unsafe_control) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_unsafe_control(c) {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

fn is_unsafe_control(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// A writer that shows every control character but `\n` and `\t` escaped, like
/// [`render_event`], whatever is written through it: `ishiki chat` prints provider text, tool
/// names, file contents and errors through one, so none of them can set the window title,
/// clear the screen or write the clipboard (OSC, CSI, OSC 52). A UTF-8 sequence split across
/// writes is held until it is whole (C1 controls such as U+009B are two bytes); invalid bytes
/// are shown as U+FFFD.
#[derive(Debug)]
pub(crate) struct EscapingWriter<W> {
    inner: W,
    pending: Vec<u8>,
}

impl<W: std::io::Write> EscapingWriter<W> {
    pub(crate) fn new(inner: W) -> Self {
        Self {
            inner,
            pending: Vec::new(),
        }
    }

    fn drain(&mut self, whole: bool) -> std::io::Result<()> {
        let mut text = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(valid) => {
                    text.push_str(valid);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    text.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        Some(bad) => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            rest = &after[bad..];
                        }
                        // An incomplete sequence at the end: wait for its other bytes.
                        None if !whole => {
                            rest = after;
                            break;
                        }
                        None => {
                            text.push(char::REPLACEMENT_CHARACTER);
                            rest = &[];
                            break;
                        }
                    }
                }
            }
        }
        let held = rest.to_vec();
        self.pending = held;
        self.inner.write_all(escape_controls(&text).as_bytes())
    }
}

impl<W: std::io::Write> std::io::Write for EscapingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.pending.extend_from_slice(buf);
        self.drain(false)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.drain(true)?;
        self.inner.flush()
    }
}

fn render_raw(event: &Event) -> String {
    let mut out = String::new();
    match event {
        Event::Inbound(e) => {
            let _ = writeln!(out, "── user message {} ──", e.id);
            if e.images.is_empty() {
                out.push_str("  (no images)\n");
            }
            for a in &e.images {
                let _ = writeln!(out, "  {}", attachment(a));
            }
        }
        Event::Request(e) => request(&mut out, e),
        Event::ModelFailed(e) => {
            let _ = writeln!(out, "── step {} · model failed ──\n  {}", e.step, e.reason);
        }
        Event::ToolResult(e) => tool_result(&mut out, e),
        Event::Sent(e) => {
            let _ = writeln!(out, "── step {} · sent by {} ──", e.step, e.call_id);
            for m in &e.messages {
                out.push_str("  message:\n");
                indent(&mut out, "    ", m);
            }
            for d in &e.dropped {
                let _ = writeln!(out, "  dropped {}: {}", d.src, d.reason);
            }
        }
        Event::Error(e) => {
            let _ = writeln!(out, "── error {} ──", e.code);
            indent(&mut out, "  ", &e.message);
        }
        Event::End(e) => {
            let _ = writeln!(out, "── end · {} steps ──", e.steps);
        }
    }
    out
}

/// Renders a whole transcript (the runner renders event by event).
#[cfg(test)]
fn render(events: &[Event]) -> String {
    events.iter().map(render_event).collect()
}

fn request(out: &mut String, e: &RequestEvent) {
    let _ = writeln!(out, "── step {} · request ──", e.step);
    let names: Vec<&str> = e.request.tools.iter().map(|t| t.name.as_str()).collect();
    let _ = writeln!(
        out,
        "tools: {}",
        if names.is_empty() {
            "(none)".to_owned()
        } else {
            names.join(", ")
        }
    );
    for m in &e.request.messages {
        message(out, m);
    }
}

fn message(out: &mut String, m: &Message) {
    let _ = writeln!(out, "[{}] {} · {}", m.role.as_str(), m.id, m.created_at);
    for p in &m.content {
        match p {
            Part::Text { text } => indent(out, "  ", text),
            Part::Image(media) => {
                let _ = writeln!(out, "  {}", media_marker("image", media));
            }
            Part::Audio(media) => {
                let _ = writeln!(out, "  {}", media_marker("audio", media));
            }
            Part::ToolCall { id, name, input } => {
                let _ = writeln!(out, "  → call {id} {name} {}", compact(input));
            }
            Part::ToolResult {
                call_id,
                is_error,
                text,
            } => {
                let _ = writeln!(
                    out,
                    "  ← result {call_id}{}",
                    if *is_error { " (error)" } else { "" }
                );
                indent(out, "    ", text);
            }
            Part::CatalogDelta { added } => {
                out.push_str("  + tools now in the catalog:\n");
                for entry in added {
                    catalog_entry(out, entry);
                }
            }
            Part::Reasoning(r) => {
                let _ = writeln!(out, "  ⋯ reasoning ({} {})", r.provider, r.model);
            }
            Part::Compaction(c) => {
                let _ = writeln!(out, "  ⋯ compaction ({} {})", c.provider, c.model);
                if let Some(summary) = &c.summary {
                    indent(out, "    ", summary);
                }
            }
        }
    }
}

fn catalog_entry(out: &mut String, e: &CatalogEntry) {
    let _ = writeln!(out, "    {} — {}", e.name, e.description);
    if let Some(sig) = &e.signature {
        indent(out, "      ", sig);
    }
}

fn tool_result(out: &mut String, e: &ToolResultEvent) {
    let _ = writeln!(
        out,
        "── step {} · result of {} ({}){} ──",
        e.step,
        e.call_id,
        e.name,
        if e.is_error { " · error" } else { "" }
    );
    indent(out, "  ", &e.text);
    for a in &e.attachments {
        let _ = writeln!(out, "  {}", attachment(a));
    }
    if let Some(c) = &e.continuation {
        let _ = writeln!(out, "  continue: {}", c.url);
    }
}

fn media_marker(kind: &str, m: &Media) -> String {
    format!("[{kind}: {} {} {} bytes]", m.url, m.media_type, m.bytes)
}

fn attachment(a: &Attachment) -> String {
    let kind = a.media_type.split('/').next().unwrap_or("file");
    format!(
        "[{kind}: {} {} {} bytes, {}]",
        a.url,
        a.media_type,
        a.bytes,
        a.lifetime.as_str()
    )
}

fn compact(v: &Value) -> String {
    v.to_string()
}

/// Each line of `text` behind `prefix`; an empty text still shows as one empty line.
fn indent(out: &mut String, prefix: &str, text: &str) {
    if text.is_empty() {
        let _ = writeln!(out, "{prefix}(empty)");
        return;
    }
    for line in text.split('\n') {
        let _ = writeln!(out, "{prefix}{line}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transcript::sample_events;

    #[test]
    fn terminal_escape_sequences_written_through_the_escaping_writer_never_reach_the_terminal() {
        use std::io::Write as _;
        let mut out = EscapingWriter::new(Vec::new());
        // Window title (OSC 0), clipboard write (OSC 52), screen clear (CSI 2J), the 8-bit CSI
        // U+009B split across two writes, and an invalid byte.
        writeln!(
            out,
            "a\u{1b}]0;pwned\u{7}b\u{1b}]52;c;aGk=\u{7}c\u{1b}[2J\td"
        )
        .expect("write");
        let csi = "\u{9b}".as_bytes();
        out.write_all(&csi[..1]).expect("write");
        out.write_all(&csi[1..]).expect("write");
        out.write_all(b"31m\xffe").expect("write");
        out.flush().expect("flush");
        let shown = String::from_utf8(out.inner).expect("utf-8");
        assert_eq!(
            shown,
            "a\\u{1b}]0;pwned\\u{7}b\\u{1b}]52;c;aGk=\\u{7}c\\u{1b}[2J\td\n\\u{9b}31m\u{fffd}e"
        );
    }

    #[test]
    fn pretty_transcript_reads_for_a_person() {
        let text = render(&sample_events());
        assert!(!text.contains("iVBORw0KGgo="), "base64 leaked:\n{text}");
        insta::assert_snapshot!(text);
    }

    #[test]
    fn pretty_output_shows_terminal_escapes_from_tool_output_escaped() {
        let event = Event::Error(crate::transcript::ErrorEvent {
            code: "tool".to_owned(),
            message: "red \u{1b}[31mtext\u{1b}[0m, bell \u{7}, csi \u{9b}2J\tand a tab".to_owned(),
        });
        let text = render_event(&event);
        assert!(!text.chars().any(is_unsafe_control), "{text:?}");
        assert_eq!(
            text,
            "── error tool ──\n  red \\u{1b}[31mtext\\u{1b}[0m, bell \\u{7}, csi \\u{9b}2J\tand a tab\n"
        );
    }

    #[test]
    fn writer_prints_pretty_when_asked() {
        let mut w = crate::transcript::TranscriptWriter::new(
            Vec::new(),
            crate::transcript::Format::Pretty,
            crate::transcript::Data::Include,
        );
        for e in sample_events() {
            w.emit(e).expect("vec");
        }
        let printed = String::from_utf8(w.into_inner()).expect("utf-8");
        assert_eq!(printed, render(&sample_events()));
    }
}
