//! What a step announces about tools that joined the catalog (TS-3): the text a model reads;
//! and the note about tools that left it (TS-5). The `catalog_delta` part's wire shape belongs to
//! the model boundary (`ishiki-model`'s `DeltaEntry`), which an embedder builds from
//! [`ToolDef`] and [`signature`](crate::signature).

use crate::def::{ToolDef, short_description};
use crate::signature::signatures;

/// How a catalog delta is announced to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeltaForm {
    /// Each tool with its short description (the native tool list carries the schemas).
    Described,
    /// The TypeScript declarations, which carry the descriptions, so a program can call the
    /// tools at once (codemode on).
    Signatures,
}

/// The text announcing `delta` to the model in `form`; empty when nothing joined.
pub fn delta_text(delta: &[ToolDef], form: DeltaForm) -> String {
    if delta.is_empty() {
        return String::new();
    }
    let names: Vec<&str> = delta.iter().map(|d| d.name.as_str()).collect();
    if form == DeltaForm::Signatures {
        format!(
            "Tools added to your catalog: {}. Call them directly, or from codemode as declared:\n\n```ts\n{}\n```",
            names.join(", "),
            signatures(delta)
        )
    } else {
        let mut text = String::from("Tools added to your catalog:");
        for def in delta {
            let short = short_description(&def.description);
            if short.is_empty() {
                text.push_str(&format!("\n- {}", def.name));
            } else {
                text.push_str(&format!("\n- {}: {short}", def.name));
            }
        }
        text
    }
}

/// The note announcing that `names` were removed from the catalog: they stay in the native
/// tool list (so the request prefix does not change) but calling them fails. Empty when none.
pub fn removed_text(names: &[String]) -> String {
    if names.is_empty() {
        return String::new();
    }
    format!(
        "Tools removed from your catalog, no longer available (calls to them fail): {}.",
        names.join(", ")
    )
}
