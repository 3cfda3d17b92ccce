//! The `ishiki` binary: `ishiki scenario run FILE [--state DIR] [--no-data] [--format pretty]`,
//! `ishiki chat --profile P --models M [--state DIR]`, `ishiki doctor` and
//! `ishiki search-eval --catalog tools.json --queries q.json`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use ishiki_cli::chat::{self, ChatOptions};
use ishiki_cli::runner::{self, RunOptions};
use ishiki_cli::search_eval::{self, SearchEvalOptions};
use ishiki_cli::transcript::Format;
use ishiki_core::WorkerSpawn;

/// Ishiki: the tool-call pipeline of an LLM agent.
#[derive(Debug, Parser)]
#[command(name = "ishiki", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Scripted conversations against the real pipeline.
    #[command(subcommand)]
    Scenario(ScenarioCommand),
    /// A live session against a configured model: each line on standard input is a user
    /// message; the model runs steps with the real tools until it answers.
    Chat {
        /// The profile (YAML, requirements §1).
        #[arg(long, value_name = "FILE")]
        profile: PathBuf,
        /// The models document; the main model needs `provider` (openai, openai-responses or
        /// anthropic), `baseUrl`, `model` and usually `apiKeyEnv`.
        #[arg(long, value_name = "FILE")]
        models: PathBuf,
        /// The model that answers (default: `main`, or the only model).
        #[arg(long, value_name = "NAME")]
        main: Option<String>,
        /// History, artifacts and assets; the session resumes from it.
        #[arg(long, value_name = "DIR", default_value = ".ishiki")]
        state: PathBuf,
        /// The sandbox workspace root (default: `STATE/workspace`).
        #[arg(long, value_name = "DIR")]
        workspace: Option<PathBuf>,
        /// At most this many model requests per user message.
        #[arg(long, default_value_t = 25)]
        max_steps: u32,
        /// Keep history in PostgreSQL instead of the state directory: `postgres://…`
        /// (credentials in the URL or in PGUSER, PGPASSWORD, PGHOST, …).
        #[arg(long, value_name = "URL")]
        store: Option<String>,
        /// The conversation to resume or start in `--store`.
        #[arg(long, value_name = "ID", default_value = "default")]
        conversation: String,
        /// Take the conversation's lease over from the runtime that holds it (one that
        /// crashed on another machine, or whose database went down mid-step); its next commit
        /// fails. A holder on this machine whose process is gone is taken over without it.
        #[arg(long, requires = "store")]
        take_over: bool,
        /// Keep artifacts and assets in object storage instead of the state directory:
        /// `s3://bucket/prefix` (credentials and endpoint from the `AWS_*` environment) or
        /// `file:///dir`.
        #[arg(long, value_name = "URL")]
        objects: Option<String>,
        /// Rank `search` with the hybrid ranker, with the sentence-embedding model in DIR
        /// (sets `toolsearch.semantic.model`; `cargo xtask tools` puts all-MiniLM-L6-v2 in
        /// `.tools/all-minilm-l6-v2`).
        #[arg(long, value_name = "DIR")]
        semantic_model: Option<PathBuf>,
    },
    /// Starts a codemode worker and prints which confinement layers (no_new_privs, Landlock,
    /// seccomp) this kernel let it apply.
    Doctor,
    /// How well tool search finds the right tool in your catalog: hit@1, hit@5 and MRR of
    /// Ishiki's ranker and of plain BM25, overall and per query class.
    SearchEval {
        /// Tool definitions: a JSON array, or an MCP `tools/list` result with a `server` name
        /// (repeatable).
        #[arg(long, value_name = "FILE", required = true)]
        catalog: Vec<PathBuf>,
        /// Labelled queries: a JSON array of `{query, expect, class?, also?}` (repeatable;
        /// each file is one set in the table).
        #[arg(long, value_name = "FILE", required = true)]
        queries: Vec<PathBuf>,
    },
    /// The client the MCP conformance suite runs: connects to URL over Streamable HTTP, lists
    /// the tools and calls each (`cargo xtask mcp-conformance`).
    #[command(hide = true)]
    McpConformanceClient {
        /// The suite's test server.
        url: String,
    },
}

