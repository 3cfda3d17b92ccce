//! Decoding `models.yaml`: its keys, model declarations, groups and image limits.

use super::*;

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
];
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

        Ok(ModelDecl {
            input: modalities,
            tool_calling,
            provider: self.opt_string(entries, path, "provider")?,
            base_url: self.opt_string(entries, path, "baseUrl")?,
            model: self.opt_string(entries, path, "model")?,
            api_key_env: self.opt_string(entries, path, "apiKeyEnv")?,
            image_limits: self.image_limits(entries, path)?,
        })
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
