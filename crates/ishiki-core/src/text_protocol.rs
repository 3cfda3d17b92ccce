//! The text protocol (TP-1): tool calls written in a model's text, for models without native
//! tool calling (`toolCalling: text`).
//!
//! Two forms are understood, any number of times in one message, with the text around them
//! kept:
//!
//! ```text
//! <tool_call>{"name": "read", "arguments": {"url": "workspace:///notes.txt"}}</tool_call>
//!
//! <tool_call>
//! <function=read>
//! <parameter=url>
//! workspace:///notes.txt
//! </parameter>
//! </function>
//! </tool_call>
//! ```
//!
//! In the JSON form `arguments` may also be a string holding the JSON object (some models
//! double-encode), `parameters` is accepted for `arguments`, and a missing `arguments` means
//! `{}`. In the XML form each value is converted by the tool's input schema: a property typed
//! `integer`, `number`, `boolean`, `object`, `array` or `null` is parsed as JSON, a `string`
//! property is kept verbatim (one leading and one trailing newline removed, as the form puts
//! values on their own lines); without a schema a value is tried as JSON, then kept as a
//! string. The last call of a message may lack its closing `</tool_call>`.
//!
//! Anything that starts like a call but cannot be read becomes [`Segment::Malformed`] with an
//! error the model can act on; parsing never fails and never panics (SEC-3).
//!
//! The work is linear in the text: every search for a closing tag remembers where it found
//! the next one (or that there is none), so thousands of unclosed `<parameter=` tags do not
//! rescan the rest of the text each. At most [`MAX_CALLS`] calls are read from one message;
//! the rest becomes one [`Segment::Malformed`] saying so.

use std::cell::Cell;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

const OPEN: &str = "<tool_call>";
const CLOSE: &str = "</tool_call>";
const FUNCTION: &str = "<function=";
const FUNCTION_END: &str = "</function>";
const PARAMETER: &str = "<parameter=";
const PARAMETER_END: &str = "</parameter>";

/// The most calls (well-formed or malformed) read from one message; what follows is one
/// malformed segment telling the model to split its calls.
pub const MAX_CALLS: usize = 128;

const JSON_FORM: &str = r#"<tool_call>{"name": "TOOL", "arguments": {...}}</tool_call>"#;
const XML_FORM: &str =
    "<tool_call><function=TOOL><parameter=KEY>VALUE</parameter></function></tool_call>";

/// A tool call read from text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParsedCall {
    /// The tool's name.
    pub name: String,
    /// The tool's input; a JSON object for every call [`parse`] returns.
    pub arguments: Value,
}

/// A piece of a model's message, in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Segment {
    /// Text outside any call, verbatim (whitespace included).
    Text(String),
    /// A well-formed call.
    Call(ParsedCall),
    /// Something that opened with `<tool_call>` but could not be read.
    Malformed {
        /// The exact text of the attempt, from `<tool_call>` to its close (or the end).
        raw: String,
        /// What was wrong and what the model should write instead.
        error: String,
    },
}

/// Splits `text` into text, calls and malformed attempts. `schema_of` returns a tool's input
/// JSON Schema (or `None` for an unknown tool); it only guides the XML form's value types.
pub fn parse(text: &str, schema_of: &dyn Fn(&str) -> Option<Value>) -> Vec<Segment> {
    parse_counted(text, schema_of).0
}

/// [`parse`], plus the number of bytes its searches examined: the measure of its work, for
/// tests and fuzzing that check it stays linear in the length of the text.
#[doc(hidden)]
pub fn parse_counted(text: &str, schema_of: &dyn Fn(&str) -> Option<Value>) -> (Vec<Segment>, u64) {
    let scan = Scan::new(text);
    let mut quiet = Quiet::new(text);
    let mut segments = Vec::new();
    let mut text_start = 0;
    let mut search_from = 0;
    let mut calls = 0;
    while let Some(open) = scan.find_open(search_from) {
        // A call inside `<think>` or code is text: the model showed it, it did not make it.
        if let Some(end) = quiet.holding(search_from, open) {
            search_from = end;
            continue;
        }
        push_text(&mut segments, &text[text_start..open]);
        if calls == MAX_CALLS {
            segments.push(Segment::Malformed {
                raw: text[open..].to_owned(),
                error: format!(
                    "too many tool calls in one message: only the first {MAX_CALLS} were read; make at most {MAX_CALLS} calls per message and the rest in the next one"
                ),
            });
            return (segments, scan.work.get());
        }
        calls += 1;
        let (result, end) = parse_call(&scan, open + OPEN.len(), schema_of);
        segments.push(match result {
            Ok(call) => Segment::Call(call),
            Err(error) => Segment::Malformed {
                raw: text[open..end].to_owned(),
                error,
            },
        });
        text_start = end;
        search_from = end;
    }
    push_text(&mut segments, &text[text_start..]);
    (segments, scan.work.get())
}

