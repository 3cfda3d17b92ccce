//! The hand-written decoder's core: typed readers for keys, types and ranges, unknown keys refused
//! (PRO-7), from the located tree.

use std::fmt;

use serde_json::Value;
use serde_saphyr::Spanned;

use super::diagnostic::{AssemblyError, AssemblyErrorKind, describe, suggest};
use super::tree::{At, Key, MAX_DEPTH, Node, Path, Tree, YamlNode, field, spanned_tree};
use crate::located::Located;

#[derive(Debug, Clone, Copy)]
pub(super) enum DocKind {
    Profile,
    Models,
}

pub(super) struct Doc<'s> {
    pub(super) kind: DocKind,
    pub(super) source: Option<&'s str>,
}

pub(super) type Entries<'t> = &'t [(Key, Tree)];

impl Doc<'_> {
    pub(super) fn invalid(&self) -> AssemblyErrorKind {
        match self.kind {
            DocKind::Profile => AssemblyErrorKind::InvalidProfile,
            DocKind::Models => AssemblyErrorKind::InvalidModels,
        }
    }

    pub(super) fn name(&self) -> &'static str {
        match self.kind {
            DocKind::Profile => "profile",
            DocKind::Models => "models file",
        }
    }

    pub(super) fn error(
        &self,
        kind: AssemblyErrorKind,
        path: &Path,
        at: At,
        problem: impl fmt::Display,
    ) -> AssemblyError {
        let shown = (!path.is_root()).then(|| path.to_string());
        self.located(
            kind,
            Located::new(shown.unwrap_or_default(), problem.to_string(), at),
        )
    }

    fn located(&self, kind: AssemblyErrorKind, located: Located) -> AssemblyError {
        AssemblyError {
            kind,
            message: located.message(self.name()),
            path: (!located.path.is_empty()).then(|| located.path.clone()),
            location: located.at,
            snippet: self
                .source
                .and_then(|source| located.snippet(source, self.name())),
        }
    }

    pub(super) fn parse_yaml(&self, text: &str) -> Result<Tree, AssemblyError> {
        match serde_saphyr::from_str::<Spanned<YamlNode>>(text) {
            Ok(root) => Ok(spanned_tree(root)),
            Err(error) => Err(self.located(self.invalid(), Located::from_yaml_error("", &error))),
        }
    }

    pub(super) fn tree_from_json(&self, value: &Value) -> Result<Tree, AssemblyError> {
        self.json_tree(value, &Path::root(), 0)
    }

    pub(super) fn json_tree(
        &self,
        value: &Value,
        path: &Path,
        depth: usize,
    ) -> Result<Tree, AssemblyError> {
        if depth > MAX_DEPTH {
            return Err(self.error(
                self.invalid(),
                path,
                None,
                format!("nested deeper than {MAX_DEPTH} levels"),
            ));
        }
        let node = match value {
            Value::Null => Node::Null,
            Value::Bool(b) => Node::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64()) {
                (Some(i), _) => Node::Int(i.into()),
                (None, Some(u)) => Node::Int(u.into()),
                _ => Node::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            Value::String(s) => Node::Str(s.clone()),
            Value::Array(items) => Node::Seq(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| self.json_tree(item, &path.index(i), depth + 1))
                    .collect::<Result<_, _>>()?,
            ),
            Value::Object(map) => Node::Map(
                map.iter()
                    .map(|(k, v)| {
                        Ok((
                            Key {
                                name: k.clone(),
                                at: None,
                            },
                            self.json_tree(v, &path.key(k), depth + 1)?,
                        ))
                    })
                    .collect::<Result<_, AssemblyError>>()?,
            ),
        };
        Ok(Tree { node, at: None })
    }

    /// The entries of a mapping whose keys must all be in `allowed`; `null` (an empty YAML
    /// section such as `codemode:`) counts as an empty mapping.
    pub(super) fn mapping<'t>(
        &self,
        tree: &'t Tree,
        path: &Path,
        allowed: &[&str],
    ) -> Result<Entries<'t>, AssemblyError> {
        let entries: Entries<'t> = match &tree.node {
            Node::Map(entries) => entries,
            Node::Null => &[],
            other => {
                return Err(self.error(
                    self.invalid(),
                    path,
                    tree.at,
                    format!("expected a mapping, found {}", describe(other)),
                ));
            }
        };
        for (key, _) in entries {
            if !allowed.contains(&key.name.as_str()) {
                let hint = match suggest(&key.name, allowed) {
                    Some(known) => format!("did you mean `{known}`?"),
                    None => format!("expected one of: {}", allowed.join(", ")),
                };
                return Err(self.error(
                    self.invalid(),
                    &path.key(&key.name),
                    key.at,
                    format!("unknown key ({hint})"),
                ));
            }
        }
        Ok(entries)
    }

    pub(super) fn bool(
        &self,
        entries: Entries<'_>,
        path: &Path,
        key: &str,
        default: bool,
    ) -> Result<bool, AssemblyError> {
        let Some(tree) = field(entries, key) else {
            return Ok(default);
        };
        match &tree.node {
            Node::Bool(b) => Ok(*b),
            other => Err(self.error(
                self.invalid(),
                &path.key(key),
                tree.at,
                format!("expected true or false, found {}", describe(other)),
            )),
        }
    }

    pub(super) fn uint<T>(
        &self,
        entries: Entries<'_>,
        path: &Path,
        key: &str,
        min: u64,
        default: T,
    ) -> Result<T, AssemblyError>
    where
        T: TryFrom<i128> + Copy,
    {
        let Some(tree) = field(entries, key) else {
            return Ok(default);
        };
        let path = path.key(key);
        let value = match &tree.node {
            Node::Int(v) => *v,
            other => {
                return Err(self.error(
                    self.invalid(),
                    &path,
                    tree.at,
                    format!("expected a whole number, found {}", describe(other)),
                ));
            }
        };
        if value < i128::from(min) {
            return Err(self.error(
                self.invalid(),
                &path,
                tree.at,
                format!("must be at least {min}, found {value}"),
            ));
        }
        T::try_from(value).map_err(|_| {
            self.error(
                self.invalid(),
                &path,
                tree.at,
                format!("must be at most {}, found {value}", max_of::<T>()),
            )
        })
    }

    /// A share in (0, 1]: a number of the window, e.g. `0.75`.
    pub(super) fn share(
        &self,
        entries: Entries<'_>,
        path: &Path,
        key: &str,
        default: f64,
    ) -> Result<f64, AssemblyError> {
        let Some(tree) = field(entries, key) else {
            return Ok(default);
        };
        let value = match &tree.node {
            Node::Float(v) => *v,
            Node::Int(v) if *v == 1 => 1.0,
            other => {
                return Err(self.error(
                    self.invalid(),
                    &path.key(key),
                    tree.at,
                    format!(
                        "expected a share of the window between 0 and 1 (e.g. 0.75), found {}",
                        describe(other)
                    ),
                ));
            }
        };
        if !(value > 0.0 && value <= 1.0) {
            return Err(self.error(
                self.invalid(),
                &path.key(key),
                tree.at,
                format!("must be a share of the window above 0 and at most 1, found {value}"),
            ));
        }
        Ok(value)
    }

    /// A list of non-empty strings (missing: empty).
    pub(super) fn strings(
        &self,
        entries: Entries<'_>,
        path: &Path,
        key: &str,
    ) -> Result<Vec<String>, AssemblyError> {
        let Some(tree) = field(entries, key) else {
            return Ok(Vec::new());
        };
        let path = path.key(key);
        let items: &[Tree] = match &tree.node {
            Node::Seq(items) => items,
            Node::Null => &[],
            other => {
                return Err(self.error(
                    self.invalid(),
                    &path,
                    tree.at,
                    format!("expected a list of strings, found {}", describe(other)),
                ));
            }
        };
        let mut out = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            match &item.node {
                Node::Str(s) if !s.trim().is_empty() => out.push(s.clone()),
                other => {
                    return Err(self.error(
                        self.invalid(),
                        &path.index(index),
                        item.at,
                        format!("expected a tool name, found {}", describe(other)),
                    ));
                }
            }
        }
        Ok(out)
    }

    pub(super) fn opt_string(
        &self,
        entries: Entries<'_>,
        path: &Path,
        key: &str,
    ) -> Result<Option<String>, AssemblyError> {
        let Some(tree) = field(entries, key) else {
            return Ok(None);
        };
        match &tree.node {
            Node::Null => Ok(None),
            Node::Str(s) if s.trim().is_empty() => Err(self.error(
                self.invalid(),
                &path.key(key),
                tree.at,
                "must not be empty (leave the key out instead)",
            )),
            Node::Str(s) => Ok(Some(s.clone())),
            other => Err(self.error(
                self.invalid(),
                &path.key(key),
                tree.at,
                format!("expected a string, found {}", describe(other)),
            )),
        }
    }

    pub(super) fn section<'t>(
        &self,
        entries: Entries<'t>,
        path: &Path,
        key: &str,
        allowed: &[&str],
    ) -> Result<Entries<'t>, AssemblyError> {
        match field(entries, key) {
            Some(tree) => self.mapping(tree, &path.key(key), allowed),
            None => Ok(&[]),
        }
    }
}

pub(super) fn max_of<T: TryFrom<i128>>() -> i128 {
    // The largest value of the form 2^n - 1 that converts: every unsigned target's maximum has
    // that form, and this needs no trait for MAX.
    (0..127u32)
        .map(|shift| i128::MAX >> shift)
        .find(|candidate| T::try_from(*candidate).is_ok())
        .unwrap_or(0)
}