#[derive(Debug, Subcommand)]
enum ScenarioCommand {
    /// Replays a scenario (docs/scenario-format.md v1) with its scripted model and prints the transcript as
    /// JSON Lines: what the model received at each step, each tool result, each sent message.
    Run {
        /// The scenario file (YAML).
        file: PathBuf,
        /// Keep history, delivery state, artifacts and assets in this directory (it survives
        /// across runs and `restart` steps); default: a fresh temporary directory.
        #[arg(long, value_name = "DIR")]
        state: Option<PathBuf>,
        /// Omit the base64 `data` of embedded media.
        #[arg(long)]
        no_data: bool,
        /// `json`: the JSON Lines contract; `pretty`: the same run as readable text.
        #[arg(long, value_enum, default_value_t = OutputFormat::Json)]
        format: OutputFormat,
        /// Rank `search` with the hybrid ranker, with the sentence-embedding model in DIR
        /// (sets the profile's `toolsearch.semantic.model`).
        #[arg(long, value_name = "DIR")]
        semantic_model: Option<PathBuf>,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum OutputFormat {
    Json,
    Pretty,
}

fn main() -> ExitCode {
    // A codemode worker is this same binary started in worker mode: serve the program, exit.
    ishiki_core::run_if_worker();
    let cli = Cli::parse();
    match cli.command {
        Command::Doctor => {
            use std::io::Write;
            match ishiki_codemode::confinement_report(WorkerSpawn::CurrentExe) {
                Ok(report) => {
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "codemode worker confinement:\n{report}");
                    let missing = report.layers.iter().filter(|l| !l.enforced).count();
                    let _ = if missing == 0 {
                        writeln!(out, "every layer is enforced")
                    } else {
                        writeln!(
                            out,
                            "{missing} layer(s) not enforced on this kernel; the rlimits and the engine's limits still hold"
                        )
                    };
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    let _ = writeln!(std::io::stderr(), "ishiki doctor: {error}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Scenario(ScenarioCommand::Run {
            file,
            state,
            no_data,
            format,
            semantic_model,
        }) => {
            let options = RunOptions {
                file,
                state,
                no_data,
                format: match format {
                    OutputFormat::Json => Format::Json,
                    OutputFormat::Pretty => Format::Pretty,
                },
                worker: WorkerSpawn::CurrentExe,
                semantic_model,
            };
            let stdout = std::io::stdout();
            let stderr = std::io::stderr();
            let exit = runner::run(&options, &mut stdout.lock(), &mut stderr.lock());
            ExitCode::from(exit as u8)
        }
        Command::Chat {
            profile,
            models,
            main,
            state,
            workspace,
            max_steps,
            store,
            conversation,
            take_over,
            objects,
            semantic_model,
        } => {
            let options = ChatOptions {
                profile,
                models,
                main,
                state,
                workspace,
                max_steps,
                worker: WorkerSpawn::CurrentExe,
                store,
                conversation,
                when_held: if take_over {
                    ishiki_postgres::WhenHeld::TakeOver
                } else {
                    ishiki_postgres::WhenHeld::Refuse
                },
                objects,
                semantic_model,
            };
            let stdin = std::io::stdin();
            let stdout = std::io::stdout();
            let stderr = std::io::stderr();
            let exit = chat::run(
                &options,
                &mut stdin.lock(),
                &mut stdout.lock(),
                &mut stderr.lock(),
            );
            ExitCode::from(exit as u8)
        }
        Command::McpConformanceClient { url } => ExitCode::from(ishiki_cli::conformance::run(
            &url,
            &mut std::io::stderr().lock(),
        )),
        Command::SearchEval { catalog, queries } => {
            let options = SearchEvalOptions {
                catalogs: catalog,
                queries,
            };
            match search_eval::run(&options, &mut std::io::stdout().lock()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(message) => {
                    eprintln!("ishiki search-eval: {message}");
                    ExitCode::from(2)
                }
            }
        }
    }
}
