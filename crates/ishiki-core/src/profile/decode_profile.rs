//! Decoding a profile (PRO-1..PRO-7): its keys, sections and MCP server entries.

use super::*;

const ROOT_KEYS: &[&str] = &[
    "codemode",
    "toolsearch",
    "attachment",
    "assets",
    "mcp",
    "tools",
    "context",
];
const CONTEXT_KEYS: &[&str] = &[
    "foldAt",
    "foldAtLeast",
    "keep",
    "neverFold",
    "foldInputs",
    "compactAt",
    "compactionModel",
];
const TOOLS_KEYS: &[&str] = &["timeoutMs", "maxResultBytes"];
const MCP_KEYS: &[&str] = &["servers"];
const MCP_SERVER_KEYS: &[&str] = &["command", "args", "env", "cwd", "resident", "timeoutMs"];
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
const ASSETS_KEYS: &[&str] = &["autoDownloadMaxBytes", "cleanup"];
const CLEANUP_KEYS: &[&str] = &["enabled", "retentionDays", "intervalMinutes"];

impl Doc<'_> {
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
        let d = AttachmentConfig::default();
        let min = AttachmentConfig::minimum;
        let attachment = AttachmentConfig {
            image_input: self.bool(a, &path, "imageInput", d.image_input)?,
            message_image_input: self.bool(a, &path, "messageImageInput", d.message_image_input)?,
            vision_model: self.opt_string(a, &path, "visionModel")?,
            recent_image_count: self.uint(
                a,
                &path,
                "recentImageCount",
                min("recentImageCount"),
                d.recent_image_count,
            )?,
            image_prune_batch_size: self.uint(
                a,
                &path,
                "imagePruneBatchSize",
                min("imagePruneBatchSize"),
                d.image_prune_batch_size,
            )?,
            max_image_bytes: self.uint(
                a,
                &path,
                "maxImageBytes",
                min("maxImageBytes"),
                d.max_image_bytes,
            )?,
            max_total_image_bytes: self.uint(
                a,
                &path,
                "maxTotalImageBytes",
                min("maxTotalImageBytes"),
                d.max_total_image_bytes,
            )?,
            max_image_count: self.uint(
                a,
                &path,
                "maxImageCount",
                min("maxImageCount"),
                d.max_image_count,
            )?,
            max_image_dimension: self.uint(
                a,
                &path,
                "maxImageDimension",
                min("maxImageDimension"),
                d.max_image_dimension,
            )?,
            provider_limits: d.provider_limits,
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

        let path = root.key("context");
        let c = self.section(entries, &root, "context", CONTEXT_KEYS)?;
        let d = ContextConfig::default();
        let fold_at = self.share(c, &path, "foldAt", d.fold_at)?;
        let compact_at = self.share(c, &path, "compactAt", d.compact_at)?;
        if compact_at < fold_at {
            return Err(self.error(
                self.invalid(),
                &path.key("compactAt"),
                field(c, "compactAt").and_then(|t| t.at),
                format!("must be at least foldAt ({fold_at}): compaction comes after folding"),
            ));
        }
        let context = ContextConfig {
            fold_at,
            fold_at_least: match field(c, "foldAtLeast") {
                Some(_) => Some(self.uint(c, &path, "foldAtLeast", 1, 0u64)?),
                None => None,
            },
            keep: self.uint(c, &path, "keep", 0, d.keep)?,
            never_fold: self.strings(c, &path, "neverFold")?,
            fold_inputs: self.bool(c, &path, "foldInputs", d.fold_inputs)?,
            compact_at,
            compaction_model: self.opt_string(c, &path, "compactionModel")?,
        };

        Ok(Profile {
            context,
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
}
