//! `ishiki scenario run`: replays a scenario against the real runtime with a scripted model and
//! prints the transcript (docs/scenario-format.md). Everything below the scripted model is real.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use ishiki_core::{
    ManualClock, ModelResponse, ModelsDoc, Profile, Runtime, ToolCall, ToolDef, WorkerSpawn,
    WorkspaceScheme, assemble,
};

use crate::fixture_tools::{
    DeclaredTool, ExampleScheme, RecordingPlatform, ScriptedVision, fixture_tool,
};
use crate::interpolate::{CallInput, continuation_input};
use crate::scenario::{Scenario, Step, ToolSpec, VisionAnswer};
use crate::transcript::{
    Continuation, Data, Dropped, End, ErrorEvent, Event, Format, Inbound, ModelFailed,
    RequestEvent, Sent, ToolResultEvent, TranscriptWriter,
};

/// Options of one run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The scenario file.
    pub file: PathBuf,
    /// Where state lives; a fresh temporary directory when `None`.
    pub state: Option<PathBuf>,
    /// Omit base64 `data` of media parts.
    pub no_data: bool,
    /// JSON Lines (the contract) or readable text.
    pub format: Format,
    /// How codemode workers start (the binary re-executes itself).
    pub worker: WorkerSpawn,
    /// `--semantic-model DIR`: sets the profile's `toolsearch.semantic.model` (TS-7).
    pub semantic_model: Option<PathBuf>,
}

/// How a run ended, as a process exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The scenario ran to its end (tool errors are results, not failures).
    Ok = 0,
    /// The runtime itself failed (e.g. the state directory is unusable).
    Failed = 1,
    /// The scenario file is malformed, or assembly failed.
    Invalid = 2,
}

/// The fake clock's start: 2026-01-01T00:00:00Z.
pub const START: Duration = Duration::from_secs(1_767_225_600);

/// Runs a scenario, writing the transcript to `out` and diagnostics to `err`.
pub fn run(options: &RunOptions, out: &mut dyn Write, err: &mut dyn Write) -> Exit {
    let scenario = match crate::scenario::load(&options.file) {
        Ok(s) => s,
        Err(e) => {
            let _ = writeln!(err, "ishiki: {e}");
            return Exit::Invalid;
        }
    };
    let temp;
    let state = match &options.state {
        Some(dir) => dir.clone(),
        None => match tempfile::tempdir() {
            Ok(dir) => {
                temp = dir;
                temp.path().to_path_buf()
            }
            Err(e) => {
                let _ = writeln!(
                    err,
                    "ishiki: cannot create a temporary state directory: {e}"
                );
                return Exit::Failed;
            }
        },
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = writeln!(err, "ishiki: cannot start the async runtime: {e}");
            return Exit::Failed;
        }
    };
    let data = if options.no_data {
        Data::Omit
    } else {
        Data::Include
    };
    let mut writer = TranscriptWriter::new(out, options.format, data);
    let mut warnings = Vec::new();
    let result =
        runtime.block_on(Runner::new(&scenario, &state, options).run(&mut writer, &mut warnings));
    // What was left out but did not stop the run (an MCP tool with a bad name or schema) goes
    // to stderr, so the transcript stays the same.
    for warning in warnings {
        let _ = writeln!(err, "ishiki: warning: {warning}");
    }
    match result {
        Ok(exit) => exit,
        Err(RunError::Invalid(message)) => {
            let _ = writeln!(err, "ishiki: {message}");
            Exit::Invalid
        }
        Err(RunError::Failed(message)) => {
            let _ = writeln!(err, "ishiki: {message}");
            Exit::Failed
        }
    }
}

/// Applies `--semantic-model` (`flag`, which sets `toolsearch.semantic.model`) and resolves a
/// relative model directory the profile names against `base`, the directory of the file that
/// holds the profile, as a relative MCP `cwd` is.
pub(crate) fn semantic_profile(profile: &mut Profile, flag: Option<&Path>, base: &Path) {
    if let Some(dir) = flag {
        profile.toolsearch.semantic = Some(ishiki_core::profile::SemanticSection {
            model: dir.to_string_lossy().into_owned(),
        });
    } else if let Some(semantic) = &mut profile.toolsearch.semantic
        && Path::new(&semantic.model).is_relative()
    {
        semantic.model = base.join(&semantic.model).to_string_lossy().into_owned();
    }
}

#[derive(Debug)]
enum RunError {
    Invalid(String),
    Failed(String),
}

fn failed(e: impl std::fmt::Display) -> RunError {
    RunError::Failed(e.to_string())
}

