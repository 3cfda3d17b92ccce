//! Tools a program can call (CM-2, CM-4), and the host-side checks around each call.
//!
//! The host (never the sandbox) validates inputs and outputs against the tools' JSON Schemas,
//! so an untrusted program cannot skip a check. Compiled validators are cached by schema text:
//! compiling costs about a millisecond, validating about a hundred nanoseconds.

use async_trait::async_trait;
use jsonschema::Validator;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

/// Names a program can never call, even if a caller passes such a tool (CM-4): they steer the
/// outer agent loop and exist only in the direct catalog.
pub const RESERVED_TOOL_NAMES: [&str; 2] = ["finish", "wait"];

/// A tool a program can call as `tools.<name>(input)` (CM-2).
///
/// `call` is the tool's *execute* only: its raw result goes to the program unchanged, never
/// through a model-facing conversion.
#[async_trait]
pub trait CallableTool: Send + Sync + fmt::Debug {
    /// The name the program uses: `tools.name(...)` or `tools["server_tool"](...)`.
    fn name(&self) -> &str;
    /// JSON Schema the input must satisfy; checked before `call`.
    fn input_schema(&self) -> &Value;
    /// JSON Schema of the result, when the catalog declares one; checked after `call`.
    fn output_schema(&self) -> Option<&Value> {
        None
    }
    /// Runs the tool. An `Err` becomes a catchable JS `Error` carrying `message`.
    async fn call(&self, input: Value) -> Result<Value, ToolFailure>;
}

/// A tool's failure, shown to the program as `new Error(message)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    /// What went wrong, for the program (and through it, the model).
    pub message: String,
}

impl ToolFailure {
    /// A failure with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

impl fmt::Display for ToolFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolFailure {}

/// Whether `name` may be offered to a program.
pub(crate) fn is_callable_name(name: &str) -> bool {
    !RESERVED_TOOL_NAMES.contains(&name)
}

/// Compiled validators, keyed by the schema's JSON text.
#[derive(Default)]
pub(crate) struct ValidatorCache {
    compiled: Mutex<HashMap<String, Arc<Result<Validator, String>>>>,
}

impl fmt::Debug for ValidatorCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let len = self.compiled.lock().map(|m| m.len()).unwrap_or_default();
        f.debug_struct("ValidatorCache")
            .field("schemas", &len)
            .finish()
    }
}

/// Bounds the cache: tool catalogs are small, so hitting this means churn, and starting over
/// is cheaper than tracking recency.
const MAX_CACHED_SCHEMAS: usize = 512;

impl ValidatorCache {
    fn get(&self, schema: &Value) -> Arc<Result<Validator, String>> {
        let key = schema.to_string();
        if let Ok(map) = self.compiled.lock()
            && let Some(found) = map.get(&key)
        {
            return Arc::clone(found);
        }
        // Compile outside the lock: other calls should not wait a millisecond for this one.
        let compiled = Arc::new(jsonschema::validator_for(schema).map_err(|e| e.to_string()));
        if let Ok(mut map) = self.compiled.lock() {
            if map.len() >= MAX_CACHED_SCHEMAS {
                map.clear();
            }
            map.insert(key, Arc::clone(&compiled));
        }
        compiled
    }

    /// Checks `instance` against `schema`; the error names the first failing path.
    pub(crate) fn check(&self, schema: &Value, instance: &Value) -> Result<(), SchemaProblem> {
        let compiled = self.get(schema);
        let validator = match compiled.as_ref() {
            Ok(validator) => validator,
            Err(message) => return Err(SchemaProblem::BadSchema(clip(message, 200))),
        };
        let mut errors = validator.iter_errors(instance);
        let Some(first) = errors.next() else {
            return Ok(());
        };
        let path = first.instance_path().to_string();
        let path = if path.is_empty() {
            "/".to_owned()
        } else {
            path
        };
        let mut message = format!("at {path}: {}", clip(&first.to_string(), 200));
        let more = errors.count();
        if more > 0 {
            message.push_str(&format!(" (and {more} more)"));
        }
        Err(SchemaProblem::Invalid(message))
    }
}

/// Why a value failed its schema check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SchemaProblem {
    /// The schema itself does not compile.
    BadSchema(String),
    /// The value does not satisfy the schema: `at /path: message`.
    Invalid(String),
}

/// Shortens `text` to at most `max` characters, marking the cut.
pub(crate) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_owned(),
        Some((cut, _)) => format!("{}…", &text[..cut]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cm2_validation_names_the_failing_path() {
        let cache = ValidatorCache::default();
        let schema = json!({
            "type": "object",
            "properties": { "path": { "type": "string" } },
            "required": ["path"],
        });
        assert_eq!(cache.check(&schema, &json!({ "path": "a" })), Ok(()));
        assert_eq!(
            cache.check(&schema, &json!({ "path": 3 })),
            Err(SchemaProblem::Invalid(
                "at /path: 3 is not of type \"string\"".to_owned()
            ))
        );
    }

    #[test]
    fn cm4_finish_and_wait_are_never_callable() {
        assert!(!is_callable_name("finish"));
        assert!(!is_callable_name("wait"));
        assert!(is_callable_name("send_message"));
    }

    #[test]
    fn clip_marks_the_cut() {
        assert_eq!(clip("abc", 5), "abc");
        assert_eq!(clip("abcdef", 3), "abc…");
    }
}
