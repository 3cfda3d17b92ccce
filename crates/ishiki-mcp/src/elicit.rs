//! Elicitation: a server asking the person for input mid-call, through the embedder.
//!
//! A server may send `elicitation/create` while it runs a tool: a form (a message and a flat
//! JSON schema) or a URL to open. The client declares the capability only when the embedder
//! gave an [`Elicitor`]; without one every request is declined (rmcp's default), so a headless
//! embedder never hangs a call. Fields the person left out get the schema's `default`
//! ([`apply_defaults`], SEP-1034) before the answer goes back.

use std::fmt;

use serde_json::{Map, Value};

/// What a server asks.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ElicitRequest {
    /// Fill in a form: `schema` is the requested JSON schema (an object of primitive fields).
    Form {
        /// The server's name (as in `mcp.servers.<name>`).
        server: String,
        /// What the server says it needs.
        message: String,
        /// The requested schema, as the server sent it.
        schema: Value,
    },
    /// Open a URL (an out-of-band flow, such as a sign-in page).
    Url {
        /// The server's name.
        server: String,
        /// What the server says it needs.
        message: String,
        /// The URL to open.
        url: String,
    },
}

/// What the person answered.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ElicitAnswer {
    /// Accepted, with the form's values (empty for a URL); fields left out get their default.
    Accept(Map<String, Value>),
    /// Declined.
    Decline,
    /// Dismissed without a choice.
    Cancel,
}

/// How an embedder answers elicitation: the CLI's chat asks the person, a scenario scripts it.
#[async_trait::async_trait]
pub trait Elicitor: Send + Sync + fmt::Debug {
    /// Answers one request.
    async fn elicit(&self, request: ElicitRequest) -> ElicitAnswer;
}

/// An elicitor that accepts every form with nothing filled in, so each field takes its
/// default (what the conformance suite's `elicitation-sep1034-client-defaults` expects of a
/// client whose person just presses "accept"), and declines URLs.
#[derive(Debug, Clone, Copy, Default)]
pub struct AcceptDefaults;

#[async_trait::async_trait]
impl Elicitor for AcceptDefaults {
    async fn elicit(&self, request: ElicitRequest) -> ElicitAnswer {
        match request {
            ElicitRequest::Form { .. } => ElicitAnswer::Accept(Map::new()),
            _ => ElicitAnswer::Decline,
        }
    }
}

/// Fills every property of `schema` that `content` lacks and that has a `default`.
pub fn apply_defaults(schema: &Value, content: &mut Map<String, Value>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        if let Some(default) = property.get("default")
            && !content.contains_key(name)
        {
            content.insert(name.clone(), default.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn omitted_fields_take_their_defaults_and_given_ones_stay() {
        let schema = json!({ "type": "object", "properties": {
            "name": { "type": "string", "default": "John Doe" },
            "age": { "type": "integer", "default": 30 },
            "note": { "type": "string" }
        }});
        let mut content = Map::new();
        content.insert("age".to_owned(), json!(41));
        apply_defaults(&schema, &mut content);
        assert_eq!(
            Value::Object(content),
            json!({ "name": "John Doe", "age": 41 })
        );
    }
}
