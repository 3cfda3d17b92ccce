//! TypeScript declarations of tools, generated from their JSON Schemas (TS-4).
//!
//! A schema is first converted into a small TypeScript type tree, then printed: short objects
//! and unions on one line, longer ones indented, descriptions as JSDoc. Local `$ref`s to
//! `#/$defs/…` and `#/definitions/…` become named `type` declarations, emitted once (also
//! across the tools of one [`signatures`] call, when their definitions are identical) and safe
//! under recursion. Property order does not depend on how the JSON map was built: required
//! properties in `required` order, then the optional ones by name.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

use crate::def::ToolDef;
use crate::index::resolve_ref;

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
/// JavaScript identifier is called as `tools["a-b"](…)`.
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

/// One schema document being rendered: the root `$ref`s resolve against, and the names its
/// definitions got.
struct Root<'a> {
    schema: &'a Value,
    /// The type name `#` gets if something refers to the root.
    self_name: String,
    names: HashMap<String, String>,
    inlining: Vec<String>,
}

#[derive(Default)]
struct Renderer {
    /// Rendered `type` declarations, in the order their names were first needed.
    decls: Vec<String>,
    /// Declared names and the fingerprint of the definition behind each.
    taken: HashMap<String, String>,
}

impl Renderer {
    fn method(&mut self, def: &ToolDef) -> String {
        let pascal = pascal_case(&def.name);
        let input = self.root_ty(&def.input_schema, format!("{pascal}Input"));
        let output = match &def.output_schema {
            Some(schema) => self.root_ty(schema, format!("{pascal}Output")),
            None => UNKNOWN,
        };
        let callee = if is_identifier(&def.name) {
            format!("tools.{}", def.name)
        } else {
            format!("tools[{}]", quote(&def.name))
        };
        let output = print(&output, 0);
        let output = output.trim_start_matches('\n');
        let mut line = format!(
            "{callee}(input:{}): Promise<{output}>;",
            after_colon(&print(&input, 0))
        );
        if !line.contains('\n') && line.len() > METHOD_WIDTH {
            // A long one-line call reads better with its input object opened up.
            line = format!(
                "{callee}(input:{}): Promise<{output}>;",
                after_colon(&print_open(&input, 0))
            );
        }
        let mut text = jsdoc(&text_lines(&def.description), 0);
        text.push_str(&line);
        text
    }

    fn root_ty(&mut self, schema: &Value, self_name: String) -> Ty {
        let mut root = Root {
            schema,
            self_name,
            names: HashMap::new(),
            inlining: Vec::new(),
        };
        let ty = self.convert(&mut root, schema, 0);
        match root.names.get("") {
            // The schema refers to itself: the declaration exists, use its name.
            Some(name) => Ty::Named(name.clone()),
            None => ty,
        }
    }

    fn convert(&mut self, root: &mut Root<'_>, schema: &Value, depth: usize) -> Ty {
        if depth > MAX_DEPTH {
            return UNKNOWN;
        }
        match schema {
            Value::Bool(true) => UNKNOWN,
            Value::Bool(false) => Ty::Prim("never"),
            Value::Object(m) => self.convert_object(root, m, depth),
            _ => UNKNOWN,
        }
    }

    fn convert_object(&mut self, root: &mut Root<'_>, m: &Map<String, Value>, depth: usize) -> Ty {
        let mut parts: Vec<Ty> = Vec::new();
        if let Some(reference) = m.get("$ref").and_then(Value::as_str) {
            parts.push(self.reference(root, reference, depth));
        }
        if let Some(base) = self.base(root, m, depth) {
            parts.push(base);
        }
        for s in m
            .get("allOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            parts.push(self.convert(root, s, depth + 1));
        }
        for key in ["anyOf", "oneOf"] {
            let Some(variants) = m.get(key).and_then(Value::as_array) else {
                continue;
            };
            // Variants that only add constraints (`{ "required": ["a"] }`) say nothing about
            // the shape; the base type already does.
            let members: Vec<Ty> = variants
                .iter()
                .filter(|v| has_shape(v))
                .map(|v| self.convert(root, v, depth + 1))
                .collect();
            if !members.is_empty() {
                parts.push(union(members));
            }
        }
        if parts.len() > 1 {
            parts.retain(|p| !is_generic(p));
        }
        let mut ty = match parts.len() {
            0 => UNKNOWN,
            1 => parts.pop().unwrap_or(UNKNOWN),
            _ => Ty::Inter(parts),
        };
        if m.get("nullable").and_then(Value::as_bool) == Some(true) {
            ty = union(vec![ty, Ty::Prim("null")]);
        }
        ty
    }

