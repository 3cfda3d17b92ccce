//! `${id.path}` interpolation and `{ $continue: id }` inputs: how a step refers to what
//! earlier events printed.
//!
//! `${c1.continue.url}`, `${c1.attachments.0.url}` and `${m1.images.0.url}` walk the JSON of
//! an earlier event — the `tool_result` event of call `c1`, the `inbound` event of user
//! message `m1` — by dotted keys and numeric indexes. A reference may sit anywhere inside a
//! string, and any string of a step may hold references, JSON call inputs included.
//!
//! Codemode programs are strings of a step too, and JavaScript template literals use the same
//! `${…}` syntax. So `${…}` is a reference only when it names an id of the scenario (a call id
//! or a user message id) or, naming an unknown id, walks into `continue`, `attachments`, `folded` or
//! `images` — the fields a reference exists to reach. Anything else (`${tasks.length}`,
//! `${a + b}`) is left as written. docs/scenario-format.md has no escape syntax, and none is added here.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;

/// Finds the event an id refers to: the `tool_result` event of a call, the `inbound` event of
/// a user message, as the JSON object the transcript printed.
pub trait EventLookup {
    /// The event printed for `id`, if there is one yet.
    fn get(&self, id: &str) -> Option<&Value>;
}

impl EventLookup for std::collections::HashMap<String, Value> {
    fn get(&self, id: &str) -> Option<&Value> {
        std::collections::HashMap::get(self, id)
    }
}

impl EventLookup for std::collections::BTreeMap<String, Value> {
    fn get(&self, id: &str) -> Option<&Value> {
        std::collections::BTreeMap::get(self, id)
    }
}

/// The fields of an event a reference to an unknown id is still recognised by.
const EVENT_FIELDS: [&str; 4] = ["continue", "attachments", "images", "folded"];

/// A call's input after interpolation.
#[derive(Debug, Clone, PartialEq)]
pub enum CallInput {
    /// A plain input, every reference replaced.
    Resolved(Value),
    /// `{ $continue: id }`: the continuation input of call `id`; when that call has no
    /// continuation the call is dropped from its step.
    Continue(String),
}

/// One `${…}` reference found in a string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The referenced id (`c1`).
    pub id: String,
    /// The path below the event (`["continue", "url"]`).
    pub path: Vec<String>,
    /// The reference as written (`${c1.continue.url}`).
    pub text: String,
}

/// What went wrong with a reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InterpolateErrorKind {
    /// No event has this id (yet).
    UnknownId,
    /// The path does not exist in the event.
    BadPath,
    /// The path leads to null, an object or an array, not to text.
    NotText,
    /// `${` without its closing `}`.
    Unterminated,
    /// A `$continue` input that is not exactly `{ $continue: "<call id>" }`.
    BadContinue,
}

/// A reference that cannot be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterpolateError {
    kind: InterpolateErrorKind,
    reference: String,
    detail: String,
}

impl InterpolateError {
    fn new(kind: InterpolateErrorKind, reference: &str, detail: String) -> Self {
        Self {
            kind,
            reference: reference.to_owned(),
            detail,
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> InterpolateErrorKind {
        self.kind
    }

    /// The reference as written.
    pub fn reference(&self) -> &str {
        &self.reference
    }
}

impl fmt::Display for InterpolateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            InterpolateErrorKind::BadContinue => {
                write!(f, "bad input `{}`: {}", self.reference, self.detail)
            }
            InterpolateErrorKind::UnknownId
            | InterpolateErrorKind::BadPath
            | InterpolateErrorKind::NotText
            | InterpolateErrorKind::Unterminated => {
                write!(f, "bad reference `{}`: {}", self.reference, self.detail)
            }
        }
    }
}

impl std::error::Error for InterpolateError {}

/// Resolves references, knowing the scenario's ids (see the module docs for why).
#[derive(Debug, Clone, Default)]
pub struct Interpolator {
    ids: BTreeSet<String>,
}