/// Where calls are not read: `<think>…</think>` (to the end when unclosed) and code — a run
/// of backticks up to the next run of the same length, as Markdown reads inline code and
/// fences (a run with no partner is a literal backtick). Regions are taken leftmost first, as
/// Markdown does, from where the parser stands: backticks inside a call's arguments never
/// start a region. Every cursor only moves forward, so the work stays linear.
struct Quiet<'a> {
    text: &'a str,
    /// Backtick runs as (start, length), and each run's next run of the same length.
    runs: Vec<(usize, usize)>,
    partner: Vec<Option<usize>>,
    run: usize,
    /// The last `<think>` search: from where, and the region found (`None`: none after it).
    think: Option<(usize, Option<(usize, usize)>)>,
}

const THINK: &str = "<think>";
const THINK_END: &str = "</think>";

impl<'a> Quiet<'a> {
    fn new(text: &'a str) -> Self {
        let bytes = text.as_bytes();
        let mut runs = Vec::new();
        let mut k = 0;
        while k < bytes.len() {
            if bytes[k] == b'`' {
                let start = k;
                while k < bytes.len() && bytes[k] == b'`' {
                    k += 1;
                }
                runs.push((start, k - start));
            } else {
                k += 1;
            }
        }
        let mut partner = vec![None; runs.len()];
        let mut last_of_length = std::collections::HashMap::new();
        for (i, &(_, length)) in runs.iter().enumerate().rev() {
            partner[i] = last_of_length.insert(length, i);
        }
        Self {
            text,
            runs,
            partner,
            run: 0,
            think: None,
        }
    }

    /// The first `<think>` region starting at or after `from`.
    fn next_think(&mut self, from: usize) -> Option<(usize, usize)> {
        if let Some((searched, found)) = self.think
            && searched <= from
        {
            match found {
                None => return None,
                Some(region) if region.0 >= from => return Some(region),
                Some(_) => {}
            }
        }
        let found = self.text.get(from..)?.find(THINK).map(|i| {
            let at = from + i;
            let end = self.text[at..]
                .find(THINK_END)
                .map_or(self.text.len(), |j| at + j + THINK_END.len());
            (at, end)
        });
        self.think = Some((from, found));
        found
    }

    /// The first code region whose opening run starts at or after `from`.
    fn next_code(&mut self, from: usize) -> Option<(usize, usize)> {
        while let Some(&(start, _)) = self.runs.get(self.run) {
            if start < from || self.partner[self.run].is_none() {
                self.run += 1;
                continue;
            }
            let close = self.partner[self.run]?;
            let (close_start, length) = self.runs[close];
            return Some((start, close_start + length));
        }
        None
    }

    /// The end of the quiet region that holds `open`, taking regions from `from` on.
    fn holding(&mut self, from: usize, open: usize) -> Option<usize> {
        let mut at = from;
        loop {
            let region = match (self.next_think(at), self.next_code(at)) {
                (Some(t), Some(c)) => Some(if t.0 <= c.0 { t } else { c }),
                (t, c) => t.or(c),
            };
            match region {
                Some((start, end)) if start <= open => {
                    if end > open {
                        return Some(end);
                    }
                    at = end;
                }
                _ => return None,
            }
        }
    }
}

/// The last answer of a search for one needle: searched from `from`, the next occurrence is
/// `found` (`None`: there is none after `from`).
#[derive(Debug, Clone, Copy)]
struct Memo {
    from: usize,
    found: Option<usize>,
}