    /// The type a schema states directly: `const`, `enum`, or `type` (or implied by keywords).
    fn base(&mut self, root: &mut Root<'_>, m: &Map<String, Value>, depth: usize) -> Option<Ty> {
        if let Some(c) = m.get("const") {
            return Some(literal(c, 0));
        }
        if let Some(values) = m.get("enum").and_then(Value::as_array) {
            return Some(union(values.iter().map(|v| literal(v, 0)).collect()));
        }
        match m.get("type") {
            Some(Value::String(t)) => Some(self.of_type(root, t, m, depth)),
            Some(Value::Array(types)) => Some(union(
                types
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|t| self.of_type(root, t, m, depth))
                    .collect(),
            )),
            _ => {
                let object_words = [
                    "properties",
                    "additionalProperties",
                    "patternProperties",
                    "required",
                ];
                if object_words.iter().any(|k| m.contains_key(*k)) {
                    Some(self.object(root, m, depth))
                } else if m.contains_key("items") || m.contains_key("prefixItems") {
                    Some(self.array(root, m, depth))
                } else {
                    None
                }
            }
        }
    }

    fn of_type(
        &mut self,
        root: &mut Root<'_>,
        t: &str,
        m: &Map<String, Value>,
        depth: usize,
    ) -> Ty {
        match t {
            "string" => Ty::Prim("string"),
            "number" | "integer" => Ty::Prim("number"),
            "boolean" => Ty::Prim("boolean"),
            "null" => Ty::Prim("null"),
            "object" => self.object(root, m, depth),
            "array" => self.array(root, m, depth),
            _ => UNKNOWN,
        }
    }

    fn object(&mut self, root: &mut Root<'_>, m: &Map<String, Value>, depth: usize) -> Ty {
        let props = m.get("properties").and_then(Value::as_object);
        let mut required: Vec<&str> = Vec::new();
        for r in m
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(r) = r.as_str()
                && !required.contains(&r)
            {
                required.push(r);
            }
        }
        let mut optional: Vec<&str> = props
            .into_iter()
            .flat_map(|p| p.keys())
            .map(String::as_str)
            .filter(|k| !required.contains(k))
            .collect();
        optional.sort_unstable();
        let mut out = Vec::new();
        for (key, is_optional) in required
            .iter()
            .map(|k| (*k, false))
            .chain(optional.iter().map(|k| (*k, true)))
        {
            let schema = props.and_then(|p| p.get(key));
            let ty = match schema {
                Some(s) => self.convert(root, s, depth + 1),
                None => UNKNOWN,
            };
            out.push(Prop {
                key: key.to_owned(),
                optional: is_optional,
                ty,
                doc: schema.map(doc_lines).unwrap_or_default(),
            });
        }
        let mut index: Vec<Ty> = Vec::new();
        match m.get("additionalProperties") {
            Some(Value::Bool(false)) => {}
            Some(s @ (Value::Bool(true) | Value::Object(_))) => {
                index.push(self.convert(root, s, depth + 1))
            }
            _ => {
                let pattern = m.get("patternProperties").and_then(Value::as_object);
                if props.is_none() && pattern.is_none() {
                    index.push(UNKNOWN);
                }
            }
        }
        for s in m
            .get("patternProperties")
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|p| p.values())
        {
            index.push(self.convert(root, s, depth + 1));
        }
        let index = (!index.is_empty()).then(|| Box::new(union(index)));
        Ty::Object(out, index)
    }

    fn array(&mut self, root: &mut Root<'_>, m: &Map<String, Value>, depth: usize) -> Ty {
        let tuple =
            |this: &mut Self, root: &mut Root<'_>, items: &[Value], rest: Option<&Value>| {
                let items = items
                    .iter()
                    .map(|s| this.convert(root, s, depth + 1))
                    .collect();
                let rest = rest
                    .filter(|r| r.is_object())
                    .map(|r| Box::new(this.convert(root, r, depth + 1)));
                Ty::Tuple(items, rest)
            };
        if let Some(prefix) = m.get("prefixItems").and_then(Value::as_array) {
            return tuple(self, root, prefix, m.get("items"));
        }
        match m.get("items") {
            Some(Value::Array(items)) => tuple(self, root, items, m.get("additionalItems")),
            Some(items) => Ty::Array(Box::new(self.convert(root, items, depth + 1))),
            None => Ty::Array(Box::new(UNKNOWN)),
        }
    }

    fn reference(&mut self, root: &mut Root<'_>, reference: &str, depth: usize) -> Ty {
        let Some(target) = resolve_ref(root.schema, reference) else {
            return UNKNOWN;
        };
        let pointer = reference.trim_start_matches('#').to_owned();
        let segments: Vec<&str> = pointer.split('/').skip(1).collect();
        let def_name = match segments.as_slice() {
            [] => Some(root.self_name.clone()),
            ["$defs" | "definitions", name] => Some(type_name(name)),
            _ => None,
        };
        let Some(base) = def_name else {
            // A pointer into some other part of the document: inline it, once per path.
            if root.inlining.contains(&pointer) {
                return UNKNOWN;
            }
            root.inlining.push(pointer);
            let ty = self.convert(root, target, depth + 1);
            root.inlining.pop();
            return ty;
        };
        if let Some(name) = root.names.get(&pointer) {
            return Ty::Named(name.clone());
        }
        let fingerprint = fingerprint(root.schema, &pointer);
        let mut n = 1;
        let name = loop {
            let candidate = if n == 1 {
                base.clone()
            } else {
                format!("{base}{n}")
            };
            match self.taken.get(&candidate) {
                Some(fp) if *fp == fingerprint => {
                    // The same definition was declared for an earlier schema: share it.
                    root.names.insert(pointer, candidate.clone());
                    return Ty::Named(candidate);
                }
                Some(_) => n += 1,
                None => break candidate,
            }
        };
        self.taken.insert(name.clone(), fingerprint);
        root.names.insert(pointer, name.clone());
        let slot = self.decls.len();
        self.decls.push(String::new());
        let ty = self.convert(root, target, depth + 1);
        let mut text = jsdoc(&doc_lines(target), 0);
        text.push_str(&format!("type {name} ={};", after_colon(&print(&ty, 0))));
        self.decls[slot] = text;
        Ty::Named(name)
    }
}

