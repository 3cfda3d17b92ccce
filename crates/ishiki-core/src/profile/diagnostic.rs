//! Assembly errors: their kinds and codes, and the helpers of their messages (a value described,
//! a suggestion for a misspelt key); the located format itself is [`crate::located`]'s.

use std::fmt;

use serde::{Serialize, Serializer};
use serde_json::Value;

use super::tree::Node;

/// What went wrong during assembly, for callers that branch on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AssemblyErrorKind {
    /// The profile is not valid YAML, or has an unknown key, a wrong type or an out-of-range
    /// value (PRO-7).
    InvalidProfile,
    /// `models.yaml` is not valid YAML or is malformed.
    InvalidModels,
    /// The profile uses a key that was removed (PRO-6).
    RemovedKey,
    /// A model or group name does not exist (PRO-5).
    UnknownModel,
    /// `attachment.visionModel` names a model, or a group with a candidate, that does not
    /// declare `input: [text, image]` (PRO-5).
    VisionModelUnsupported,
    /// `toolsearch.semantic.model` names a directory that holds no usable model: missing,
    /// unreadable or damaged files (TS-7).
    SemanticModelUnusable,
}

impl AssemblyErrorKind {
    /// The stable error code printed by the scenario runner's `error` event.
    pub fn code(self) -> &'static str {
        match self {
            AssemblyErrorKind::InvalidProfile => "invalid_profile",
            AssemblyErrorKind::InvalidModels => "invalid_models",
            AssemblyErrorKind::RemovedKey => "removed_key",
            AssemblyErrorKind::UnknownModel => "unknown_model",
            AssemblyErrorKind::VisionModelUnsupported => "vision_model_unsupported",
            AssemblyErrorKind::SemanticModelUnusable => "semantic_model_unusable",
        }
    }
}

/// A profile or models document that cannot be assembled. The message names the key path and,
/// for YAML, the line and column (PRO-7); `Display` prints the message alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssemblyError {
    pub(super) kind: AssemblyErrorKind,
    pub(super) message: String,
    pub(super) path: Option<String>,
    pub(super) location: Option<(usize, usize)>,
    pub(super) snippet: Option<String>,
}

impl AssemblyError {
    pub(super) fn new(kind: AssemblyErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            path: None,
            location: None,
            snippet: None,
        }
    }

    /// What went wrong.
    pub fn kind(&self) -> AssemblyErrorKind {
        self.kind
    }

    /// The stable error code (`invalid_profile`, `vision_model_unsupported`, …).
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }

    /// The message: lower-case, naming the key path and (for YAML) line and column.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The key path of the offending entry (`attachment.maxImageCount`,
    /// `models.main.input[1]`), when the error concerns one.
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }

    /// The 1-based line and column in the YAML text, when the error came from YAML.
    pub fn location(&self) -> Option<(usize, usize)> {
        self.location
    }

    /// The offending YAML line with a caret under the column, for terminals.
    pub fn snippet(&self) -> Option<&str> {
        self.snippet.as_deref()
    }
}

impl fmt::Display for AssemblyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for AssemblyError {}

pub(super) fn describe(node: &Node) -> String {
    match node {
        Node::Null => "null".to_owned(),
        Node::Bool(b) => format!("`{b}`"),
        Node::Int(i) => format!("the number {i}"),
        Node::Float(x) => format!("the number {x}"),
        Node::Str(s) => {
            let shown: String = s.chars().take(40).collect();
            let ellipsis = if shown.len() < s.len() { "…" } else { "" };
            format!("the string {}{ellipsis}", Value::String(shown))
        }
        Node::Seq(_) => "a list".to_owned(),
        Node::Map(_) => "a mapping".to_owned(),
    }
}

/// A known key the unknown one was probably meant to be: same letters ignoring case, `_` and
/// `-`, or within two edits.
pub(super) fn suggest<'a>(unknown: &str, allowed: &[&'a str]) -> Option<&'a str> {
    fn norm(s: &str) -> Vec<char> {
        s.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase)
            .collect()
    }
    let wanted = norm(unknown);
    if wanted.is_empty() || wanted.len() > 64 {
        return None;
    }
    let mut best: Option<(usize, &str)> = None;
    for known in allowed {
        let distance = edit_distance(&wanted, &norm(known));
        let close = distance == 0 || (distance <= 2 && wanted.len() > 3);
        if close && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, known));
        }
    }
    best.map(|(_, known)| known)
}

pub(super) fn edit_distance(a: &[char], b: &[char]) -> usize {
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut current = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != cb);
            current.push(substitution.min(previous[j + 1] + 1).min(current[j] + 1));
        }
        previous = current;
    }
    previous[b.len()]
}

impl Serialize for AssemblyError {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut s = serializer.serialize_struct("AssemblyError", 2)?;
        s.serialize_field("code", self.code())?;
        s.serialize_field("message", &self.message)?;
        s.end()
    }
}