/// The text and the memory of its searches. A search from `p` reuses the last answer for the
/// same needle when that search started at or before `p` and found nothing before `p`: no
/// byte is examined twice for the same needle, which keeps parsing linear.
struct Scan<'a> {
    text: &'a str,
    open: Cell<Option<Memo>>,
    close: Cell<Option<Memo>>,
    parameter_end: Cell<Option<Memo>>,
    work: Cell<u64>,
}

impl<'a> Scan<'a> {
    fn new(text: &'a str) -> Self {
        Self {
            text,
            open: Cell::new(None),
            close: Cell::new(None),
            parameter_end: Cell::new(None),
            work: Cell::new(0),
        }
    }

    fn count(&self, bytes: usize) {
        self.work.set(self.work.get().saturating_add(bytes as u64));
    }

    fn find(&self, memo: &Cell<Option<Memo>>, needle: &str, from: usize) -> Option<usize> {
        if let Some(m) = memo.get()
            && m.from <= from
        {
            match m.found {
                None => return None,
                Some(at) if at >= from => return Some(at),
                Some(_) => {}
            }
        }
        let found = self.text.get(from..)?.find(needle).map(|i| from + i);
        self.count(found.map_or(self.text.len(), |at| at + needle.len()) - from);
        memo.set(Some(Memo { from, found }));
        found
    }

    fn find_open(&self, from: usize) -> Option<usize> {
        self.find(&self.open, OPEN, from)
    }

    fn find_close(&self, from: usize) -> Option<usize> {
        self.find(&self.close, CLOSE, from)
    }

    fn find_parameter_end(&self, from: usize) -> Option<usize> {
        self.find(&self.parameter_end, PARAMETER_END, from)
    }
}

/// The JSON form of `call`, as [`parse`] reads it back.
pub fn render_json(call: &ParsedCall) -> String {
    format!(
        "{OPEN}\n{{\"name\": {}, \"arguments\": {}}}\n{CLOSE}",
        Value::String(call.name.clone()),
        call.arguments
    )
}

/// The XML form of `call`. String values are written verbatim, others as JSON; [`parse`] reads
/// it back as the same call when the tool's schema types its string properties as `string`
/// (without a schema, a string that is itself valid JSON, like `"42"`, comes back as JSON).
/// A string containing `</parameter>`, or arguments that are not an object, cannot be written
/// in this form; use [`render_json`] for those.
pub fn render_xml(call: &ParsedCall) -> String {
    let mut out = format!("{OPEN}\n{FUNCTION}{}>\n", call.name);
    if let Value::Object(arguments) = &call.arguments {
        for (key, value) in arguments {
            let text = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            out.push_str(&format!("{PARAMETER}{key}>\n{text}\n{PARAMETER_END}\n"));
        }
    }
    out.push_str(&format!("{FUNCTION_END}\n{CLOSE}"));
    out
}

fn push_text(segments: &mut Vec<Segment>, text: &str) {
    if !text.is_empty() {
        segments.push(Segment::Text(text.to_owned()));
    }
}

/// The byte index after the first `</tool_call>` at or after `from`, or the end of the text:
/// where a malformed attempt stops swallowing text.
fn resync(scan: &Scan<'_>, from: usize) -> usize {
    match scan.find_close(from) {
        Some(found) => found + CLOSE.len(),
        None => scan.text.len(),
    }
}

fn skip_whitespace(scan: &Scan<'_>, from: usize) -> usize {
    let text = scan.text;
    let at = text[from..]
        .char_indices()
        .find(|(_, c)| !c.is_whitespace())
        .map_or(text.len(), |(i, _)| from + i);
    scan.count(at - from);
    at
}

/// After a call's body: whitespace, then `</tool_call>` or the end of the text. Returns the
/// end of the call, or the position of the unexpected text.
fn expect_close(scan: &Scan<'_>, from: usize) -> Result<usize, usize> {
    let text = scan.text;
    let at = skip_whitespace(scan, from);
    if at == text.len() {
        Ok(at)
    } else if text[at..].starts_with(CLOSE) {
        Ok(at + CLOSE.len())
    } else {
        Err(at)
    }
}

fn malformed(problem: &str, form: &str) -> String {
    format!("malformed tool call: {problem}; write {form}")
}

