//! Located problems in the YAML documents a user writes — profiles, `models.yaml`, scenario
//! files — reported in one format: a message naming the key path with its line and column, and a
//! snippet of the source line with a caret under the column.
//!
//! ```
//! use ishiki_core::located::Located;
//!
//! let source = "attachment:\n  maxImageCount: 0\n";
//! let problem = Located::new("attachment.maxImageCount", "must be at least 1", Some((2, 18)));
//! assert_eq!(
//!     problem.message("profile"),
//!     "attachment.maxImageCount: must be at least 1 (line 2, column 18)"
//! );
//! assert_eq!(
//!     problem.snippet(source, "profile.yaml").as_deref(),
//!     Some(" --> profile.yaml:2:18\n  |\n1 | attachment:\n2 |   maxImageCount: 0\n  |                  ^")
//! );
//! ```

use serde_saphyr::UserMessageFormatter;
use serde_saphyr::budget::BudgetBreach;

/// A problem at a place in a document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The key path (`attachment.maxImageCount`, `steps[2].model.calls[0]`); empty for the
    /// document as a whole.
    pub path: String,
    /// What is wrong: lower-case, without the location.
    pub problem: String,
    /// The 1-based line and column, when the problem has a place in YAML text.
    pub at: Option<(usize, usize)>,
}

impl Located {
    /// A problem at `path`, at line and column `at` when known.
    pub fn new(
        path: impl Into<String>,
        problem: impl Into<String>,
        at: Option<(usize, usize)>,
    ) -> Self {
        Self {
            path: path.into(),
            problem: problem.into(),
            at: at
                .filter(|(line, _)| *line > 0)
                .map(|(line, column)| (line, column.max(1))),
        }
    }

    /// A YAML parse or decode error at `path`: serde-saphyr's message in user words (a size
    /// budget named by its limit, not its debug text), and its location.
    pub fn from_yaml_error(path: impl Into<String>, error: &serde_saphyr::Error) -> Self {
        let at = error.location().and_then(|l| {
            Some((
                usize::try_from(l.line()).ok()?,
                usize::try_from(l.column()).ok()?,
            ))
        });
        let mut problem = budget_message(error).unwrap_or_else(|| {
            error
                .without_snippet()
                .render_with_formatter(&UserMessageFormatter)
        });
        if let Some((line, column)) = at {
            // The formatter appends the location; ours goes at the end in our format.
            let suffix = format!(" at line {line}, column {column}");
            if let Some(stripped) = problem.strip_suffix(&suffix) {
                problem = stripped.to_owned();
            }
        }
        Self::new(path, problem, at)
    }

    /// `path: problem (line L, column C)`; `document` (`profile`, the file name) stands in for an
    /// empty path.
    pub fn message(&self, document: &str) -> String {
        let shown = if self.path.is_empty() {
            document
        } else {
            &self.path
        };
        match self.at {
            Some((line, column)) => {
                format!("{shown}: {} (line {line}, column {column})", self.problem)
            }
            None => format!("{shown}: {}", self.problem),
        }
    }

    /// ` --> name:line:column`, the source line with up to two lines before it, and a caret
    /// under the column, for terminals; `None` without a location or when `source` has no
    /// such line.
    pub fn snippet(&self, source: &str, name: &str) -> Option<String> {
        let (line, column) = self.at?;
        let index = line.checked_sub(1)?;
        let text = source.lines().nth(index)?;
        // A long line is shown as a window around the column, so a snippet stays one screen
        // wide even for a document that is one huge line.
        let caret = column.saturating_sub(1);
        let start = if text.chars().count() > WIDTH {
            caret.saturating_sub(WIDTH / 2)
        } else {
            0
        };
        let window = |shown: &str| -> String {
            let mut out: String = if start > 0 {
                "…".to_owned()
            } else {
                String::new()
            };
            out.extend(shown.chars().skip(start).take(WIDTH));
            if shown.chars().count() > start + WIDTH {
                out.push('…');
            }
            out
        };
        // Tabs stay tabs so the caret lines up in a terminal.
        let pad: String = (if start > 0 { " " } else { "" }).to_owned()
            + &text
                .chars()
                .skip(start)
                .take(caret - start)
                .map(|c| if c == '\t' { '\t' } else { ' ' })
                .collect::<String>();
        let gutter = " ".repeat(line.to_string().len());
        let first = index.saturating_sub(CONTEXT_LINES);
        let mut out = format!(" --> {name}:{line}:{column}\n{gutter} |");
        for (k, shown) in source.lines().enumerate().take(index + 1).skip(first) {
            let number = (k + 1).to_string();
            let pad_number = " ".repeat(gutter.len() - number.len());
            out.push_str(&format!("\n{pad_number}{number} | {}", window(shown)));
        }
        out.push_str(&format!("\n{gutter} | {pad}^"));
        Some(out)
    }
}

