//! Scenario errors: their kinds, and messages that name the field with its line and column.

use std::fmt;

use ishiki_core::located::Located;
use serde_saphyr::Location;

/// What kind of problem a scenario has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScenarioErrorKind {
    /// The file cannot be read.
    Io,
    /// Malformed YAML, an unknown field, a wrong type, a missing field.
    Yaml,
    /// Well-formed but wrong: version, ids, references, tool entries.
    Invalid,
    /// A `definitions` file cannot be read or is not a list of tool definitions.
    Definitions,
    /// A file or image spec cannot be generated.
    Fixture,
}

/// A scenario that cannot run. The CLI prints it and exits with status 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub(super) kind: ScenarioErrorKind,
    pub(super) path: Option<String>,
    pub(super) location: Option<(u64, u64)>,
    pub(super) summary: String,
    pub(super) rendered: String,
}

impl ScenarioError {
    /// What kind of problem.
    pub fn kind(&self) -> ScenarioErrorKind {
        self.kind
    }

    /// The field path (`steps[2].model.calls[0].input`), when the problem has one.
    pub fn path(&self) -> Option<&str> {
        self.path.as_deref()
    }

    /// Line and column (1-based), when known.
    pub fn location(&self) -> Option<(u64, u64)> {
        self.location
    }

    /// The one-line message, without the source snippet.
    pub fn summary(&self) -> &str {
        &self.summary
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.rendered)
    }
}

impl std::error::Error for ScenarioError {}

/// The source text and its name, to point errors at.
pub(super) struct Source<'a> {
    pub(super) text: &'a str,
    pub(super) name: &'a str,
}

impl Source<'_> {
    /// An error at `path`, located at `at` when known, with a snippet of that line.
    pub(super) fn error(
        &self,
        kind: ScenarioErrorKind,
        path: &str,
        at: Option<Location>,
        message: &str,
    ) -> ScenarioError {
        let at = at.and_then(|l| {
            Some((
                usize::try_from(l.line()).ok()?,
                usize::try_from(l.column()).ok()?,
            ))
        });
        self.located(kind, Located::new(path, message, at))
    }

    /// The error for `located`, in the format profile and `models.yaml` errors have too
    /// ([`ishiki_core::located`]).
    pub(super) fn located(&self, kind: ScenarioErrorKind, located: Located) -> ScenarioError {
        let summary = located.message(self.name);
        let rendered = match located.snippet(self.text, self.name) {
            Some(snippet) => format!("{summary}\n{snippet}"),
            None => summary.clone(),
        };
        ScenarioError {
            kind,
            path: (!located.path.is_empty()).then(|| located.path.clone()),
            location: located
                .at
                .map(|(line, column)| (line as u64, column as u64)),
            summary,
            rendered,
        }
    }
}
