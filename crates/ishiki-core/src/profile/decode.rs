//! The hand-written decoder: every section's keys, types and ranges, unknown keys refused
//! (PRO-7), from the located tree.

use super::*;

#[derive(Debug, Clone, Copy)]
pub(super) enum DocKind {
    Profile,
    Models,
}

pub(super) struct Doc<'s> {
    pub(super) kind: DocKind,
    pub(super) source: Option<&'s str>,
}

pub(super) const ROOT_KEYS: &[&str] = &[
    "codemode",
    "toolsearch",
    "attachment",
    "assets",
    "mcp",
    "tools",
];
pub(super) const TOOLS_KEYS: &[&str] = &["timeoutMs", "maxResultBytes"];
pub(super) const MCP_KEYS: &[&str] = &["servers"];
pub(super) const MCP_SERVER_KEYS: &[&str] =
    &["command", "args", "env", "cwd", "resident", "timeoutMs"];
pub(super) const ENABLE_KEYS: &[&str] = &["enable"];
pub(super) const ATTACHMENT_KEYS: &[&str] = &[
    "imageInput",
    "messageImageInput",
    "visionModel",
    "recentImageCount",
    "imagePruneBatchSize",
    "maxImageBytes",
    "maxTotalImageBytes",
    "maxImageCount",
    "maxImageDimension",
];
pub(super) const ASSETS_KEYS: &[&str] = &["autoDownloadMaxBytes", "cleanup"];
pub(super) const CLEANUP_KEYS: &[&str] = &["enabled", "retentionDays", "intervalMinutes"];
pub(super) const MODELS_ROOT_KEYS: &[&str] = &["models", "groups"];
// New model keys (e.g. pricing, context size) only need adding here and in `model_decl`.
pub(super) const MODEL_KEYS: &[&str] = &[
    "input",
    "toolCalling",
    "provider",
    "baseUrl",
    "model",
    "apiKeyEnv",
    "imageLimits",
];
pub(super) const IMAGE_LIMIT_KEYS: &[&str] = &[
    "imageBytes",
    "requestBytes",
    "images",
    "dimension",
    "manyImages",
    "manyImagesDimension",
];

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
        let shown = if path.is_root() {
            self.name().to_owned()
        } else {
            path.to_string()
        };
        let mut message = format!("{shown}: {problem}");
        if let Some((line, column)) = at {
            message.push_str(&format!(" (line {line}, column {column})"));
        }
        AssemblyError {
            kind,
            message,
            path: (!path.is_root()).then_some(shown),
            location: at,
            snippet: at.and_then(|(line, column)| snippet(self.source?, line, column)),
        }
    }

    pub(super) fn parse_yaml(&self, text: &str) -> Result<Tree, AssemblyError> {
        match serde_saphyr::from_str::<Spanned<YamlNode>>(text) {
            Ok(root) => Ok(spanned_tree(root)),
            Err(error) => {
                let at = error.location().as_ref().and_then(at_of);
                let mut problem =
                    crate::yaml_budget::yaml_budget_message(&error).unwrap_or_else(|| {
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
                Err(self.error(self.invalid(), &Path::root(), at, problem))
            }
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

    pub(super) fn profile(&self, tree: &Tree) -> Result<Profile, AssemblyError> {
        let root = Path::root();
        // PRO-6 wins over every other complaint, so check it before the generic key checks.
        if let Some(Tree {
            node: Node::Map(entries),
            ..
        }) = root_field(tree, "attachment")
            && let Some((key, _)) = entries.iter().find(|(k, _)| k.name == "maxImageRenders")
        {
            let path = root.key("attachment").key("maxImageRenders");
            let mut error = self.error(AssemblyErrorKind::RemovedKey, &path, key.at, "");
            error.message = MAX_IMAGE_RENDERS_REMOVED.to_owned();
            return Err(error);
        }

        let entries = self.mapping(tree, &root, ROOT_KEYS)?;

        let path = root.key("codemode");
        let codemode = CodemodeSection {
            enable: self.bool(
                self.section(entries, &root, "codemode", ENABLE_KEYS)?,
                &path,
                "enable",
                false,
            )?,
        };

        let path = root.key("toolsearch");
        let toolsearch = ToolsearchSection {
            enable: self.bool(
                self.section(entries, &root, "toolsearch", ENABLE_KEYS)?,
                &path,
                "enable",
                false,
            )?,
        };

        let path = root.key("attachment");
        let a = self.section(entries, &root, "attachment", ATTACHMENT_KEYS)?;
        let d = AttachmentSection::default();
        let attachment = AttachmentSection {
            image_input: self.bool(a, &path, "imageInput", d.image_input)?,
            message_image_input: self.bool(a, &path, "messageImageInput", d.message_image_input)?,
            vision_model: self.opt_string(a, &path, "visionModel")?,
            recent_image_count: self.uint(a, &path, "recentImageCount", 0, d.recent_image_count)?,
            image_prune_batch_size: self.uint(
                a,
                &path,
                "imagePruneBatchSize",
                1,
                d.image_prune_batch_size,
            )?,
            max_image_bytes: self.uint(a, &path, "maxImageBytes", 1, d.max_image_bytes)?,
            max_total_image_bytes: self.uint(
                a,
                &path,
                "maxTotalImageBytes",
                1,
                d.max_total_image_bytes,
            )?,
            max_image_count: self.uint(a, &path, "maxImageCount", 1, d.max_image_count)?,
            max_image_dimension: self.uint(
                a,
                &path,
                "maxImageDimension",
                1,
                d.max_image_dimension,
            )?,
        };

        let path = root.key("assets");
        let s = self.section(entries, &root, "assets", ASSETS_KEYS)?;
        let d = AssetsSection::default();
        let auto_download_max_bytes = self.uint(
            s,
            &path,
            "autoDownloadMaxBytes",
            0,
            d.auto_download_max_bytes,
        )?;
        let c = self.section(s, &path, "cleanup", CLEANUP_KEYS)?;
        let path = path.key("cleanup");
        let cleanup = CleanupSection {
            enabled: self.bool(c, &path, "enabled", d.cleanup.enabled)?,
            retention_days: self.uint(c, &path, "retentionDays", 1, d.cleanup.retention_days)?,
            interval_minutes: self.uint(
                c,
                &path,
                "intervalMinutes",
                1,
                d.cleanup.interval_minutes,
            )?,
        };

        let path = root.key("mcp");
        let m = self.section(entries, &root, "mcp", MCP_KEYS)?;
        let mut servers = BTreeMap::new();
        if let Some(tree) = field(m, "servers") {
            let path = path.key("servers");
            for (key, decl) in self.named_entries(tree, &path)? {
                let server_path = path.key(&key.name);
                if !key
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                {
                    return Err(self.error(
                        self.invalid(),
                        &server_path,
                        key.at,
                        "a server name uses only letters, digits, `-` and `_` (it prefixes the names of its tools)",
                    ));
                }
                servers.insert(
                    key.name.clone(),
                    self.mcp_server(decl, &server_path, key.at)?,
                );
            }
        }

        let path = root.key("tools");
        let t = self.section(entries, &root, "tools", TOOLS_KEYS)?;
        let d = ToolsSection::default();
        let tools = ToolsSection {
            timeout_ms: self.uint(t, &path, "timeoutMs", 1, d.timeout_ms)?,
            max_result_bytes: self.uint(t, &path, "maxResultBytes", 1, d.max_result_bytes)?,
        };

        Ok(Profile {
            codemode,
            toolsearch,
            attachment,
            assets: AssetsSection {
                auto_download_max_bytes,
                cleanup,
            },
            mcp: McpSection { servers },
            tools,
        })
    }

    pub(super) fn mcp_server(
        &self,
        tree: &Tree,
        path: &Path,
        key_at: At,
    ) -> Result<McpServerDecl, AssemblyError> {
        let entries = self.mapping(tree, path, MCP_SERVER_KEYS)?;
        let Some(command) = self.opt_string(entries, path, "command")? else {
            return Err(self.error(
                self.invalid(),
                path,
                key_at,
                "missing key `command` (the program that starts the server, e.g. npx)",
            ));
        };

        let mut args = Vec::new();
        if let Some(tree) = field(entries, "args") {
            let args_path = path.key("args");
            let items: &[Tree] = match &tree.node {
                Node::Seq(items) => items,
                Node::Null => &[],
                other => {
                    return Err(self.error(
                        self.invalid(),
                        &args_path,
                        tree.at,
                        format!("expected a list of strings, found {}", describe(other)),
                    ));
                }
            };
            for (index, item) in items.iter().enumerate() {
                match &item.node {
                    Node::Str(arg) => args.push(arg.clone()),
                    other => {
                        return Err(self.error(
                            self.invalid(),
                            &args_path.index(index),
                            item.at,
                            format!(
                                "expected a string, found {} (quote numbers and flags)",
                                describe(other)
                            ),
                        ));
                    }
                }
            }
        }

        let mut env = BTreeMap::new();
        if let Some(tree) = field(entries, "env") {
            let env_path = path.key("env");
            for (key, value) in self.named_entries(tree, &env_path)? {
                match &value.node {
                    Node::Str(text) => {
                        env.insert(key.name.clone(), text.clone());
                    }
                    other => {
                        return Err(self.error(
                            self.invalid(),
                            &env_path.key(&key.name),
                            value.at,
                            format!(
                                "expected a string, found {} (quote numbers and booleans)",
                                describe(other)
                            ),
                        ));
                    }
                }
            }
        }

        Ok(McpServerDecl {
            command,
            args,
            env,
            cwd: self.opt_string(entries, path, "cwd")?,
            resident: self.bool(entries, path, "resident", false)?,
            timeout_ms: self.uint(
                entries,
                path,
                "timeoutMs",
                1,
                McpServerDecl::DEFAULT_TIMEOUT_MS,
            )?,
        })
    }

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

pub(super) fn max_of<T: TryFrom<i128>>() -> i128 {
    // The largest value of the form 2^n - 1 that converts: every unsigned target's maximum has
    // that form, and this needs no trait for MAX.
    (0..127u32)
        .map(|shift| i128::MAX >> shift)
        .find(|candidate| T::try_from(*candidate).is_ok())
        .unwrap_or(0)
}
