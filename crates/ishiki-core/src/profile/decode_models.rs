//! Decoding `models.yaml`: its keys, model declarations, groups and image limits.

use std::collections::BTreeMap;

use ishiki_projection::ImageLimits;

use super::assemble::check_groups;
use super::decode::{Doc, Entries};
use super::diagnostic::{AssemblyError, describe};
use super::schema::{Modality, ModelCapabilities, ModelDecl, ModelsDoc, ToolCalling};
use super::tree::{At, Node, Path, Tree, field};

const MODELS_ROOT_KEYS: &[&str] = &["models", "groups"];
// New model keys (e.g. pricing, context size) only need adding here and in `model_decl`.
const MODEL_KEYS: &[&str] = &[
    "input",
    "toolCalling",
    "provider",
    "baseUrl",
    "model",
    "apiKeyEnv",
    "imageLimits",
    "thinking",
    "effort",
    "thinkingBudget",
    "preservedThinking",
    "dropInvalidThinking",
    "systemMessages",
    "nativeCompaction",
    "reasoningSummary",
    "maxOutputTokens",
    "contextWindow",
];
/// The values of a model's `thinking` key.
const THINKING_MODES: &[&str] = &["off", "adaptive", "budget"];
/// The values of a model's `effort` key (Anthropic `output_config.effort`, OpenAI
/// `reasoning.effort`).
const EFFORTS: &[&str] = &["none", "minimal", "low", "medium", "high", "xhigh", "max"];
/// The values of a model's `reasoningSummary` key (OpenAI `reasoning.summary`).
const SUMMARIES: &[&str] = &["auto", "concise", "detailed"];
const IMAGE_LIMIT_KEYS: &[&str] = &[
    "imageBytes",
    "requestBytes",
    "images",
    "dimension",
    "manyImages",
    "manyImagesDimension",
];