fn parse_call(
    scan: &Scan<'_>,
    body: usize,
    schema_of: &dyn Fn(&str) -> Option<Value>,
) -> (Result<ParsedCall, String>, usize) {
    let text = scan.text;
    let start = skip_whitespace(scan, body);
    let rest = &text[start..];
    if rest.starts_with('{') {
        json_call(scan, start)
    } else if rest.starts_with(FUNCTION) {
        xml_call(scan, start, schema_of)
    } else if rest.is_empty() || rest.starts_with(CLOSE) {
        let both = format!("{JSON_FORM} or {XML_FORM}");
        (
            Err(malformed("the tool call is empty", &both)),
            resync(scan, start),
        )
    } else {
        let both = format!("{JSON_FORM} or {XML_FORM}");
        (
            Err(malformed(
                "expected a JSON object or <function=NAME> after <tool_call>",
                &both,
            )),
            resync(scan, start),
        )
    }
}

fn json_call(scan: &Scan<'_>, start: usize) -> (Result<ParsedCall, String>, usize) {
    let text = scan.text;
    let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
    let next = stream.next();
    scan.count(stream.byte_offset());
    match next {
        Some(Ok(value)) => {
            let after = start + stream.byte_offset();
            match expect_close(scan, after) {
                Ok(end) => (call_from_json(value), end),
                Err(at) => (
                    Err(malformed(
                        "unexpected text after the JSON object (close the call with </tool_call>)",
                        JSON_FORM,
                    )),
                    resync(scan, at),
                ),
            }
        }
        Some(Err(error)) if error.is_eof() => (
            Err(malformed(
                "the text ends before the tool call's JSON is complete",
                JSON_FORM,
            )),
            text.len(),
        ),
        Some(Err(error)) => (
            Err(malformed(
                &format!("invalid JSON after <tool_call>: {error}"),
                JSON_FORM,
            )),
            resync(scan, start),
        ),
        // `start` is at a `{`, so the stream yields at least an error; keep a safe answer.
        None => (
            Err(malformed("the tool call is empty", JSON_FORM)),
            resync(scan, start),
        ),
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn call_from_json(value: Value) -> Result<ParsedCall, String> {
    let Value::Object(mut object) = value else {
        return Err(malformed(
            "the tool call must be a JSON object with \"name\" and \"arguments\"",
            JSON_FORM,
        ));
    };
    let name = match object.remove("name") {
        Some(Value::String(name)) if !name.trim().is_empty() => name,
        Some(Value::String(_)) => return Err(malformed("\"name\" is empty", JSON_FORM)),
        Some(other) => {
            return Err(malformed(
                &format!("\"name\" must be a string, found {}", kind_of(&other)),
                JSON_FORM,
            ));
        }
        None => return Err(malformed("missing \"name\"", JSON_FORM)),
    };
    let arguments = object
        .remove("arguments")
        .or_else(|| object.remove("parameters"));
    let arguments = match arguments {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::Object(map)) => Value::Object(map),
        Some(Value::String(encoded)) => match serde_json::from_str::<Value>(&encoded) {
            Ok(Value::Object(map)) => Value::Object(map),
            Ok(other) => {
                return Err(malformed(
                    &format!(
                        "\"arguments\" must be a JSON object, found a string holding {}",
                        kind_of(&other)
                    ),
                    JSON_FORM,
                ));
            }
            Err(error) => {
                return Err(malformed(
                    &format!("\"arguments\" is a string but not valid JSON: {error}"),
                    JSON_FORM,
                ));
            }
        },
        Some(other) => {
            return Err(malformed(
                &format!(
                    "\"arguments\" must be a JSON object, found {}",
                    kind_of(&other)
                ),
                JSON_FORM,
            ));
        }
    };
    Ok(ParsedCall { name, arguments })
}

/// The name inside `<function=NAME>` or `<parameter=NAME>` starting at `from`, and the index
/// after its `>`. A name may not span lines or contain `<`: that means the tag was not closed.
fn tag_name<'a>(scan: &Scan<'a>, from: usize) -> Option<(&'a str, usize)> {
    let text = scan.text;
    let found = text[from..].find(['>', '<', '\n']);
    scan.count(found.map_or(text.len() - from, |i| i + 1));
    let close = found?;
    if !text[from + close..].starts_with('>') {
        return None;
    }
    let name = text[from..from + close].trim();
    (!name.is_empty()).then_some((name, from + close + 1))
}