/// Whether a schema says something about the shape of a value (not only constraints).
fn has_shape(schema: &Value) -> bool {
    match schema {
        Value::Bool(_) => true,
        Value::Object(m) => {
            let shape = [
                "type",
                "$ref",
                "const",
                "enum",
                "properties",
                "items",
                "prefixItems",
                "allOf",
                "anyOf",
                "oneOf",
                "additionalProperties",
                "patternProperties",
            ];
            let annotation = ["description", "title", "examples", "default", "$comment"];
            // `{}` (only annotations) accepts anything, which is a shape too: `unknown`.
            shape.iter().any(|k| m.contains_key(*k))
                || m.keys().all(|k| annotation.contains(&k.as_str()))
        }
        _ => false,
    }
}

/// A literal type for a JSON value (`const`, `enum`).
fn literal(value: &Value, depth: usize) -> Ty {
    if depth > MAX_DEPTH {
        return UNKNOWN;
    }
    match value {
        Value::Null => Ty::Prim("null"),
        Value::Bool(b) => Ty::Lit(b.to_string()),
        Value::Number(n) => Ty::Lit(n.to_string()),
        Value::String(s) => Ty::Lit(quote(s)),
        Value::Array(items) => {
            Ty::Tuple(items.iter().map(|v| literal(v, depth + 1)).collect(), None)
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            let props = keys
                .into_iter()
                .map(|k| Prop {
                    key: k.clone(),
                    optional: false,
                    ty: literal(&map[k], depth + 1),
                    doc: Vec::new(),
                })
                .collect();
            Ty::Object(props, None)
        }
    }
}

/// Identifies a definition with everything it refers to, so two schemas that declare the same
/// `$defs` entry (common across one MCP server's tools) share one declaration.
fn fingerprint(root: &Value, pointer: &str) -> String {
    let mut seen: BTreeMap<String, &Value> = BTreeMap::new();
    let mut stack = vec![pointer.to_owned()];
    let mut budget = FINGERPRINT_BUDGET;
    while let Some(p) = stack.pop() {
        if seen.contains_key(&p) {
            continue;
        }
        let Some(target) = resolve_ref(root, &format!("#{p}")) else {
            continue;
        };
        seen.insert(p, target);
        collect_refs(target, &mut stack, &mut budget);
    }
    serde_json::to_string(&seen).unwrap_or_default()
}

fn collect_refs(value: &Value, out: &mut Vec<String>, budget: &mut usize) {
    if *budget == 0 {
        return;
    }
    *budget -= 1;
    match value {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("$ref", Value::String(r)) => {
                        if let Some(p) = r.strip_prefix('#') {
                            out.push(p.to_owned());
                        }
                    }
                    _ => collect_refs(v, out, budget),
                }
            }
        }
        Value::Array(items) => {
            for v in items {
                collect_refs(v, out, budget);
            }
        }
        _ => {}
    }
}

