//! What a step announces about tools that joined the catalog (TS-3): a wire shape for the
//! transcript's `catalog_delta` part and the text a model reads; and the note about tools that
//! left it (TS-5).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::def::{ToolDef, short_description};
use crate::signature::signatures;

/// One tool of a `catalog_delta` part: `{ "name", "description", "input_schema", "signature"? }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeltaEntry {
    /// The tool's name.
    pub name: String,
    /// The tool's full description.
    pub description: String,
    /// The tool's input JSON Schema.
    pub input_schema: Value,
    /// The TypeScript declaration (TS-4), present when codemode is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// The entries of a `catalog_delta` part for `delta`, with signatures when codemode is on.
pub fn delta_entries(delta: &[ToolDef], with_signatures: bool) -> Vec<DeltaEntry> {
    delta
        .iter()
        .map(|def| DeltaEntry {
            name: def.name.clone(),
            description: def.description.clone(),
            input_schema: def.input_schema.clone(),
            signature: with_signatures.then(|| crate::signature(def)),
        })
        .collect()
}

/// The text announcing `delta` to the model; empty when nothing joined.
///
/// Without signatures it lists each tool with its short description (the native tool list
/// carries the schemas). With signatures (codemode on) it gives the TypeScript declarations,
/// which carry the descriptions, so a program can call the tools at once.
pub fn delta_text(delta: &[ToolDef], with_signatures: bool) -> String {
    if delta.is_empty() {
        return String::new();
    }
    let names: Vec<&str> = delta.iter().map(|d| d.name.as_str()).collect();
    if with_signatures {
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