fn xml_call(
    scan: &Scan<'_>,
    start: usize,
    schema_of: &dyn Fn(&str) -> Option<Value>,
) -> (Result<ParsedCall, String>, usize) {
    let text = scan.text;
    let fail = |problem: &str, at: usize| (Err(malformed(problem, XML_FORM)), resync(scan, at));

    let Some((name, mut pos)) = tag_name(scan, start + FUNCTION.len()) else {
        return fail(
            "the <function=NAME> tag needs a tool name and a closing >",
            start,
        );
    };
    let schema = schema_of(name);
    let mut arguments = Map::new();
    loop {
        pos = skip_whitespace(scan, pos);
        let rest = &text[pos..];
        if rest.starts_with(FUNCTION_END) {
            pos += FUNCTION_END.len();
            break;
        }
        if rest.is_empty() {
            return (
                Err(malformed(
                    &format!("<function={name}> is not closed with </function>"),
                    XML_FORM,
                )),
                text.len(),
            );
        }
        if rest.starts_with(CLOSE) {
            return fail(
                &format!("<function={name}> is not closed with </function> before </tool_call>"),
                pos,
            );
        }
        if !rest.starts_with(PARAMETER) {
            return fail(
                &format!(
                    "unexpected text inside <function={name}>: expected <parameter=KEY> or </function>"
                ),
                pos,
            );
        }
        let Some((key, value_start)) = tag_name(scan, pos + PARAMETER.len()) else {
            return fail("a <parameter=KEY> tag needs a key and a closing >", pos);
        };
        let Some(length) = scan
            .find_parameter_end(value_start)
            .map(|at| at - value_start)
        else {
            return fail(
                &format!("parameter `{key}` is not closed with </parameter>"),
                value_start,
            );
        };
        if arguments.contains_key(key) {
            return fail(&format!("parameter `{key}` is given twice"), value_start);
        }
        let raw = trim_one_newline(&text[value_start..value_start + length]);
        let value = convert(raw, property_types(schema.as_ref(), key));
        arguments.insert(key.to_owned(), value);
        pos = value_start + length + PARAMETER_END.len();
    }
    match expect_close(scan, pos) {
        Ok(end) => (
            Ok(ParsedCall {
                name: name.to_owned(),
                arguments: Value::Object(arguments),
            }),
            end,
        ),
        Err(at) => fail(
            "unexpected text after </function> (close the call with </tool_call>)",
            at,
        ),
    }
}

/// Values sit on their own lines in the XML form; exactly one newline on each side belongs to
/// the form, anything more to the value.
fn trim_one_newline(raw: &str) -> &str {
    let raw = raw.strip_prefix('\n').unwrap_or(raw);
    raw.strip_suffix('\n').unwrap_or(raw)
}

/// The JSON Schema `type`s of property `key`, if the schema states them.
fn property_types(schema: Option<&Value>, key: &str) -> Option<Vec<String>> {
    let declared = schema?.get("properties")?.get(key)?.get("type")?;
    match declared {
        Value::String(t) => Some(vec![t.clone()]),
        Value::Array(types) => Some(
            types
                .iter()
                .filter_map(|t| t.as_str().map(str::to_owned))
                .collect(),
        ),
        _ => None,
    }
}

fn matches_type(value: &Value, declared: &str) -> bool {
    match (declared, value) {
        ("null", Value::Null)
        | ("boolean", Value::Bool(_))
        | ("number", Value::Number(_))
        | ("array", Value::Array(_))
        | ("object", Value::Object(_)) => true,
        ("integer", Value::Number(n)) => n.is_i64() || n.is_u64(),
        _ => false,
    }
}

fn convert(raw: &str, types: Option<Vec<String>>) -> Value {
    let parsed = serde_json::from_str::<Value>(raw).ok();
    let Some(types) = types else {
        return parsed.unwrap_or_else(|| Value::String(raw.to_owned()));
    };
    if let Some(value) = &parsed {
        // A JSON string is never taken for a `string` property: the form writes strings bare,
        // so quotes in the text belong to the value.
        if !value.is_string() && types.iter().any(|t| matches_type(value, t)) {
            return value.clone();
        }
    }
    if types.iter().any(|t| t == "string") {
        return Value::String(raw.to_owned());
    }
    // The type does not match: keep what was written and let input validation explain.
    parsed.unwrap_or_else(|| Value::String(raw.to_owned()))
}