struct Runner<'a> {
    scenario: &'a Scenario,
    state: &'a Path,
    options: &'a RunOptions,
    clock: Arc<ManualClock>,
    platform: Arc<RecordingPlatform>,
    vision: Arc<ScriptedVision>,
    /// The scripted compaction model's answers, in order.
    compaction: std::sync::Mutex<std::collections::VecDeque<Result<String, String>>>,
    examples: Arc<ExampleScheme>,
    /// The profile's MCP servers, started once; their tools as last listed join every runtime
    /// built (also after a `restart` step).
    mcp_servers: Vec<Arc<ishiki_mcp::McpServer>>,
    /// The sentence-embedding model of `toolsearch.semantic`, loaded once for every runtime.
    semantic_model: Option<Arc<ishiki_core::Embedder>>,
}

impl<'a> Runner<'a> {
    fn new(scenario: &'a Scenario, state: &'a Path, options: &'a RunOptions) -> Self {
        let answers = scenario
            .vision
            .iter()
            .map(|a| match a {
                VisionAnswer::Reply(text) => Ok(text.clone()),
                VisionAnswer::Fail(reason) => Err(reason.clone()),
            })
            .collect();
        Self {
            scenario,
            state,
            options,
            clock: Arc::new(ManualClock::new(UNIX_EPOCH + START)),
            platform: Arc::new(RecordingPlatform::default()),
            vision: Arc::new(ScriptedVision::new(answers)),
            compaction: std::sync::Mutex::new(
                scenario
                    .compaction
                    .iter()
                    .map(|a| match a {
                        VisionAnswer::Reply(text) => Ok(text.clone()),
                        VisionAnswer::Fail(reason) => Err(reason.clone()),
                    })
                    .collect(),
            ),
            examples: Arc::new(ExampleScheme::default()),
            mcp_servers: Vec::new(),
            semantic_model: None,
        }
    }

    /// Every event moves the fake clock one second (docs/scenario-format.md "Determinism").
    fn emit<W: Write>(
        &self,
        writer: &mut TranscriptWriter<W>,
        event: Event,
    ) -> Result<(), RunError> {
        self.clock.advance(Duration::from_secs(1));
        writer.emit(event).map_err(failed)
    }

    fn workspace_root(&self) -> PathBuf {
        self.state.join("workspace")
    }

    fn local_root(&self) -> PathBuf {
        self.state.join("local")
    }