/// Words of a name joined in PascalCase: `write_file` → `WriteFile`.
fn pascal_case(name: &str) -> String {
    let mut out = String::new();
    for word in name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let mut chars = word.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'T');
    }
    out
}

/// A type name for a `$defs` key: the key itself when it is an identifier that does not shadow
/// a type this output uses, else its words in PascalCase.
fn type_name(key: &str) -> String {
    const RESERVED: &[&str] = &[
        "any",
        "Array",
        "bigint",
        "boolean",
        "never",
        "null",
        "number",
        "object",
        "Promise",
        "Record",
        "string",
        "symbol",
        "undefined",
        "unknown",
        "void",
    ];
    let decoded = key.replace("~1", "/").replace("~0", "~");
    let name = if is_identifier(&decoded) {
        decoded
    } else {
        pascal_case(&decoded)
    };
    if RESERVED.contains(&name.as_str()) {
        format!("{name}Type")
    } else {
        name
    }
}

/// The lines of a description: trailing spaces and surrounding blank lines removed.
fn text_lines(text: &str) -> Vec<String> {
    let lines: Vec<String> = text.lines().map(|l| l.trim_end().to_owned()).collect();
    let start = lines
        .iter()
        .position(|l| !l.is_empty())
        .unwrap_or(lines.len());
    let end = lines
        .iter()
        .rposition(|l| !l.is_empty())
        .map_or(start, |e| e + 1);
    lines[start..end].to_vec()
}

/// JSDoc lines for a schema: its description, then what the type cannot say (format,
/// encoding, default, bounds, pattern, deprecation).
fn doc_lines(schema: &Value) -> Vec<String> {
    let Some(m) = schema.as_object() else {
        return Vec::new();
    };
    let mut lines = m
        .get("description")
        .and_then(Value::as_str)
        .map(text_lines)
        .unwrap_or_default();
    for key in ["format", "contentEncoding", "contentMediaType", "pattern"] {
        if let Some(v) = m.get(key).and_then(Value::as_str) {
            lines.push(format!("@{key} {v}"));
        }
    }
    for key in [
        "minimum",
        "exclusiveMinimum",
        "maximum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
    ] {
        if let Some(v) = m.get(key).filter(|v| v.is_number()) {
            lines.push(format!("@{key} {v}"));
        }
    }
    if let Some(v) = m.get("default") {
        lines.push(format!("@default {v}"));
    }
    if m.get("deprecated").and_then(Value::as_bool) == Some(true) {
        lines.push("@deprecated".to_owned());
    }
    lines
}

fn indent(level: usize) -> String {
    "  ".repeat(level)
}

/// A JSDoc block at `level`, ending in a newline; empty for no lines.
fn jsdoc(lines: &[String], level: usize) -> String {
    if lines.is_empty() {
        return String::new();
    }
    let pad = indent(level);
    let escaped: Vec<String> = lines.iter().map(|l| l.replace("*/", "*\\/")).collect();
    if let [line] = escaped.as_slice() {
        let one = format!("{pad}/** {line} */\n");
        if one.len() <= DOC_WIDTH + 1 {
            return one;
        }
    }
    let mut out = format!("{pad}/**\n");
    for line in &escaped {
        if line.is_empty() {
            out.push_str(&format!("{pad} *\n"));
        } else {
            out.push_str(&format!("{pad} * {line}\n"));
        }
    }
    out.push_str(&format!("{pad} */\n"));
    out
}

/// What follows a `:` or `=`: a space, unless the printed type starts on its own line.
fn after_colon(printed: &str) -> String {
    if printed.starts_with('\n') {
        printed.to_owned()
    } else {
        format!(" {printed}")
    }
}

fn key_text(key: &str) -> String {
    if is_identifier(key) {
        key.to_owned()
    } else {
        quote(key)
    }
}

fn needs_parens(ty: &Ty) -> bool {
    matches!(ty, Ty::Union(_) | Ty::Inter(_))
}