impl Doc<'_> {
    pub(super) fn models(&self, tree: &Tree) -> Result<ModelsDoc, AssemblyError> {
        let root = Path::root();
        let entries = self.mapping(tree, &root, MODELS_ROOT_KEYS)?;

        let mut models = BTreeMap::new();
        if let Some(tree) = field(entries, "models") {
            let path = root.key("models");
            for (key, decl) in self.named_entries(tree, &path)? {
                models.insert(
                    key.name.clone(),
                    self.model_decl(decl, &path.key(&key.name), key.at)?,
                );
            }
        }

        let mut groups = BTreeMap::new();
        let mut locations: BTreeMap<(String, Option<usize>), At> = BTreeMap::new();
        if let Some(tree) = field(entries, "groups") {
            let path = root.key("groups");
            for (key, list) in self.named_entries(tree, &path)? {
                let group_path = path.key(&key.name);
                locations.insert((key.name.clone(), None), key.at);
                let items = match &list.node {
                    Node::Seq(items) => items,
                    other => {
                        return Err(self.error(
                            self.invalid(),
                            &group_path,
                            list.at,
                            format!("expected a list of model names, found {}", describe(other)),
                        ));
                    }
                };
                let mut members = Vec::new();
                for (index, item) in items.iter().enumerate() {
                    match &item.node {
                        Node::Str(name) => members.push(name.clone()),
                        other => {
                            return Err(self.error(
                                self.invalid(),
                                &group_path.index(index),
                                item.at,
                                format!("expected a model name, found {}", describe(other)),
                            ));
                        }
                    }
                    locations.insert((key.name.clone(), Some(index)), item.at);
                }
                groups.insert(key.name.clone(), members);
            }
        }

        let doc = ModelsDoc { models, groups };
        let at = |group: &str, index: Option<usize>| {
            locations.get(&(group.to_owned(), index)).copied().flatten()
        };
        check_groups(&doc, &at, self.source)?;
        Ok(doc)
    }

    /// A mapping from free names (models, groups) to values; names must not be blank.
    pub(super) fn named_entries<'t>(
        &self,
        tree: &'t Tree,
        path: &Path,
    ) -> Result<Entries<'t>, AssemblyError> {
        let entries: Entries<'t> = match &tree.node {
            Node::Map(entries) => entries,
            Node::Null => &[],
            other => {
                return Err(self.error(
                    self.invalid(),
                    path,
                    tree.at,
                    format!("expected a mapping of names, found {}", describe(other)),
                ));
            }
        };
        if let Some((key, _)) = entries.iter().find(|(k, _)| k.name.trim().is_empty()) {
            return Err(self.error(
                self.invalid(),
                &path.key(&key.name),
                key.at,
                "a name must not be blank",
            ));
        }
        Ok(entries)
    }

    pub(super) fn model_decl(
        &self,
        tree: &Tree,
        path: &Path,
        key_at: At,
    ) -> Result<ModelDecl, AssemblyError> {
        let entries = self.mapping(tree, path, MODEL_KEYS)?;
        let Some(input) = field(entries, "input") else {
            return Err(self.error(
                self.invalid(),
                path,
                key_at,
                "missing key `input` (the modalities the model accepts, e.g. [text, image])",
            ));
        };
        let input_path = path.key("input");
        let items = match &input.node {
            Node::Seq(items) => items,
            other => {
                return Err(self.error(
                    self.invalid(),
                    &input_path,
                    input.at,
                    format!("expected a list of modalities, found {}", describe(other)),
                ));
            }
        };
        if items.is_empty() {
            return Err(self.error(
                self.invalid(),
                &input_path,
                input.at,
                "must list at least one modality",
            ));
        }
        let mut modalities = Vec::new();
        for (index, item) in items.iter().enumerate() {
            let modality = match &item.node {
                Node::Str(name) => Modality::from_name(name),
                _ => None,
            };
            match modality {
                Some(m) => modalities.push(m),
                None => {
                    let names: Vec<&str> = Modality::ALL.iter().map(|m| m.as_str()).collect();
                    let problem = match &item.node {
                        Node::Str(name) => format!("unknown modality `{name}`"),
                        other => format!("expected a modality, found {}", describe(other)),
                    };
                    return Err(self.error(
                        self.invalid(),
                        &input_path.index(index),
                        item.at,
                        format!("{problem} (expected one of: {})", names.join(", ")),
                    ));
                }
            }
        }

        let tool_calling = match field(entries, "toolCalling") {
            None => ToolCalling::default(),
            Some(tree) => match &tree.node {
                Node::Str(s) if s == "native" => ToolCalling::Native,
                Node::Str(s) if s == "text" => ToolCalling::Text,
                other => {
                    return Err(self.error(
                        self.invalid(),
                        &path.key("toolCalling"),
                        tree.at,
                        format!("expected `native` or `text`, found {}", describe(other)),
                    ));
                }
            },
        };

        let opt_bool = |key: &str| -> Result<Option<bool>, AssemblyError> {
            match field(entries, key) {
                None => Ok(None),
                Some(_) => self.bool(entries, path, key, false).map(Some),
            }
        };
        let opt_uint = |key: &str, min: u64| -> Result<Option<u32>, AssemblyError> {
            match field(entries, key) {
                None => Ok(None),
                Some(_) => self.uint(entries, path, key, min, 0u32).map(Some),
            }
        };
        let capabilities = ModelCapabilities {
            thinking: self.opt_choice(entries, path, "thinking", THINKING_MODES)?,
            effort: self.opt_choice(entries, path, "effort", EFFORTS)?,
            thinking_budget: opt_uint("thinkingBudget", 1024)?,
            preserved_thinking: opt_bool("preservedThinking")?,
            drop_invalid_thinking: opt_bool("dropInvalidThinking")?,
            system_messages: opt_bool("systemMessages")?,
            native_compaction: opt_bool("nativeCompaction")?,
            reasoning_summary: self.opt_choice(entries, path, "reasoningSummary", SUMMARIES)?,
            max_output_tokens: opt_uint("maxOutputTokens", 1)?,
            context_window: opt_uint("contextWindow", 1024)?,
        };
        if capabilities.thinking.as_deref() == Some("budget")
            && capabilities.thinking_budget.is_none()
        {
            return Err(self.error(
                self.invalid(),
                &path.key("thinking"),
                field(entries, "thinking").and_then(|t| t.at),
                "`budget` needs `thinkingBudget` (the thinking tokens, at least 1024)",
            ));
        }
        if let (Some(budget), Some(max)) =
            (capabilities.thinking_budget, capabilities.max_output_tokens)
            && budget >= max
        {
            return Err(self.error(
                self.invalid(),
                &path.key("thinkingBudget"),
                field(entries, "thinkingBudget").and_then(|t| t.at),
                format!("must be below maxOutputTokens ({max}): thinking counts toward the output"),
            ));
        }
        if let (Some(max), Some(window)) =
            (capabilities.max_output_tokens, capabilities.context_window)
            && max >= window
        {
            return Err(self.error(
                self.invalid(),
                &path.key("maxOutputTokens"),
                field(entries, "maxOutputTokens").and_then(|t| t.at),
                format!("must be below contextWindow ({window})"),
            ));
        }

        Ok(ModelDecl {
            input: modalities,
            tool_calling,
            provider: self.opt_string(entries, path, "provider")?,
            base_url: self.opt_string(entries, path, "baseUrl")?,
            model: self.opt_string(entries, path, "model")?,
            api_key_env: self.opt_string(entries, path, "apiKeyEnv")?,
            image_limits: self.image_limits(entries, path)?,
            capabilities,
        })
    }

    /// An optional string key that must be one of `choices`.
    fn opt_choice(
        &self,
        entries: Entries<'_>,
        path: &Path,
        key: &str,
        choices: &[&str],
    ) -> Result<Option<String>, AssemblyError> {
        let Some(tree) = field(entries, key) else {
            return Ok(None);
        };
        match &tree.node {
            Node::Str(s) if choices.contains(&s.as_str()) => Ok(Some(s.clone())),
            other => Err(self.error(
                self.invalid(),
                &path.key(key),
                tree.at,
                format!(
                    "expected one of {}, found {}",
                    choices.join(", "),
                    describe(other)
                ),
            )),
        }
    }

    /// A model's `imageLimits` overrides; every key optional, every value at least 1.
    pub(super) fn image_limits(
        &self,
        entries: Entries<'_>,
        path: &Path,
    ) -> Result<Option<ImageLimits>, AssemblyError> {
        let Some(tree) = field(entries, "imageLimits") else {
            return Ok(None);
        };
        let path = path.key("imageLimits");
        let limits = self.mapping(tree, &path, IMAGE_LIMIT_KEYS)?;
        let set = |key: &str| field(limits, key).is_some();
        let u64_of = |key: &str| -> Result<Option<u64>, AssemblyError> {
            if set(key) {
                Ok(Some(self.uint(limits, &path, key, 1, 0u64)?))
            } else {
                Ok(None)
            }
        };
        let usize_of = |key: &str| -> Result<Option<usize>, AssemblyError> {
            if set(key) {
                Ok(Some(self.uint(limits, &path, key, 0, 0usize)?))
            } else {
                Ok(None)
            }
        };
        let u32_of = |key: &str| -> Result<Option<u32>, AssemblyError> {
            if set(key) {
                Ok(Some(self.uint(limits, &path, key, 1, 0u32)?))
            } else {
                Ok(None)
            }
        };
        let images = if set("images") {
            Some(self.uint(limits, &path, "images", 1, 0usize)?)
        } else {
            None
        };
        Ok(Some(ImageLimits {
            provider: String::new(),
            image_bytes: u64_of("imageBytes")?,
            request_bytes: u64_of("requestBytes")?,
            images,
            dimension: u32_of("dimension")?,
            many_images: usize_of("manyImages")?,
            many_images_dimension: u32_of("manyImagesDimension")?,
        }))
    }
}
