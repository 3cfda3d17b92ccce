//! TypeScript declarations of tools, generated from their JSON Schemas (TS-4).
//!
//! A schema is first converted into a small TypeScript type tree, then printed: short objects
//! and unions on one line, longer ones indented, descriptions as JSDoc. Local `$ref`s to
//! `#/$defs/…` and `#/definitions/…` become named `type` declarations, emitted once (also
//! across the tools of one [`signatures`] call, when their definitions are identical) and safe
//! under recursion. Property order does not depend on how the JSON map was built: required
//! properties in `required` order, then the optional ones by name.
//!
//! `convert` builds the tree from a schema, `print` prints it; this module holds the tree and
//! the entry points.

mod convert;
mod print;

use crate::def::ToolDef;
use convert::Renderer;

/// Deeper schemas print as `unknown` (a guard against pathological input, not a real limit).
const MAX_DEPTH: usize = 32;
/// An object or union printed on one line stays at most this long.
const INLINE_WIDTH: usize = 64;
/// A method declared on one line stays at most this long.
const METHOD_WIDTH: usize = 100;
/// A one-line JSDoc comment stays at most this long.
const DOC_WIDTH: usize = 100;
/// A bound on schema nodes visited when comparing definitions.
const FINGERPRINT_BUDGET: usize = 10_000;
/// Schema nodes one tool's signature may convert (input and output together). Local `$ref`s
/// into other parts of a schema are inlined, so a small schema whose references fan out would
/// otherwise expand as 4ⁿ; past this the tool gets its fallback signature.
const MAX_SIGNATURE_NODES: usize = 4_000;
/// The longest signature of one tool (its method and the `type` declarations it adds), in
/// bytes; a longer one is replaced by the fallback signature. The largest in the 359-tool MCP
/// catalog of the tests is far below it.
const MAX_SIGNATURE_BYTES: usize = 64 * 1024;

/// The TypeScript declaration of one tool: named types its schemas need, then the method with
/// the tool's description as JSDoc:
///
/// ```text
/// /** Write a file into the workspace. */
/// tools.write_file(input: {
///   /** Absolute path */
///   path: string;
///   content: string;
/// }): Promise<unknown>;
/// ```
///
/// The output type is `unknown` when the tool has no output schema; a name that is not a
/// JavaScript identifier is called as `tools["a-b"](…)`. A tool whose schemas expand beyond
/// 4,000 schema nodes or 64 KiB of text gets a short fallback instead, with a note saying why:
/// `tools.t(input: Record<string, unknown>): Promise<unknown>;`.
pub fn signature(def: &ToolDef) -> String {
    signatures([def])
}

/// The declarations of several tools as one text: shared named types once, then each tool's
/// method, separated by blank lines.
pub fn signatures<'a>(defs: impl IntoIterator<Item = &'a ToolDef>) -> String {
    let mut renderer = Renderer::default();
    let methods: Vec<String> = defs.into_iter().map(|d| renderer.method(d)).collect();
    let mut blocks: Vec<String> = renderer
        .decls
        .into_iter()
        .filter(|d| !d.is_empty())
        .collect();
    blocks.extend(methods);
    blocks.join("\n\n")
}

/// Whether `name` can follow a `.` in JavaScript (ASCII identifiers only, to stay unambiguous).
pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// A JSON string literal, which is also a valid TypeScript string literal.
fn quote(text: &str) -> String {
    // Serializing a `&str` cannot fail: there is no map key or I/O involved.
    serde_json::to_string(text).unwrap_or_default()
}

#[derive(Debug, Clone, PartialEq)]
enum Ty {
    Prim(&'static str),
    Lit(String),
    Named(String),
    Array(Box<Ty>),
    Tuple(Vec<Ty>, Option<Box<Ty>>),
    Object(Vec<Prop>, Option<Box<Ty>>),
    Union(Vec<Ty>),
    Inter(Vec<Ty>),
}

#[derive(Debug, Clone, PartialEq)]
struct Prop {
    key: String,
    optional: bool,
    ty: Ty,
    doc: Vec<String>,
}

const UNKNOWN: Ty = Ty::Prim("unknown");

fn union(members: Vec<Ty>) -> Ty {
    let mut flat: Vec<Ty> = Vec::new();
    let mut has_null = false;
    for m in members {
        let parts = match m {
            Ty::Union(inner) => inner,
            other => vec![other],
        };
        for p in parts {
            match p {
                Ty::Prim("unknown") => return UNKNOWN,
                Ty::Prim("never") => {}
                Ty::Prim("null") => has_null = true,
                p if !flat.contains(&p) => flat.push(p),
                _ => {}
            }
        }
    }
    if has_null {
        flat.push(Ty::Prim("null"));
    }
    match flat.len() {
        0 => Ty::Prim("never"),
        1 => flat.pop().unwrap_or(UNKNOWN),
        _ => Ty::Union(flat),
    }
}

/// A part of an intersection that adds nothing next to a more specific one.
fn is_generic(ty: &Ty) -> bool {
    match ty {
        Ty::Prim("unknown") => true,
        Ty::Object(props, Some(index)) => props.is_empty() && **index == UNKNOWN,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn sig(schema: Value) -> String {
        signature(&ToolDef::new("t", "", schema))
    }

    #[test]
    fn ts4_identifiers_and_bracket_names() {
        assert!(is_identifier("write_file"));
        assert!(is_identifier("$x1"));
        assert!(!is_identifier("a-b"));
        assert!(!is_identifier("1a"));
        assert!(!is_identifier(""));
        let def = ToolDef::new(
            "github.create-issue",
            "",
            json!({"type":"object","properties":{}}),
        );
        assert_eq!(
            signature(&def),
            r#"tools["github.create-issue"](input: {}): Promise<unknown>;"#
        );
    }

    #[test]
    fn ts4_unions_dedupe_and_put_null_last() {
        assert_eq!(
            sig(
                json!({"type":"object","properties":{"a":{"type":["null","string","string"]}},"required":["a"]})
            ),
            "tools.t(input: { a: string | null }): Promise<unknown>;"
        );
        assert_eq!(
            sig(json!({"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{}]}}})),
            "tools.t(input: { a?: unknown }): Promise<unknown>;"
        );
    }

    #[test]
    fn ts4_recursion_terminates() {
        let text = sig(json!({"type":"object","properties":{"child":{"$ref":"#"}},
            "$defs":{"A":{"$ref":"#/$defs/A"},"B":{"properties":{"b":{"$ref":"#/properties/child/x"}}}}}));
        assert!(text.contains("type TInput"));
        let text = sig(json!({"$ref":"#/$defs/A","$defs":{"A":{"$ref":"#/$defs/A"}}}));
        assert_eq!(text, "type A = A;\n\ntools.t(input: A): Promise<unknown>;");
    }

    #[test]
    fn ts4_comments_cannot_be_closed_early() {
        let text = sig(
            json!({"type":"object","properties":{"a":{"type":"string","description":"ends */ here"}}}),
        );
        assert!(text.contains("ends *\\/ here"));
    }
}