/// How many characters of a line a snippet shows at most.
const WIDTH: usize = 100;

/// How many lines before the located one a snippet shows.
const CONTEXT_LINES: usize = 2;

/// serde-saphyr's own text for a budget breach is `budget breached: Nodes { nodes: 250001 }`;
/// this names the limit in words. `None` for any other error.
fn budget_message(error: &serde_saphyr::Error) -> Option<String> {
    let mut error = error;
    while let serde_saphyr::Error::WithSnippet { error: inner, .. }
    | serde_saphyr::Error::AliasError { error: inner, .. } = error
    {
        error = inner;
    }
    let serde_saphyr::Error::Budget { breach, .. } = error else {
        return None;
    };
    let limits = serde_saphyr::Budget::default();
    let problem = match breach {
        BudgetBreach::Events { .. } => {
            format!("it has more than {} parser events", limits.max_events)
        }
        BudgetBreach::Aliases { .. } => {
            format!("it uses more than {} aliases (*name)", limits.max_aliases)
        }
        BudgetBreach::Anchors { .. } => {
            format!(
                "it defines more than {} anchors (&name)",
                limits.max_anchors
            )
        }
        BudgetBreach::Depth { .. } => format!("it nests deeper than {} levels", limits.max_depth),
        BudgetBreach::Documents { .. } => {
            format!("it holds more than {} documents", limits.max_documents)
        }
        BudgetBreach::Nodes { .. } => format!(
            "it has more than {} values (mappings, lists and scalars)",
            limits.max_nodes
        ),
        BudgetBreach::ScalarBytes { .. } => format!(
            "its text values are larger than {} bytes together",
            limits.max_total_scalar_bytes
        ),
        BudgetBreach::MergeKeys { .. } => {
            format!(
                "it uses more than {} merge keys (<<)",
                limits.max_merge_keys
            )
        }
        BudgetBreach::AliasAnchorRatio { aliases, anchors } => format!(
            "it uses its anchors too often ({aliases} aliases of {anchors} anchors), which would expand it enormously"
        ),
        BudgetBreach::InputBytes { .. } => match limits.max_reader_input_bytes {
            Some(max) => format!("it is larger than {max} bytes"),
            None => "it is too large".to_owned(),
        },
        _ => "it is too large or too deeply nested".to_owned(),
    };
    Some(format!("the YAML document is over a size limit: {problem}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_budget_breach_reads_as_a_size_limit() {
        let yaml = format!("[{}]", vec!["1"; 300_000].join(","));
        let error = serde_saphyr::from_str::<serde_json::Value>(&yaml).expect_err("over budget");
        assert_eq!(
            budget_message(&error).as_deref(),
            Some(
                "the YAML document is over a size limit: it has more than 250000 values (mappings, lists and scalars)"
            )
        );
        let plain = serde_saphyr::from_str::<serde_json::Value>("a: [").expect_err("broken");
        assert_eq!(budget_message(&plain), None);
        let located = Located::from_yaml_error("", &error);
        assert_eq!(
            located.message("profile"),
            format!(
                "profile: {} (line 1, column 500000)",
                budget_message(&error).unwrap_or_default()
            )
        );
        // The snippet of a 600 KB line is a window around the column.
        let snippet = located.snippet(&yaml, "big.yaml").unwrap_or_default();
        assert!(snippet.len() < 400, "{snippet}");
        assert!(snippet.contains("| …1,1,1"), "{snippet}");
    }

    #[test]
    fn a_snippet_keeps_tabs_and_points_at_the_column() {
        let at = Located::new("bad", "x", Some((2, 4)));
        assert_eq!(
            at.snippet("a: 1\n\tbad: 2\n", "f.yaml").as_deref(),
            Some(" --> f.yaml:2:4\n  |\n1 | a: 1\n2 | \tbad: 2\n  | \t  ^")
        );
        assert_eq!(at.snippet("one line", "f.yaml"), None);
        // Two lines of context at most; the gutter fits the widest number.
        let text: String = (1..=10).map(|n| format!("l{n}\n")).collect();
        assert_eq!(
            Located::new("x", "y", Some((10, 2)))
                .snippet(&text, "f")
                .as_deref(),
            Some(" --> f:10:2\n   |\n 8 | l8\n 9 | l9\n10 | l10\n   |  ^")
        );
        assert_eq!(Located::new("", "x", None).snippet("a", "f"), None);
        assert_eq!(Located::new("", "broken", Some((0, 0))).at, None);
    }
}
