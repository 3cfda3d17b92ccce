//! Scenario errors: their kinds, and messages that name the field with its line and column.

use super::*;

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
        let location = at
            .filter(|l| l.line() > 0)
            .map(|l| (l.line(), l.column().max(1)));
        let mut summary = if path.is_empty() {
            message.to_owned()
        } else {
            format!("{path}: {message}")
        };
        let mut rendered = String::new();
        if let Some((line, column)) = location {
            summary.push_str(&format!(" at line {line}, column {column}"));
            rendered = self.snippet(line, column);
        }
        ScenarioError {
            kind,
            path: (!path.is_empty()).then(|| path.to_owned()),
            location,
            rendered: format!("{summary}{rendered}"),
            summary,
        }
    }

    /// ` --> name:line:col` and the line with a caret, in the style serde-saphyr uses.
    pub(super) fn snippet(&self, line: u64, column: u64) -> String {
        let Some(text) = usize::try_from(line - 1)
            .ok()
            .and_then(|i| self.text.lines().nth(i))
        else {
            return format!("\n --> {}:{line}:{column}", self.name);
        };
        let gutter = " ".repeat(line.to_string().len());
        let caret_at: usize = text
            .chars()
            .take(usize::try_from(column - 1).unwrap_or(0))
            .map(|_| 1)
            .sum();
        format!(
            "\n{gutter}--> {}:{line}:{column}\n{gutter} |\n{line} | {text}\n{gutter} | {}^",
            self.name,
            " ".repeat(caret_at)
        )
    }
}
