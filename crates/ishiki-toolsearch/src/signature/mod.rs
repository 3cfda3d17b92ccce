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

/// The TypeScript declaration of one tool: named types its schemas need, then the tool as a
/// method of `interface Tools`, with the tool's description as JSDoc:
///
/// ```text
/// interface Tools {
///   /** Write a file into the workspace. */
///   write_file(input: {
///     /** Absolute path */
///     path: string;
///     content: string;
///   }): Promise<unknown>;
/// }
/// ```
///
/// The text is valid TypeScript on its own (`tsc --strict` compiles it) and merges with every
/// other `interface Tools` block the model read before, so the program's global [`TOOLS_CONST`]
/// covers the tools of all of them. The output type is `unknown` when the tool has no output
/// schema; a name that is not a JavaScript identifier is a quoted member (`"a-b"(…)`, called as
/// `tools["a-b"](…)`). A tool whose schemas expand beyond 4,000 schema nodes or 64 KiB of text
/// gets a short fallback instead, with a note saying why:
/// `t(input: Record<string, unknown>): Promise<unknown>;`.
pub fn signature(def: &ToolDef) -> String {
    signatures([def])
}

/// The declarations of several tools as one text: shared named types once, then one
/// `interface Tools` block with each tool's method.
pub fn signatures<'a>(defs: impl IntoIterator<Item = &'a ToolDef>) -> String {
    let mut renderer = Renderer::default();
    let methods: Vec<String> = defs.into_iter().map(|d| renderer.method(d)).collect();
    let mut blocks: Vec<String> = renderer
        .decls
        .into_iter()
        .filter(|d| !d.is_empty())
        .collect();
    blocks.push(interface(&methods));
    blocks.join("\n\n")
}

/// The declaration of the object programs call tools on, whose type the `interface Tools`
/// blocks of [`signatures`] declare: put it once before them (the codemode tool's description
/// does).
pub const TOOLS_CONST: &str = "declare const tools: Tools;";

/// `interface Tools { … }` with `methods` as its members, indented by two spaces.
fn interface(methods: &[String]) -> String {
    if methods.is_empty() {
        return "interface Tools {}".to_owned();
    }
    let mut out = String::from("interface Tools {\n");
    for method in methods {
        for line in method.lines() {
            if !line.is_empty() {
                out.push_str("  ");
            }
            out.push_str(line);
            out.push('\n');
        }
    }
    out.push('}');
    out
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
            "interface Tools {\n  \"github.create-issue\"(input: {}): Promise<unknown>;\n}"
        );
    }

    #[test]
    fn ts4_unions_dedupe_and_put_null_last() {
        assert_eq!(
            sig(
                json!({"type":"object","properties":{"a":{"type":["null","string","string"]}},"required":["a"]})
            ),
            "interface Tools {\n  t(input: { a: string | null }): Promise<unknown>;\n}"
        );
        assert_eq!(
            sig(json!({"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{}]}}})),
            "interface Tools {\n  t(input: { a?: unknown }): Promise<unknown>;\n}"
        );
    }

    #[test]
    fn ts4_recursion_terminates() {
        let text = sig(json!({"type":"object","properties":{"child":{"$ref":"#"}},
            "$defs":{"A":{"$ref":"#/$defs/A"},"B":{"properties":{"b":{"$ref":"#/properties/child/x"}}}}}));
        assert!(text.contains("type TInput"));
        let text = sig(json!({"$ref":"#/$defs/A","$defs":{"A":{"$ref":"#/$defs/A"}}}));
        assert_eq!(
            text,
            "type A = A;\n\ninterface Tools {\n  t(input: A): Promise<unknown>;\n}"
        );
    }

    #[test]
    fn ts4_comments_cannot_be_closed_early() {
        let text = sig(
            json!({"type":"object","properties":{"a":{"type":"string","description":"ends */ here"}}}),
        );
        assert!(text.contains("ends *\\/ here"));
    }
}
