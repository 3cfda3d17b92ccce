//! The located tree both documents are decoded from (YAML with line and column, or JSON
//! values), and the key paths errors name.

use std::fmt;

use serde::de;
use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_saphyr::{Location, Spanned};

use super::decode::Entries;

pub(super) type At = Option<(usize, usize)>;

#[derive(Debug)]
pub(super) enum Node {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Tree>),
    Map(Vec<(Key, Tree)>),
}

#[derive(Debug)]
pub(super) struct Tree {
    pub(super) node: Node,
    pub(super) at: At,
}

#[derive(Debug)]
pub(super) struct Key {
    pub(super) name: String,
    pub(super) at: At,
}

/// Deeper nesting than this is refused; it bounds the recursion over JSON values (serde-saphyr
/// applies its own depth budget of the same size to YAML).
pub(super) const MAX_DEPTH: usize = 64;

pub(super) fn at_of(location: &Location) -> At {
    let line = usize::try_from(location.line()).ok()?;
    let column = usize::try_from(location.column()).ok()?;
    (line > 0).then_some((line, column))
}

/// A YAML node as serde-saphyr hands it over; its children carry their spans.
pub(super) struct YamlNode(Node);

pub(super) fn spanned_tree(spanned: Spanned<YamlNode>) -> Tree {
    Tree {
        at: at_of(&spanned.referenced),
        node: spanned.value.0,
    }
}

impl<'de> Deserialize<'de> for YamlNode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(YamlNodeVisitor)
    }
}

pub(super) struct YamlNodeVisitor;

impl<'de> Visitor<'de> for YamlNodeVisitor {
    type Value = YamlNode;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any YAML value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Bool(v)))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Int(v.into())))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Int(v.into())))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Int(v)))
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<YamlNode, E> {
        Ok(YamlNode(match i128::try_from(v) {
            Ok(v) => Node::Int(v),
            // Beyond i128 only the magnitude matters for a range error.
            Err(_) => Node::Float(v as f64),
        }))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Float(v)))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Str(v.to_owned())))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Str(v)))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Str(String::from_utf8_lossy(v).into_owned())))
    }

    fn visit_unit<E: de::Error>(self) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Null))
    }

    fn visit_none<E: de::Error>(self) -> Result<YamlNode, E> {
        Ok(YamlNode(Node::Null))
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<YamlNode, D::Error> {
        YamlNode::deserialize(deserializer)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(
        self,
        deserializer: D,
    ) -> Result<YamlNode, D::Error> {
        YamlNode::deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<YamlNode, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Spanned<YamlNode>>()? {
            items.push(spanned_tree(item));
        }
        Ok(YamlNode(Node::Seq(items)))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<YamlNode, A::Error> {
        let mut entries = Vec::new();
        // Keys are read as strings: serde-saphyr then keeps `on:` or `1:` as written instead of
        // resolving them to a boolean or a number.
        while let Some(key) = map.next_key::<Spanned<String>>()? {
            let value = map.next_value::<Spanned<YamlNode>>()?;
            entries.push((
                Key {
                    at: at_of(&key.referenced),
                    name: key.value,
                },
                spanned_tree(value),
            ));
        }
        Ok(YamlNode(Node::Map(entries)))
    }
}

#[derive(Debug, Clone)]
pub(super) enum Seg {
    Key(String),
    Index(usize),
}

#[derive(Debug, Clone)]
pub(super) struct Path(Vec<Seg>);

impl Path {
    pub(super) fn root() -> Path {
        Path(Vec::new())
    }

    pub(super) fn key(&self, key: &str) -> Path {
        let mut segs = self.0.clone();
        segs.push(Seg::Key(key.to_owned()));
        Path(segs)
    }

    pub(super) fn index(&self, index: usize) -> Path {
        let mut segs = self.0.clone();
        segs.push(Seg::Index(index));
        Path(segs)
    }

    pub(super) fn is_root(&self) -> bool {
        self.0.is_empty()
    }
}

impl fmt::Display for Path {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Key(key) => {
                    let plain = !key.is_empty()
                        && key
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
                    if i > 0 {
                        f.write_str(".")?;
                    }
                    if plain {
                        f.write_str(key)?;
                    } else {
                        // Quoting keeps `models."gpt-4.1"` unambiguous.
                        write!(f, "{}", Value::String(key.clone()))?;
                    }
                }
                Seg::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

pub(super) fn field<'t>(entries: Entries<'t>, key: &str) -> Option<&'t Tree> {
    entries.iter().find(|(k, _)| k.name == key).map(|(_, v)| v)
}

pub(super) fn root_field<'t>(tree: &'t Tree, key: &str) -> Option<&'t Tree> {
    match &tree.node {
        Node::Map(entries) => field(entries, key),
        _ => None,
    }
}
