//! Printing the type tree as TypeScript: one line when it fits, indented otherwise, with
//! descriptions as JSDoc comments that cannot be closed early.

use serde_json::Value;

use super::{DOC_WIDTH, INLINE_WIDTH, Ty, is_identifier, quote};

/// The lines of a description: trailing spaces and surrounding blank lines removed.
pub(super) fn text_lines(text: &str) -> Vec<String> {
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
pub(super) fn doc_lines(schema: &Value) -> Vec<String> {
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

pub(super) fn indent(level: usize) -> String {
    "  ".repeat(level)
}

/// A JSDoc block at `level`, ending in a newline; empty for no lines.
pub(super) fn jsdoc(lines: &[String], level: usize) -> String {
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
pub(super) fn after_colon(printed: &str) -> String {
    if printed.starts_with('\n') {
        printed.to_owned()
    } else {
        format!(" {printed}")
    }
}

pub(super) fn key_text(key: &str) -> String {
    if is_identifier(key) {
        key.to_owned()
    } else {
        quote(key)
    }
}

pub(super) fn needs_parens(ty: &Ty) -> bool {
    matches!(ty, Ty::Union(_) | Ty::Inter(_))
}

/// The type on one line, or `None` when it is too long or carries comments.
pub(super) fn inline(ty: &Ty) -> Option<String> {
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
pub(super) fn print_open(ty: &Ty, level: usize) -> String {
    match ty {
        Ty::Object(props, _) if !props.is_empty() => print_lines(ty, level),
        _ => print(ty, level),
    }
}

/// The type as text whose continuation lines are indented for `level`. A long union starts
/// with a newline and puts each member on its own `| ` line.
pub(super) fn print(ty: &Ty, level: usize) -> String {
    match inline(ty) {
        Some(text) => text,
        None => print_lines(ty, level),
    }
}

/// The multi-line form of a type (scalars, which have none, print inline).
pub(super) fn print_lines(ty: &Ty, level: usize) -> String {
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