impl Interpolator {
    /// An interpolator for a scenario whose call and message ids are `ids`.
    pub fn new<I, S>(ids: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            ids: ids.into_iter().map(Into::into).collect(),
        }
    }

    /// The references in `text`, in order.
    pub fn references(&self, text: &str) -> Result<Vec<Reference>, InterpolateError> {
        let mut found = Vec::new();
        self.scan(text, |piece| {
            if let Piece::Reference(r) = piece {
                found.push(r);
            }
            Ok(())
        })?;
        Ok(found)
    }

    /// `text` with every reference replaced by the text it points to.
    pub fn resolve_str(
        &self,
        text: &str,
        lookup: &dyn EventLookup,
    ) -> Result<String, InterpolateError> {
        let mut out = String::with_capacity(text.len());
        self.scan(text, |piece| {
            match piece {
                Piece::Literal(s) => out.push_str(s),
                Piece::Reference(r) => out.push_str(&resolve_reference(&r, lookup)?),
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// `value` with every string (at any depth; object keys excepted) resolved.
    pub fn resolve_value(
        &self,
        value: &Value,
        lookup: &dyn EventLookup,
    ) -> Result<Value, InterpolateError> {
        Ok(match value {
            Value::String(s) => Value::String(self.resolve_str(s, lookup)?),
            Value::Array(items) => Value::Array(
                items
                    .iter()
                    .map(|v| self.resolve_value(v, lookup))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Value::Object(
                map.iter()
                    .map(|(k, v)| Ok((k.clone(), self.resolve_value(v, lookup)?)))
                    .collect::<Result<_, InterpolateError>>()?,
            ),
            Value::Null | Value::Bool(_) | Value::Number(_) => value.clone(),
        })
    }

    /// A call input: `{ $continue: id }` is recognised, anything else is resolved.
    pub fn resolve_input(
        &self,
        input: &Value,
        lookup: &dyn EventLookup,
    ) -> Result<CallInput, InterpolateError> {
        match continue_target(input)? {
            Some(id) => Ok(CallInput::Continue(id.to_owned())),
            None => Ok(CallInput::Resolved(self.resolve_value(input, lookup)?)),
        }
    }

    /// Splits `text` into literal pieces and references, feeding them to `each`.
    fn scan<'t>(
        &self,
        text: &'t str,
        mut each: impl FnMut(Piece<'t>) -> Result<(), InterpolateError>,
    ) -> Result<(), InterpolateError> {
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            let after = &rest[start + 2..];
            match after.find('}') {
                Some(end) => {
                    let inner = &after[..end];
                    match self.classify(inner) {
                        Some(r) => {
                            each(Piece::Literal(&rest[..start]))?;
                            each(Piece::Reference(r))?;
                        }
                        None => each(Piece::Literal(&rest[..start + 2 + end + 1]))?,
                    }
                    rest = &after[end + 1..];
                }
                None => {
                    let len = after
                        .find(|c: char| !is_reference_char(c))
                        .unwrap_or(after.len());
                    if self.classify(&after[..len]).is_some() {
                        return Err(InterpolateError::new(
                            InterpolateErrorKind::Unterminated,
                            &format!("${{{}", &after[..len]),
                            "no closing `}`".to_owned(),
                        ));
                    }
                    break;
                }
            }
        }
        each(Piece::Literal(rest))
    }

    /// The reference `inner` (the text between `${` and `}`) makes, if it is one.
    fn classify(&self, inner: &str) -> Option<Reference> {
        let segments: Vec<&str> = inner.split('.').collect();
        if segments
            .iter()
            .any(|s| s.is_empty() || !s.chars().all(is_reference_char))
        {
            return None;
        }
        let (id, path) = segments.split_first()?;
        let known = self.ids.contains(*id);
        let looks_like_one = path.first().is_some_and(|f| EVENT_FIELDS.contains(f));
        (known || looks_like_one).then(|| Reference {
            id: (*id).to_owned(),
            path: path.iter().map(|s| (*s).to_owned()).collect(),
            text: format!("${{{inner}}}"),
        })
    }
}

fn is_reference_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.'
}

enum Piece<'t> {
    Literal(&'t str),
    Reference(Reference),
}

/// The text `r` points to in the events `lookup` knows.
pub(crate) fn resolve_reference(
    r: &Reference,
    lookup: &dyn EventLookup,
) -> Result<String, InterpolateError> {
    let bad = |kind, detail: String| InterpolateError::new(kind, &r.text, detail);
    let mut here = lookup.get(&r.id).ok_or_else(|| {
        bad(
            InterpolateErrorKind::UnknownId,
            format!("no earlier call or user message has id {}", r.id),
        )
    })?;
    let mut walked = r.id.clone();
    for seg in &r.path {
        let next = match here {
            Value::Object(map) => map.get(seg),
            Value::Array(items) => seg.parse::<usize>().ok().and_then(|i| items.get(i)),
            Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => None,
        };
        here = next.ok_or_else(|| {
            let detail = match here {
                Value::Object(map) => format!(
                    "{walked} has no field `{seg}` (it has: {})",
                    map.keys()
                        .map(String::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                Value::Array(items) => format!(
                    "{walked} has no item `{seg}` (it has {} item{})",
                    items.len(),
                    if items.len() == 1 { "" } else { "s" }
                ),
                Value::Null => format!("{walked} is null"),
                Value::Bool(_) | Value::Number(_) | Value::String(_) => {
                    format!("{walked} is a plain value with no `{seg}`")
                }
            };
            bad(InterpolateErrorKind::BadPath, detail)
        })?;
        walked.push('.');
        walked.push_str(seg);
    }
    match here {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Null => Err(bad(
            InterpolateErrorKind::NotText,
            format!("{walked} is null"),
        )),
        Value::Object(_) => Err(bad(
            InterpolateErrorKind::NotText,
            format!("{walked} is an object, not a text value"),
        )),
        Value::Array(_) => Err(bad(
            InterpolateErrorKind::NotText,
            format!("{walked} is a list, not a text value"),
        )),
    }
}

/// The call id of an input of exactly `{ $continue: "<id>" }`, `None` for any other input
/// without a `$continue` key.
pub(crate) fn continue_target(input: &Value) -> Result<Option<&str>, InterpolateError> {
    let Value::Object(map) = input else {
        return Ok(None);
    };
    let Some(target) = map.get("$continue") else {
        return Ok(None);
    };
    let written = Value::Object(map.clone()).to_string();
    if map.len() != 1 {
        return Err(InterpolateError::new(
            InterpolateErrorKind::BadContinue,
            &written,
            "`$continue` must be the only key of the input".to_owned(),
        ));
    }
    match target {
        Value::String(id) => Ok(Some(id)),
        _ => Err(InterpolateError::new(
            InterpolateErrorKind::BadContinue,
            &written,
            "`$continue` takes a call id".to_owned(),
        )),
    }
}

/// The continuation input of call `call_id`: `{ "url": <its continue.url> }`, or `None` when
/// the call printed no result (it was itself dropped) or its `continue` is null.
pub(crate) fn continuation_input(lookup: &dyn EventLookup, call_id: &str) -> Option<Value> {
    let url = lookup.get(call_id)?.get("continue")?.get("url")?.as_str()?;
    Some(serde_json::json!({ "url": url }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    fn events() -> HashMap<String, Value> {
        HashMap::from([
            (
                "c1".to_owned(),
                json!({"event": "tool_result", "step": 1, "call_id": "c1", "name": "read",
                       "is_error": false, "text": "…",
                       "attachments": [{"url": "artifact://screenshot/a.png", "media_type": "image/png", "bytes": 10, "lifetime": "once"}],
                       "continue": {"url": "artifact://read/x.txt?offset=5"}}),
            ),
            (
                "c2".to_owned(),
                json!({"event": "tool_result", "step": 2, "call_id": "c2", "name": "read",
                       "is_error": false, "text": "end", "attachments": [], "continue": null}),
            ),
            (
                "m1".to_owned(),
                json!({"event": "inbound", "id": "m1", "images": [{"url": "asset://u1", "media_type": "image/png", "bytes": 7, "lifetime": "retain"}]}),
            ),
        ])
    }

    fn interp() -> Interpolator {
        Interpolator::new(["c1", "c2", "m1", "later"])
    }

    fn err(text: &str) -> String {
        match interp().resolve_str(text, &events()) {
            Ok(s) => format!("unexpectedly resolved to {s:?}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn references_resolve_anywhere_in_a_string() {
        let i = interp();
        let ev = events();
        assert_eq!(
            i.resolve_str("${c1.continue.url}", &ev).expect("ok"),
            "artifact://read/x.txt?offset=5"
        );
        assert_eq!(
            i.resolve_str(
                "see <img src=\"${m1.images.0.url}\"/> and ${c1.attachments.0.url}!",
                &ev
            )
            .expect("ok"),
            "see <img src=\"asset://u1\"/> and artifact://screenshot/a.png!"
        );
        assert_eq!(
            i.resolve_str("${m1.images.0.bytes} bytes", &ev)
                .expect("ok"),
            "7 bytes"
        );
    }

    #[test]
    fn javascript_templates_are_left_alone() {
        let i = interp();
        let code = "return `${tasks.length} tasks, ${a + b}, ${x}`; const o = {a: 1}; `${`";
        assert_eq!(i.references(code).expect("ok"), vec![]);
        assert_eq!(i.resolve_str(code, &events()).expect("ok"), code);
        assert_eq!(
            i.resolve_str("cost: $5 {x} $", &events()).expect("ok"),
            "cost: $5 {x} $"
        );
    }

    #[test]
    fn inputs_resolve_recursively() {
        let input = json!({"url": "${c1.continue.url}", "n": 3, "list": ["${m1.images.0.url}", {"deep": "x${c1.step}"}], "${c1.step}": true});
        let got = interp().resolve_input(&input, &events()).expect("ok");
        assert_eq!(
            got,
            CallInput::Resolved(
                json!({"url": "artifact://read/x.txt?offset=5", "n": 3, "list": ["asset://u1", {"deep": "x1"}], "${c1.step}": true})
            )
        );
    }

    #[test]
    fn continue_inputs_are_recognised() {
        let i = interp();
        assert_eq!(
            i.resolve_input(&json!({"$continue": "c1"}), &events())
                .expect("ok"),
            CallInput::Continue("c1".into())
        );
        assert_eq!(
            continuation_input(&events(), "c1"),
            Some(json!({"url": "artifact://read/x.txt?offset=5"}))
        );
        assert_eq!(continuation_input(&events(), "c2"), None);
        assert_eq!(continuation_input(&events(), "dropped"), None);
    }

    #[test]
    fn bad_references_name_the_reference() {
        let ev = events();
        let i = interp();
        let messages = [
            err("${c9.continue.url}"),
            err("${later.text}"),
            err("${c1.nope}"),
            err("${c1.attachments.3.url}"),
            err("${c1.attachments.first.url}"),
            err("${c2.continue.url}"),
            err("${c1.attachments}"),
            err("${c1}"),
            err("${c1.text.more}"),
            err("open ${c1.continue.url"),
            i.resolve_input(&json!({"$continue": "c1", "url": "x"}), &ev)
                .map(|_| String::new())
                .unwrap_or_else(|e| e.to_string()),
            i.resolve_input(&json!({"$continue": 3}), &ev)
                .map(|_| String::new())
                .unwrap_or_else(|e| e.to_string()),
        ];
        insta::assert_snapshot!(messages.join("\n"));
    }

    #[test]
    fn error_kinds() {
        let ev = events();
        let kind = |t: &str| interp().resolve_str(t, &ev).map_err(|e| e.kind()).err();
        assert_eq!(
            kind("${zz.images.0.url}"),
            Some(InterpolateErrorKind::UnknownId)
        );
        assert_eq!(kind("${c1.x}"), Some(InterpolateErrorKind::BadPath));
        assert_eq!(kind("${c2.continue}"), Some(InterpolateErrorKind::NotText));
        assert_eq!(
            kind("${c1.continue"),
            Some(InterpolateErrorKind::Unterminated)
        );
    }

    #[test]
    fn references_list_ids_and_paths() {
        let refs = interp()
            .references("a ${c1.attachments.0.url} b ${m1.images.0.url} ${js.thing}")
            .expect("ok");
        let got: Vec<(String, String)> =
            refs.into_iter().map(|r| (r.id, r.path.join("/"))).collect();
        assert_eq!(
            got,
            vec![
                ("c1".into(), "attachments/0/url".into()),
                ("m1".into(), "images/0/url".into())
            ]
        );
    }
}
