//! Tool definitions and search hits: the data every other part of the crate works on.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{ToolsearchError, ToolsearchErrorKind};

/// One tool as the catalog knows it: what the model reads about it and how to call it.
///
/// Serialized with snake_case keys (`input_schema`, `output_schema`); the MCP spellings
/// `inputSchema` and `outputSchema` are accepted when reading. Only `name` is required.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolDef {
    /// The tool's name, unique in a catalog (e.g. `write_file`, `github.create_issue`).
    pub name: String,
    /// What the tool does, for the model.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the tool's input.
    #[serde(default = "empty_object_schema", alias = "inputSchema")]
    pub input_schema: Value,
    /// JSON Schema of what `execute` returns, when the tool declares one.
    #[serde(
        default,
        alias = "outputSchema",
        skip_serializing_if = "Option::is_none"
    )]
    pub output_schema: Option<Value>,
    /// A resident tool is always in the catalog; others wait in the pool until found (TS-1).
    #[serde(default)]
    pub resident: bool,
    /// Where the tool comes from, e.g. `mcp:everything`; searchable like the description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<String>,
}

fn empty_object_schema() -> Value {
    serde_json::json!({ "type": "object" })
}

impl ToolDef {
    /// A deferred tool with `name`, `description` and `input_schema`; set the other fields
    /// directly or with the `with_*` methods.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            input_schema,
            output_schema: None,
            resident: false,
            origin: None,
        }
    }

    /// The same tool with an output schema (builder style, like the methods below).
    pub fn with_output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema);
        self
    }

    /// The same tool with where it comes from, e.g. `mcp:everything`.
    pub fn with_origin(mut self, origin: impl Into<String>) -> Self {
        self.origin = Some(origin.into());
        self
    }

    /// The same tool, resident (always in the catalog) or deferred (in the pool until found).
    pub fn with_resident(mut self, resident: bool) -> Self {
        self.resident = resident;
        self
    }

    /// Checks the rules a definition must keep: a non-empty name without whitespace or control
    /// characters, and schemas that are JSON objects or booleans.
    pub fn validate(&self) -> Result<(), ToolsearchError> {
        if self.name.is_empty() {
            return Err(ToolsearchError::new(
                ToolsearchErrorKind::InvalidDefinition,
                "tool name is empty",
            ));
        }
        if self
            .name
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
        {
            return Err(ToolsearchError::new(
                ToolsearchErrorKind::InvalidDefinition,
                format!(
                    "tool name {:?} contains whitespace or control characters",
                    self.name
                ),
            ));
        }
        let schemas = [
            ("input_schema", Some(&self.input_schema)),
            ("output_schema", self.output_schema.as_ref()),
        ];
        for (field, schema) in schemas {
            if let Some(schema) = schema
                && !schema.is_object()
                && !schema.is_boolean()
            {
                return Err(ToolsearchError::new(
                    ToolsearchErrorKind::InvalidDefinition,
                    format!(
                        "{field} of tool {:?} is not a JSON Schema object",
                        self.name
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Parses a JSON array of tool definitions (a catalog file) and checks each one and that names
/// are unique.
pub fn parse_definitions(json: &str) -> Result<Vec<ToolDef>, ToolsearchError> {
    let defs: Vec<ToolDef> = serde_json::from_str(json).map_err(|e| {
        ToolsearchError::new(
            ToolsearchErrorKind::InvalidJson,
            format!("tool definitions: {e}"),
        )
    })?;
    let mut seen = std::collections::HashSet::new();
    for def in &defs {
        def.validate()?;
        if !seen.insert(def.name.as_str()) {
            return Err(ToolsearchError::new(
                ToolsearchErrorKind::DuplicateName,
                format!("tool {:?} is defined twice", def.name),
            ));
        }
    }
    Ok(defs)
}

/// One search result: a tool's name and short description, with its relevance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// The tool's name.
    pub name: String,
    /// The first sentence or line of the description, at most [`SHORT_DESCRIPTION_CHARS`]
    /// characters (see [`short_description`]).
    pub description: String,
    /// BM25F relevance. Hits come in rank order; an exact name match or a `select:` hit ranks
    /// first whatever its score.
    pub score: f64,
    /// Why it matched: the index terms (lower-cased, stemmed: `creat` for "create") of the
    /// query, its typo corrections or expansions that the tool's text contains; empty for
    /// `select:` and for a hit found by meaning alone.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub matched: Vec<String>,
}

/// The longest short description, in characters, before it is cut with `…`.
pub const SHORT_DESCRIPTION_CHARS: usize = 160;

/// The part of a description a search hit shows: the first line, cut after its first sentence
/// when that sentence is long enough to say something, and at most
/// [`SHORT_DESCRIPTION_CHARS`] characters.
pub fn short_description(description: &str) -> String {
    let line = description
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    // Cut at the first ". " only after a few words, so "e.g. foo" does not end the sentence.
    let mut end = line.len();
    for (i, _) in line.match_indices(". ") {
        if i >= 24 {
            end = i + 1;
            break;
        }
    }
    let sentence = &line[..end];
    if sentence.chars().count() <= SHORT_DESCRIPTION_CHARS {
        return sentence.to_owned();
    }
    let mut cut: String = sentence.chars().take(SHORT_DESCRIPTION_CHARS - 1).collect();
    // Prefer ending at a word boundary when one is near.
    if let Some(space) = cut.rfind(' ')
        && space > SHORT_DESCRIPTION_CHARS / 2
    {
        cut.truncate(space);
    }
    let trimmed = cut.trim_end_matches([' ', ',', ';', ':']);
    format!("{trimmed}…")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_description_takes_the_first_sentence() {
        assert_eq!(
            short_description("Write a file into the workspace. Overwrites existing files."),
            "Write a file into the workspace."
        );
        assert_eq!(short_description("\n  Lists files.\nMore."), "Lists files.");
        assert_eq!(
            short_description("Use e.g. foo. Then bar."),
            "Use e.g. foo. Then bar."
        );
        let long = "word ".repeat(60);
        let short = short_description(&long);
        assert!(short.ends_with('…'));
        assert!(short.chars().count() <= SHORT_DESCRIPTION_CHARS);
    }

    #[test]
    fn definitions_accept_mcp_spelling_and_reject_duplicates() {
        let defs = parse_definitions(
            r#"[{"name":"a","inputSchema":{"type":"object","properties":{"x":{"type":"string"}}}},
                {"name":"b"}]"#,
        )
        .unwrap();
        assert_eq!(defs[0].input_schema["properties"]["x"]["type"], "string");
        assert_eq!(defs[1].input_schema, serde_json::json!({"type":"object"}));
        let err = parse_definitions(r#"[{"name":"a"},{"name":"a"}]"#).unwrap_err();
        assert_eq!(err.kind(), ToolsearchErrorKind::DuplicateName);
        let err = parse_definitions(r#"[{"name":""}]"#).unwrap_err();
        assert_eq!(err.kind(), ToolsearchErrorKind::InvalidDefinition);
        let err = parse_definitions(r#"{"name":"a"}"#).unwrap_err();
        assert_eq!(err.kind(), ToolsearchErrorKind::InvalidJson);
    }
}