/// The type on one line, or `None` when it is too long or carries comments.
fn inline(ty: &Ty) -> Option<String> {
    let text = match ty {
        Ty::Prim(p) => (*p).to_owned(),
        Ty::Lit(l) | Ty::Named(l) => l.clone(),
        Ty::Array(inner) => {
            let inner_text = inline(inner)?;
            if needs_parens(inner) {
                format!("({inner_text})[]")
            } else {
                format!("{inner_text}[]")
            }
        }
        Ty::Tuple(items, rest) => {
            let mut parts = items.iter().map(inline).collect::<Option<Vec<_>>>()?;
            if let Some(rest) = rest {
                let r = inline(&Ty::Array(rest.clone()))?;
                parts.push(format!("...{r}"));
            }
            format!("[{}]", parts.join(", "))
        }
        Ty::Object(props, index) => {
            if props.iter().any(|p| !p.doc.is_empty()) {
                return None;
            }
            if props.is_empty() {
                return Some(match index {
                    Some(t) => format!("Record<string, {}>", inline(t)?),
                    None => "{}".to_owned(),
                });
            }
            let mut parts = Vec::new();
            for p in props {
                let opt = if p.optional { "?" } else { "" };
                parts.push(format!("{}{opt}: {}", key_text(&p.key), inline(&p.ty)?));
            }
            if let Some(t) = index {
                parts.push(format!("[key: string]: {}", inline(t)?));
            }
            format!("{{ {} }}", parts.join("; "))
        }
        Ty::Union(members) => members
            .iter()
            .map(inline)
            .collect::<Option<Vec<_>>>()?
            .join(" | "),
        Ty::Inter(members) => {
            let parts = members
                .iter()
                .map(|m| inline(m).map(|t| if needs_parens(m) { format!("({t})") } else { t }))
                .collect::<Option<Vec<_>>>()?;
            parts.join(" & ")
        }
    };
    (text.len() <= INLINE_WIDTH || matches!(ty, Ty::Prim(_) | Ty::Lit(_) | Ty::Named(_)))
        .then_some(text)
}

/// Like [`print`], but an object with properties is always written one property a line.
fn print_open(ty: &Ty, level: usize) -> String {
    match ty {
        Ty::Object(props, _) if !props.is_empty() => print_lines(ty, level),
        _ => print(ty, level),
    }
}

/// The type as text whose continuation lines are indented for `level`. A long union starts
/// with a newline and puts each member on its own `| ` line.
fn print(ty: &Ty, level: usize) -> String {
    match inline(ty) {
        Some(text) => text,
        None => print_lines(ty, level),
    }
}

/// The multi-line form of a type (scalars, which have none, print inline).
fn print_lines(ty: &Ty, level: usize) -> String {
    match ty {
        Ty::Prim(_) | Ty::Lit(_) | Ty::Named(_) => inline(ty).unwrap_or_default(),
        Ty::Array(inner) => {
            let text = print(inner, level);
            if needs_parens(inner) {
                format!("({text})[]")
            } else {
                format!("{text}[]")
            }
        }
        Ty::Tuple(items, rest) => {
            let pad = indent(level + 1);
            let mut out = "[\n".to_owned();
            for item in items {
                out.push_str(&format!(
                    "{pad}{},\n",
                    print(item, level + 1).trim_start_matches('\n')
                ));
            }
            if let Some(rest) = rest {
                out.push_str(&format!(
                    "{pad}...{},\n",
                    print(&Ty::Array(rest.clone()), level + 1)
                ));
            }
            out.push_str(&indent(level));
            out.push(']');
            out
        }
        Ty::Object(props, index) => {
            let pad = indent(level + 1);
            let mut out = "{\n".to_owned();
            for p in props {
                out.push_str(&jsdoc(&p.doc, level + 1));
                let opt = if p.optional { "?" } else { "" };
                let value = print(&p.ty, level + 1);
                out.push_str(&format!(
                    "{pad}{}{opt}:{};\n",
                    key_text(&p.key),
                    after_colon(&value)
                ));
            }
            if let Some(t) = index {
                let value = print(t, level + 1);
                out.push_str(&format!("{pad}[key: string]:{};\n", after_colon(&value)));
            }
            out.push_str(&indent(level));
            out.push('}');
            out
        }
        Ty::Union(members) => {
            let pad = indent(level + 1);
            let mut out = String::new();
            for m in members {
                // A member's own lines sit under the member, past its `| `.
                let text = print(m, level + 2);
                let text = text.trim_start_matches('\n');
                if needs_parens(m) {
                    out.push_str(&format!("\n{pad}| ({text})"));
                } else {
                    out.push_str(&format!("\n{pad}| {text}"));
                }
            }
            out
        }
        Ty::Inter(members) => members
            .iter()
            .map(|m| {
                let text = print(m, level);
                if needs_parens(m) {
                    format!("({}\n{})", text, indent(level))
                } else {
                    text
                }
            })
            .collect::<Vec<_>>()
            .join(" & "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