    fn write_fixtures(&self) -> Result<(), RunError> {
        let workspace = WorkspaceScheme::new(self.workspace_root()).map_err(failed)?;
        for file in &self.scenario.workspace {
            workspace
                .write(&file.path, &file.bytes)
                .map_err(|e| RunError::Invalid(format!("workspace file `{}`: {e}", file.path)))?;
        }
        for file in &self.scenario.local {
            let relative = file.path.trim_start_matches('/');
            if relative.split('/').any(|s| s == ".." || s.is_empty()) {
                return Err(RunError::Invalid(format!(
                    "local file `{}`: the path must stay under the local root",
                    file.path
                )));
            }
            let path = self.local_root().join(relative);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(failed)?;
            }
            std::fs::write(&path, &file.bytes).map_err(failed)?;
        }
        std::fs::create_dir_all(self.local_root()).map_err(failed)?;
        Ok(())
    }

    async fn build(&self, assembly: ishiki_core::Assembly) -> Result<Runtime, RunError> {
        let workspace = Arc::new(WorkspaceScheme::new(self.workspace_root()).map_err(failed)?);
        // A scripted model declared with `preservedThinking: true` gets the edit policy of such
        // models, so a scenario shows what a live session would send.
        let policy = if assembly.main.capabilities.preserved_thinking == Some(true) {
            ishiki_core::EditPolicy::AtUserTurns
        } else {
            ishiki_core::EditPolicy::Immediate
        };
        let mut builder = Runtime::builder(assembly, self.state)
            .edit_policy(policy)
            .workspace_root(self.workspace_root())
            .local_root("", self.local_root())
            .clock(self.clock.clone())
            .platform(self.platform.clone())
            .vision(self.vision.clone())
            .scheme(self.examples.clone())
            .codemode_worker(self.options.worker.clone())
            // The instruction budget must end a spinning program long before the wall clock
            // does, whatever the machine's load, or the transcript would depend on timing.
            .codemode_limits(ishiki_core::Limits {
                timeout: Duration::from_secs(60),
                instruction_budget: 200_000_000,
                ..ishiki_core::Limits::default()
            })
            .durability(ishiki_core::Durability::Normal);
        if let Some(model) = &self.semantic_model {
            builder = builder.semantic_model(model.clone());
        }
        for server in &self.mcp_servers {
            // A tool left out was reported as a warning when the server started.
            let (tools, _left_out) =
                ishiki_mcp::server_tools_checked(server, ishiki_core::check_tool);
            builder = tools.into_iter().fold(builder, |b, t| b.tool(t));
        }
        for tool in &self.scenario.tools {
            builder = match tool {
                ToolSpec::Fixture { tool, resident } => {
                    let Some(t) = fixture_tool(tool.as_str(), *resident, workspace.clone()) else {
                        return Err(RunError::Invalid(format!(
                            "unknown fixture tool `{}`",
                            tool.as_str()
                        )));
                    };
                    builder.tool(Arc::new(t))
                }
                ToolSpec::Declared {
                    definition,
                    resident,
                } => builder.tool(Arc::new(DeclaredTool::new(ToolDef {
                    name: definition.name.clone(),
                    description: definition.description.clone(),
                    input_schema: definition.input_schema.clone(),
                    output_schema: definition.output_schema.clone(),
                    resident: *resident,
                    origin: Some("scenario".to_owned()),
                }))),
            };
        }
        builder.build().await.map_err(failed)
    }

    async fn run<W: Write>(
        mut self,
        writer: &mut TranscriptWriter<W>,
        warnings: &mut Vec<String>,
    ) -> Result<Exit, RunError> {
        let assembled = Profile::from_value(&self.scenario.profile)
            .and_then(|mut profile| {
                semantic_profile(
                    &mut profile,
                    self.options.semantic_model.as_deref(),
                    &self.scenario.base_dir,
                );
                let models = ModelsDoc::from_value(&self.scenario.models)?;
                assemble(profile, models, &self.scenario.main_model)
            })
            .and_then(|assembly| {
                self.semantic_model = ishiki_core::load_semantic_model(&assembly.profile)?;
                Ok(assembly)
            });
        let assembly = match assembled {
            Ok(a) => a,
            Err(e) => {
                self.emit(
                    writer,
                    Event::Error(ErrorEvent {
                        code: e.code().to_owned(),
                        message: e.message().to_owned(),
                    }),
                )?;
                return Ok(Exit::Invalid);
            }
        };
        self.write_fixtures()?;
        // MCP servers the profile declares start once and outlive `restart` steps, like any
        // external process would; a relative `cwd` is relative to the scenario file.
        let mut configs = ishiki_mcp::McpServerConfig::from_profile(&assembly.profile);
        for config in &mut configs {
            config.cwd = Some(match config.cwd.take() {
                Some(cwd) if cwd.is_relative() => self.scenario.base_dir.join(cwd),
                Some(cwd) => cwd,
                None => self.scenario.base_dir.clone(),
            });
        }
        let (servers, mut errors) = ishiki_mcp::start_all(&configs).await;
        for server in &servers {
            errors.extend(ishiki_mcp::server_tools_checked(server, ishiki_core::check_tool).1);
        }
        // One tool left out (a bad name or schema) does not stop the run; a server that did
        // not start does.
        let (left_out, errors): (Vec<_>, Vec<_>) = errors
            .into_iter()
            .partition(|e| e.kind() == ishiki_mcp::McpErrorKind::InvalidTool);
        warnings.extend(left_out.iter().map(ToString::to_string));
        if !errors.is_empty() {
            let message = errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; ");
            self.emit(
                writer,
                Event::Error(ErrorEvent {
                    code: "mcp_server_failed".to_owned(),
                    message,
                }),
            )?;
            return Ok(Exit::Failed);
        }
        self.mcp_servers = servers;
        let mut runtime = self.build(assembly.clone()).await?;
        let mut model_steps = 0u64;
        // With --state a scenario may run again on its own history: a message id already used
        // there gets a suffix, and withdraw follows the mapping.
        let mut message_ids: std::collections::HashMap<String, String> = Default::default();
        for step in &self.scenario.steps {
            match step {
                Step::User(user) => {
                    let mut id = user.id.clone();
                    let mut n = 2;
                    while runtime.has_message(&id) {
                        id = format!("{}~{n}", user.id);
                        n += 1;
                    }
                    message_ids.insert(user.id.clone(), id.clone());
                    let images = runtime
                        .add_user_message(
                            &id,
                            user.text.as_deref().unwrap_or_default(),
                            &user.image_bytes,
                        )
                        .await
                        .map_err(failed)?;
                    self.emit(
                        writer,
                        Event::Inbound(Inbound {
                            id: user.id.clone(),
                            images,
                        }),
                    )?;
                }
                Step::Model(model) => {
                    model_steps += 1;
                    // A server that sent `notifications/tools/list_changed` is listed again
                    // first: its new tools join the pool, its removed ones are withdrawn.
                    let mcp_errors =
                        ishiki_mcp::apply_tool_changes(&self.mcp_servers, &mut runtime).await;
                    warnings.extend(mcp_errors.iter().map(ToString::to_string));
                    let mut prepared = runtime.prepare().await.map_err(failed)?;
                    if prepared.compaction.is_some() {
                        // The scripted compaction model answers in file order; with no answer
                        // left the compaction goes on without a summary, as after a failure.
                        let answer = self.compaction.lock().map_or_else(
                            |_| Err("the scripted compaction answers are unavailable".to_owned()),
                            |mut answers| {
                                answers.pop_front().unwrap_or_else(|| {
                                    Err("the scenario has no compaction answer left".to_owned())
                                })
                            },
                        );
                        prepared = runtime.compact(prepared, answer).await.map_err(failed)?;
                    }
                    let request = prepared.request.clone();
                    let context = prepared.context.changed().then(|| prepared.context.clone());
                    self.emit(
                        writer,
                        Event::Request(RequestEvent {
                            step: model_steps,
                            request,
                            context,
                        }),
                    )?;
                    if let Some(reason) = &model.fail {
                        // A scripted 400 about an image turns that request's images terminal.
                        runtime.abandon_failed(prepared, reason);
                        self.emit(
                            writer,
                            Event::ModelFailed(ModelFailed {
                                step: model_steps,
                                reason: reason.clone(),
                            }),
                        )?;
                        continue;
                    }
                    let mut calls = Vec::new();
                    for call in &model.calls {
                        let resolved = self
                            .scenario
                            .interpolator()
                            .resolve_input(&call.input, &*writer)
                            .map_err(|e| RunError::Invalid(format!("call `{}`: {e}", call.id)))?;
                        let input = match resolved {
                            CallInput::Resolved(v) => v,
                            CallInput::Continue(id) => match continuation_input(&*writer, &id) {
                                Some(v) => v,
                                // No further page: the call is dropped from its step.
                                None => continue,
                            },
                        };
                        calls.push(ToolCall {
                            id: call.id.clone(),
                            name: call.name.clone(),
                            input,
                        });
                    }
                    let text = match &model.text {
                        Some(t) => Some(
                            self.scenario
                                .interpolator()
                                .resolve_str(t, &*writer)
                                .map_err(|e| RunError::Invalid(format!("model text: {e}")))?,
                        ),
                        None => None,
                    };
                    if model.abort {
                        runtime.abandon(prepared);
                        continue;
                    }
                    runtime
                        .commit(prepared, ModelResponse::from_text_and_calls(text, calls))
                        .await
                        .map_err(failed)?;
                    let reports = runtime.execute().await.map_err(failed)?;
                    let mut sent = self.platform.drain();
                    for report in reports {
                        for outgoing in sent.iter().filter(|o| o.call_id == report.call_id) {
                            self.emit(
                                writer,
                                Event::Sent(Sent {
                                    step: model_steps,
                                    call_id: outgoing.call_id.clone(),
                                    messages: outgoing.messages.clone(),
                                    dropped: outgoing
                                        .dropped
                                        .iter()
                                        .map(|d| Dropped {
                                            src: d.src.clone(),
                                            reason: d.reason.clone(),
                                        })
                                        .collect(),
                                }),
                            )?;
                        }
                        sent.retain(|o| o.call_id != report.call_id);
                        self.emit(
                            writer,
                            Event::ToolResult(ToolResultEvent {
                                step: model_steps,
                                call_id: report.call_id,
                                name: report.name,
                                is_error: report.is_error,
                                text: report.text,
                                attachments: report.attachments,
                                continuation: report.continuation.map(|url| Continuation { url }),
                            }),
                        )?;
                    }
                }
                Step::Withdraw(id) => runtime
                    .withdraw(message_ids.get(id).unwrap_or(id))
                    .await
                    .map_err(failed)?,
                Step::Restart(_) => {
                    drop(runtime);
                    runtime = self.build(assembly.clone()).await?;
                }
                Step::Clock(c) => self.clock.advance(c.advance),
                Step::Cleanup(_) => {
                    runtime.cleanup_assets().await.map_err(failed)?;
                }
            }
        }
        self.emit(writer, Event::End(End { steps: model_steps }))?;
        Ok(Exit::Ok)
    }
}
