//! From JSON Schema to the type tree: objects, arrays, unions, literals and local `$ref`s
//! (named declarations, emitted once and safe under recursion), and the [`Renderer`] that
//! turns a tool into its method declaration.

use std::collections::{BTreeMap, HashMap};

use serde_json::{Map, Value};

use super::print::{after_colon, doc_lines, jsdoc, print, print_open, text_lines};
use super::{
    FINGERPRINT_BUDGET, MAX_DEPTH, MAX_SIGNATURE_BYTES, MAX_SIGNATURE_NODES, METHOD_WIDTH, Prop,
    Ty, UNKNOWN, is_generic, is_identifier, quote, union,
};
use crate::def::ToolDef;
use crate::index::resolve_ref;

/// One schema document being rendered: the root `$ref`s resolve against, and the names its
/// definitions got.
pub(super) struct Root<'a> {
    schema: &'a Value,
    /// The type name `#` gets if something refers to the root.
    self_name: String,
    names: HashMap<String, String>,
    inlining: Vec<String>,
}

#[derive(Default)]
pub(super) struct Renderer {
    /// Rendered `type` declarations, in the order their names were first needed.
    pub(super) decls: Vec<String>,
    /// Declared names and the fingerprint of the definition behind each.
    taken: HashMap<String, String>,
    /// Schema nodes the current tool may still convert.
    budget: usize,
    /// Whether the current tool ran out of its budget.
    exhausted: bool,
    /// Names the current tool declared, taken back when it gets the fallback.
    fresh: Vec<String>,
}

impl Renderer {
    /// The method declaration of `def`, after the `type` declarations it needs were added to
    /// `decls`; or, when its schemas expand past the bounds, the fallback declaration (and
    /// nothing added), so one hostile schema costs bounded work and text.
    pub(super) fn method(&mut self, def: &ToolDef) -> String {
        let decls_before = self.decls.len();
        self.budget = MAX_SIGNATURE_NODES;
        self.exhausted = false;
        self.fresh.clear();
        let text = self.full_method(def);
        let bytes = text.len()
            + self.decls[decls_before..]
                .iter()
                .map(String::len)
                .sum::<usize>();
        if !self.exhausted && bytes <= MAX_SIGNATURE_BYTES {
            return text;
        }
        self.decls.truncate(decls_before);
        for name in self.fresh.drain(..) {
            self.taken.remove(&name);
        }
        fallback(def)
    }

    fn full_method(&mut self, def: &ToolDef) -> String {
        let pascal = pascal_case(&def.name);
        let input = self.root_ty(&def.input_schema, format!("{pascal}Input"));
        let output = match &def.output_schema {
            Some(schema) => self.root_ty(schema, format!("{pascal}Output")),
            None => UNKNOWN,
        };
        let callee = callee(&def.name);
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
        if self.budget == 0 {
            self.exhausted = true;
            return UNKNOWN;
        }
        self.budget -= 1;
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
        self.fresh.push(name.clone());
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

/// The member name of a tool in `interface Tools`: `name`, or `"a-b"` for a name that is not an
/// identifier (a program then calls it as `tools["a-b"](…)`).
fn callee(name: &str) -> String {
    if is_identifier(name) {
        name.to_owned()
    } else {
        quote(name)
    }
}

/// The short declaration of a tool whose schemas are too large to show: its description, a
/// note saying why the types are missing, and an untyped method.
fn fallback(def: &ToolDef) -> String {
    let mut lines = text_lines(&def.description);
    if !lines.is_empty() {
        lines.push(String::new());
    }
    lines.push(format!(
        "Its types are not shown: its schemas expand beyond {MAX_SIGNATURE_NODES} schema nodes or {} KiB; pass the input its description asks for.",
        MAX_SIGNATURE_BYTES / 1024
    ));
    let mut text = jsdoc(&lines, 0);
    text.push_str(&format!(
        "{}(input: Record<string, unknown>): Promise<unknown>;",
        callee(&def.name)
    ));
    text
}

/// Whether a schema says something about the shape of a value (not only constraints).
pub(super) fn has_shape(schema: &Value) -> bool {
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
pub(super) fn literal(value: &Value, depth: usize) -> Ty {
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
pub(super) fn fingerprint(root: &Value, pointer: &str) -> String {
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

pub(super) fn collect_refs(value: &Value, out: &mut Vec<String>, budget: &mut usize) {
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
pub(super) fn pascal_case(name: &str) -> String {
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
/// a type this output uses and may name a type alias, else its words in PascalCase.
pub(super) fn type_name(key: &str) -> String {
    // The types the output itself names (`Tools` is the interface the methods are members
    // of), the predefined type names a type alias cannot take, and the reserved words, which
    // cannot name a type either.
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
        "Tools",
        "undefined",
        "unknown",
        "void",
        "break",
        "case",
        "catch",
        "class",
        "const",
        "continue",
        "debugger",
        "default",
        "delete",
        "do",
        "else",
        "enum",
        "export",
        "extends",
        "false",
        "finally",
        "for",
        "function",
        "if",
        "implements",
        "import",
        "in",
        "instanceof",
        "interface",
        "let",
        "new",
        "package",
        "private",
        "protected",
        "public",
        "return",
        "static",
        "super",
        "switch",
        "this",
        "throw",
        "true",
        "try",
        "typeof",
        "var",
        "while",
        "with",
        "yield",
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
