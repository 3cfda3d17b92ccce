//! The context engine: sessions longer than the model's window, folded losslessly.
//!
//! Every request is estimated in tokens before it is sent. While it stays under
//! `context.foldAt` × the window nothing happens. Past it, the oldest tool results (all but the
//! last `keep`, none of the tools in `neverFold`) are **folded**: in the request, a result's text
//! is replaced by a one-line stub naming an `artifact://folded/…` URL from which the exact text
//! the model saw reads back byte for byte. The call and its result part stay where they were, so
//! a `tool_use` is never split from its `tool_result`; only the text changes. A folded result's
//! attachments leave the context with it. When folding alone cannot bring the request under
//! `context.compactAt` × the window, the oldest turns are **compacted**: replaced by one summary
//! message (written by a compaction model, or, when that fails, a plain note), with the turns
//! archived as `artifact://compacted/…` so that they too read back in full.
//!
//! Cost is planned: every fold or compaction edits an earlier part of the request, which
//! rewrites the provider's prompt cache from there and, on models that bind thinking to its
//! prefix, ends the thinking after it. So a fold removes at least `context.foldAtLeast` tokens
//! (a fold that would free less waits until it is worth a rewrite), and what was folded stays
//! folded: the stubs never change, the prefix before the next fold stays byte-identical.
//!
//! The token estimate is a character count calibrated by what the provider reported for the
//! previous request (`Usage::input_tokens` against the estimate of the request it answered),
//! so that it converges on the provider's own count; replayed reasoning counts like text.
//!
//! This module is policy without I/O: the runtime hands it the request, archives what it says
//! to archive, and persists [`ContextState`] with the response that follows, so a restart
//! projects the identical request.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ishiki_model::{Compacted, Message, Part, Role, ToolSpec};
use serde::{Deserialize, Serialize};

/// The `context` section of a profile.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContextConfig {
    /// `foldAt` (default 0.75): fold when a request's estimate passes this share of the
    /// window.
    pub fold_at: f64,
    /// `foldAtLeast`: the fewest tokens a fold removes (default half the window), so that
    /// cache rewrites stay rare.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fold_at_least: Option<u64>,
    /// `keep` (default 3): the newest tool results that are never folded.
    pub keep: usize,
    /// `neverFold`: tools whose results are never folded.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub never_fold: Vec<String>,
    /// `foldInputs` (default false): a folded call's input goes too, when it is long (at least
    /// [`MIN_FOLDED_INPUT`] tokens) and its turn carries no reasoning (a turn with thinking is
    /// replayed exactly as received).
    pub fold_inputs: bool,
    /// `compactAt` (default 0.9): compact when folding cannot bring a request under this share
    /// of the window.
    pub compact_at: f64,
    /// `compactionModel`: the model (a name in models.yaml) that writes summaries; the main
    /// model when unset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub compaction_model: Option<String>,
}

impl Default for ContextConfig {
    fn default() -> Self {
        Self {
            fold_at: 0.75,
            fold_at_least: None,
            keep: 3,
            never_fold: Vec::new(),
            fold_inputs: false,
            compact_at: 0.9,
            compaction_model: None,
        }
    }
}

/// The shares are finite (the decoder refuses anything outside (0, 1]), so `==` is an
/// equivalence.
impl Eq for ContextConfig {}

impl ContextConfig {
    /// Whether every key has its default (the profile prints no `context` section then).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

/// The model's window, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The context window: input and output together.
    pub tokens: u64,
    /// The output the request reserves (`max_tokens`); the input must leave room for it.
    pub output: u64,
}

impl Window {
    /// The input a request may carry: the window less the reserved output (at least a quarter
    /// of the window, so a misdeclared output cannot leave no room).
    pub fn input(self) -> u64 {
        self.tokens.saturating_sub(self.output).max(self.tokens / 4)
    }
}

/// The shares of `config` applied to `window`, in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Thresholds {
    /// Fold past this.
    pub fold: u64,
    /// A fold frees at least this.
    pub at_least: u64,
    /// Compact past this (after folding).
    pub compact: u64,
}

impl Thresholds {
    /// The thresholds of `config` on `window`. None passes the input the window leaves.
    pub fn new(config: &ContextConfig, window: Window) -> Self {
        let input = window.input();
        let share = |s: f64| ((window.tokens as f64 * s) as u64).min(input);
        Self {
            fold: share(config.fold_at),
            at_least: config
                .fold_at_least
                .unwrap_or(window.tokens / 2)
                .min(share(config.fold_at)),
            compact: share(config.compact_at).max(share(config.fold_at)),
        }
    }
}

/// One folded tool result, as persisted: what its stub says, fixed when it was folded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fold {
    /// The call whose result was folded.
    pub call_id: String,
    /// The tool that made it.
    pub tool: String,
    /// Where the exact text reads back (`artifact://folded/…`).
    pub url: String,
    /// Lines of the folded text.
    pub lines: usize,
    /// Characters of the folded text.
    pub chars: usize,
    /// Where the call's input reads back, when it was folded too (`foldInputs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_url: Option<String>,
}

/// The fewest raw tokens a call input has for `foldInputs` to fold it.
pub const MIN_FOLDED_INPUT: u64 = 256;

/// The input that stands for a folded call input.
pub fn folded_input(url: &str) -> serde_json::Value {
    serde_json::json!({ "folded_input": url })
}

/// The compaction in force: the turns before the summary, as persisted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Compaction {
    /// The id of the last message it replaces (everything before it in history goes too).
    pub through: String,
    /// How many history messages it replaces.
    pub messages: usize,
    /// Where the replaced turns read back in full (`artifact://compacted/…`).
    pub url: String,
    /// The summary, or `None` when no summary could be written (the message then says so).
    pub summary: Option<String>,
    /// The step of the request that first carried it (its message id is made from it).
    pub step: u64,
    /// The provider's own compaction ([`ishiki_model::Model::compact`]), sent back verbatim
    /// in place of the summary text; `None` when the summary is text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub native: Option<Compacted>,
}

/// What the context engine has done to a conversation, persisted with the response that
/// follows each change (like the delivery state).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextState {
    /// The calibration: provider tokens per thousand estimated (0: not calibrated yet, 1000).
    #[serde(default)]
    pub ratio_milli: u64,
    /// Every folded result, in the order folded.
    #[serde(default)]
    pub folds: Vec<Fold>,
    /// The compaction in force.
    #[serde(default)]
    pub compaction: Option<Compaction>,
    /// Set when the provider refused the last request as too long: the next request folds and
    /// compacts as far as it can, whatever the estimate says.
    #[serde(default)]
    pub force: bool,
    /// The archives this conversation made that its folds and compaction no longer name (the
    /// folds a compaction replaced, earlier compactions): they still read back, here only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub archives: Vec<String>,
}

impl ContextState {
    /// The calibration ratio in use (per thousand).
    pub fn ratio(&self) -> u64 {
        if self.ratio_milli == 0 {
            1000
        } else {
            self.ratio_milli
        }
    }

    /// Calibrated tokens of a raw estimate.
    pub fn calibrated(&self, raw: u64) -> u64 {
        raw.saturating_mul(self.ratio()) / 1000
    }

    /// Learns from a response: the provider counted `reported` input tokens for a request whose
    /// raw estimate was `raw`. The new ratio is the mean of the old and the observed one, kept
    /// within 1/4..4, so one odd count cannot swing it far and the estimate converges.
    pub fn calibrate(&mut self, raw: u64, reported: u64) {
        if raw == 0 || reported == 0 {
            return;
        }
        let observed = (reported.saturating_mul(1000) / raw).clamp(250, 4000);
        self.ratio_milli = if self.ratio_milli == 0 {
            observed
        } else {
            (self.ratio_milli + observed) / 2
        };
    }

    /// The folded call ids.
    pub fn folded(&self) -> HashSet<&str> {
        self.folds.iter().map(|f| f.call_id.as_str()).collect()
    }

    /// Every archive URL of this conversation: folded results and inputs, compacted turns.
    pub fn archive_urls(&self) -> impl Iterator<Item = &str> {
        self.folds
            .iter()
            .flat_map(|f| std::iter::once(f.url.as_str()).chain(f.input_url.as_deref()))
            .chain(self.compaction.iter().map(|c| c.url.as_str()))
            .chain(self.archives.iter().map(String::as_str))
    }
}

/// Tokens an image or audio clip is estimated at (Anthropic counts an image of about 1.15
/// megapixels, the largest it keeps unscaled, as about 1,600 tokens).
pub const MEDIA_TOKENS: u64 = 1_600;

/// Fixed tokens per message and per part (roles, block framing).
const MESSAGE_TOKENS: u64 = 4;
const PART_TOKENS: u64 = 3;

/// Raw tokens of a text: a token per four ASCII bytes, one per other character (CJK and
/// symbols come near one token per character).
pub fn text_tokens(text: &str) -> u64 {
    let mut ascii = 0u64;
    let mut other = 0u64;
    for c in text.chars() {
        if c.is_ascii() {
            ascii += 1;
        } else {
            other += 1;
        }
    }
    ascii.div_ceil(4) + other
}

fn json_tokens(value: &serde_json::Value) -> u64 {
    text_tokens(&value.to_string())
}

/// Raw tokens of one message as a provider receives it.
pub fn message_tokens(message: &Message) -> u64 {
    let mut total = MESSAGE_TOKENS;
    for part in &message.content {
        total += PART_TOKENS
            + match part {
                Part::Text { text } => text_tokens(text),
                Part::Image(_) | Part::Audio(_) => MEDIA_TOKENS,
                Part::ToolCall { name, input, .. } => text_tokens(name) + json_tokens(input),
                Part::ToolResult { text, .. } => text_tokens(text),
                Part::CatalogDelta { added } => added
                    .iter()
                    .map(|d| {
                        text_tokens(&d.name)
                            + text_tokens(&d.description)
                            + json_tokens(&d.input_schema)
                            + d.signature.as_deref().map_or(0, text_tokens)
                    })
                    .sum(),
                // Replayed thinking counts: its text and signature travel with the request.
                Part::Reasoning(r) => json_tokens(&r.data),
                Part::Compaction(c) => json_tokens(&c.data),
            };
    }
    total
}

/// Raw tokens of the tool list.
pub fn tools_tokens(tools: &[ToolSpec]) -> u64 {
    tools
        .iter()
        .map(|t| {
            PART_TOKENS
                + text_tokens(&t.name)
                + text_tokens(&t.description)
                + json_tokens(&t.input_schema)
        })
        .sum()
}

/// The line that replaces a folded result's text.
pub fn stub(fold: &Fold) -> String {
    format!(
        "[folded: `{}` result, {} lines, {} characters; read {} to see it again]",
        fold.tool, fold.lines, fold.chars, fold.url
    )
}

/// A tool result that may be folded, in history order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The call.
    pub call_id: String,
    /// Its tool.
    pub tool: String,
    /// Raw tokens its text costs now.
    pub tokens: u64,
    /// Raw tokens its stub would cost.
    pub stub_tokens: u64,
}

impl Candidate {
    /// Raw tokens folding it saves.
    pub fn saves(&self) -> u64 {
        self.tokens.saturating_sub(self.stub_tokens)
    }
}

/// The results that may be folded in `messages` (history as it would be sent): every tool
/// result not folded yet, except the newest `config.keep`, those of `config.never_fold`, and
/// those whose stub would save next to nothing.
pub fn candidates(
    messages: &[Arc<Message>],
    state: &ContextState,
    config: &ContextConfig,
) -> Vec<Candidate> {
    let folded = state.folded();
    let mut tools: HashMap<&str, &str> = HashMap::new();
    let mut results = Vec::new();
    for message in messages {
        for part in &message.content {
            match part {
                Part::ToolCall { id, name, .. } if message.role == Role::Assistant => {
                    tools.insert(id, name);
                }
                Part::ToolResult { call_id, text, .. } if message.role == Role::Tool => {
                    results.push((call_id.as_str(), text.as_str()));
                }
                _ => {}
            }
        }
    }
    let keep_from = results.len().saturating_sub(config.keep);
    // A call id that answers twice (some OpenAI-compatible servers number calls per response)
    // is never folded: a stub names its call, and one stub cannot read back two texts.
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (id, _) in &results {
        *seen.entry(id).or_default() += 1;
    }
    results
        .into_iter()
        .take(keep_from)
        .filter(|(id, _)| !folded.contains(id) && seen[id] == 1)
        .filter_map(|(id, text)| {
            let tool = tools.get(id).copied().unwrap_or("(unknown tool)");
            if config.never_fold.iter().any(|n| n == tool) {
                return None;
            }
            let probe = Fold {
                call_id: id.to_owned(),
                tool: tool.to_owned(),
                url: "artifact://folded/0000000000000000.txt".to_owned(),
                lines: text.lines().count(),
                chars: text.chars().count(),
                input_url: None,
            };
            let candidate = Candidate {
                call_id: id.to_owned(),
                tool: tool.to_owned(),
                tokens: text_tokens(text),
                stub_tokens: text_tokens(&stub(&probe)),
            };
            // A result about as short as its stub is not worth a fold.
            (candidate.saves() >= 32).then_some(candidate)
        })
        .collect()
}

/// Whether folding every candidate would free at least `thresholds.at_least` tokens: when it
/// would not, the request is past `foldAt` with little left to fold (mostly stubs, calls and
/// results of `neverFold` tools), and compaction is the step that frees room.
pub fn worth_folding(
    candidates: &[Candidate],
    thresholds: Thresholds,
    state: &ContextState,
) -> bool {
    let total: u64 = candidates.iter().map(|c| state.calibrated(c.saves())).sum();
    total >= thresholds.at_least
}

/// Which candidates to fold, oldest first, for a request estimated at `estimate` calibrated
/// tokens: none while it is under the fold threshold (unless `force`); else enough to bring it
/// under, and at least `at_least` tokens — or none at all when the candidates cannot free that
/// much and the request is still under the compaction threshold (a small fold would rewrite
/// the cache for little; it waits and is done in one batch later). `force` folds every
/// candidate.
pub fn choose(
    candidates: &[Candidate],
    estimate: u64,
    thresholds: Thresholds,
    state: &ContextState,
) -> Vec<String> {
    if state.force {
        return candidates.iter().map(|c| c.call_id.clone()).collect();
    }
    if estimate <= thresholds.fold {
        return Vec::new();
    }
    let want = thresholds.at_least.max(estimate - thresholds.fold);
    let mut freed = 0u64;
    let mut chosen = Vec::new();
    for c in candidates {
        if freed >= want {
            break;
        }
        freed += state.calibrated(c.saves());
        chosen.push(c.call_id.clone());
    }
    if freed < thresholds.at_least && estimate <= thresholds.compact {
        return Vec::new();
    }
    chosen
}

/// Replaces the text of folded results by their stubs; every other message is returned as the
/// same pointer, and every part keeps its place (a call is never parted from its result).
pub fn apply_folds(messages: Vec<Arc<Message>>, folds: &[Fold]) -> Vec<Arc<Message>> {
    if folds.is_empty() {
        return messages;
    }
    let by_call: HashMap<&str, &Fold> = folds.iter().map(|f| (f.call_id.as_str(), f)).collect();
    let folds_part = |message: &Message, part: &Part| match part {
        Part::ToolResult { call_id, .. } => {
            message.role == Role::Tool && by_call.contains_key(call_id.as_str())
        }
        Part::ToolCall { id, .. } => {
            message.role == Role::Assistant
                && by_call
                    .get(id.as_str())
                    .is_some_and(|f| f.input_url.is_some())
        }
        _ => false,
    };
    messages
        .into_iter()
        .map(|message| {
            if !message.content.iter().any(|p| folds_part(&message, p)) {
                return message;
            }
            let content = message
                .content
                .iter()
                .map(|part| match part {
                    Part::ToolResult {
                        call_id, is_error, ..
                    } if folds_part(&message, part) => Part::ToolResult {
                        call_id: call_id.clone(),
                        is_error: *is_error,
                        text: stub(by_call[call_id.as_str()]),
                    },
                    Part::ToolCall { id, name, .. } if folds_part(&message, part) => {
                        Part::ToolCall {
                            id: id.clone(),
                            name: name.clone(),
                            input: folded_input(
                                by_call[id.as_str()]
                                    .input_url
                                    .as_deref()
                                    .unwrap_or_default(),
                            ),
                        }
                    }
                    other => other.clone(),
                })
                .collect();
            Arc::new(Message {
                id: message.id.clone(),
                role: message.role,
                created_at: message.created_at.clone(),
                content,
            })
        })
        .collect()
}

/// The input of call `call_id` in `messages`, when `foldInputs` may fold it: long enough, in a
/// turn without reasoning.
pub fn foldable_input<'m>(
    messages: &'m [Arc<Message>],
    call_id: &str,
) -> Option<&'m serde_json::Value> {
    messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .find_map(|m| {
            let input = m.content.iter().find_map(|p| match p {
                Part::ToolCall { id, input, .. } if id == call_id => Some(input),
                _ => None,
            })?;
            let bound = m.content.iter().any(|p| matches!(p, Part::Reasoning(_)));
            (!bound && json_tokens(input) >= MIN_FOLDED_INPUT).then_some(input)
        })
}

/// The text of a result in `messages`, as the model saw it (what a fold archives).
pub fn result_text<'m>(messages: &'m [Arc<Message>], call_id: &str) -> Option<&'m str> {
    messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .flat_map(|m| &m.content)
        .find_map(|p| match p {
            Part::ToolResult {
                call_id: id, text, ..
            } if id == call_id => Some(text.as_str()),
            _ => None,
        })
}

/// Where compaction may cut `history` (ids in order): the index of the first message kept. A
/// cut is made before a user message or before an assistant turn, never between a call and
/// its result, and keeps the newest messages that fit in `keep_tokens` (at least the last
/// turn). `None` when no cut would remove anything.
pub fn compaction_cut(history: &[(Arc<Message>, u64)], keep_tokens: u64) -> Option<usize> {
    let mut kept = 0u64;
    let mut cut = None;
    for (i, (message, tokens)) in history.iter().enumerate().rev() {
        kept = kept.saturating_add(*tokens);
        let boundary = matches!(message.role, Role::User | Role::Assistant) && i > 0;
        if boundary {
            if kept > keep_tokens && cut.is_some() {
                break;
            }
            cut = Some(i);
        }
    }
    cut
}

/// The instruction that ends a compaction request.
pub const SUMMARY_INSTRUCTION: &str = "The conversation above is about to be shortened: write a summary of it that lets you carry on the task without it. Keep the user's requests and constraints, decisions made and why, the state of the work, open questions, and every URL, file path and identifier you may need again (tool results can be read back by URL). Write only the summary.";

/// The most characters a summary may have; a longer one is cut here, with a note.
pub const MAX_SUMMARY_CHARS: usize = 24_000;

/// The messages that stand for compacted turns, at the start of the request.
///
/// A text summary is one user message that says where the turns read back. A provider's own
/// compaction is an assistant message holding its block alone, verbatim (the provider wants
/// it first in the conversation), then a user message that says where the turns read back,
/// so the request never ends on the summary; the tail a native cut keeps starts with a user
/// turn ([`native_cut`]), which the note joins.
pub fn summary_messages(compaction: &Compaction, created_at: &str) -> Vec<Message> {
    let head = format!(
        "[the {} earlier messages of this conversation were compacted to keep the context short; they read back in full with read {{\"url\":\"{}\"}}]",
        compaction.messages, compaction.url
    );
    let message = |suffix: &str, role: Role, content: Vec<Part>| Message {
        id: crate::ids::context_message(compaction.step, suffix),
        role,
        created_at: created_at.to_owned(),
        content,
    };
    if let Some(native) = &compaction.native {
        return vec![
            message(
                "summary",
                Role::Assistant,
                vec![Part::Compaction(native.clone())],
            ),
            message("note", Role::User, vec![Part::Text { text: head }]),
        ];
    }
    let text = match &compaction.summary {
        Some(summary) => format!("{head}\n\nSummary of those messages:\n{summary}"),
        None => {
            format!("{head}\n\nNo summary could be written; read them back when you need them.")
        }
    };
    vec![message("summary", Role::User, vec![Part::Text { text }])]
}

/// Where a provider's own compaction may cut `history`: the first index at or after `from`
/// where the compacted turns end on a finished turn and the kept ones start with a user turn
/// (the provider refuses to summarize a turn that is not finished, and its block is sent as
/// an assistant message): before a user message that follows an assistant message without
/// calls, or after the whole history when it does not end on calls. `None` when there is no
/// such place.
pub fn native_cut(history: &[(Arc<Message>, u64)], from: usize) -> Option<usize> {
    let calls = |m: &Message| m.content.iter().any(|p| matches!(p, Part::ToolCall { .. }));
    let finished = |m: &Message| !(m.role == Role::Assistant && calls(m));
    (from.max(1)..=history.len()).find(|&c| match history.get(c) {
        None => history.last().is_some_and(|(m, _)| finished(m)),
        Some((m, _)) => {
            let before = &history[c - 1].0;
            m.role == Role::User && before.role == Role::Assistant && finished(before)
        }
    })
}

/// A summary as the model wrote it, made safe to keep: empty is no summary; over
/// [`MAX_SUMMARY_CHARS`] it is cut at a character boundary and says so.
pub fn clean_summary(text: &str) -> Option<String> {
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    if text.chars().count() <= MAX_SUMMARY_CHARS {
        return Some(text.to_owned());
    }
    let cut: String = text.chars().take(MAX_SUMMARY_CHARS).collect();
    Some(format!(
        "{cut}\n[the summary was cut at {MAX_SUMMARY_CHARS} characters]"
    ))
}

/// Compacted turns as a readable text (what `artifact://compacted/…` holds): each message with
/// its id, role and time, then its parts; reasoning is opaque and left out.
pub fn archive_text(messages: &[Arc<Message>]) -> String {
    let mut out = String::new();
    for m in messages {
        let role = match m.role {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        };
        out.push_str(&format!("## {} {} ({})\n", role, m.id, m.created_at));
        for part in &m.content {
            match part {
                Part::Text { text } => out.push_str(text),
                Part::Image(media) => out.push_str(&format!("[image {}]", media.url)),
                Part::Audio(media) => out.push_str(&format!("[audio {}]", media.url)),
                Part::ToolCall { id, name, input } => {
                    out.push_str(&format!("[call {id}] {name} {input}"))
                }
                Part::ToolResult {
                    call_id,
                    is_error,
                    text,
                } => {
                    let what = if *is_error { "error" } else { "result" };
                    out.push_str(&format!("[{what} of call {call_id}]\n{text}"));
                }
                Part::CatalogDelta { added } => {
                    let names: Vec<&str> = added.iter().map(|d| d.name.as_str()).collect();
                    out.push_str(&format!("[tools added: {}]", names.join(", ")));
                }
                Part::Reasoning(_) => continue,
                Part::Compaction(native) => match &native.summary {
                    Some(summary) => out.push_str(&format!(
                        "[summary of earlier messages, by the provider]\n{summary}"
                    )),
                    None => continue,
                },
            }
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

/// What the context engine did to one request, for transcripts and terminals.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextReport {
    /// The calibrated estimate of the request before this request's folds and compaction.
    pub estimated_before: u64,
    /// The calibrated estimate of the request as sent.
    pub estimated_after: u64,
    /// The window, when one is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<u64>,
    /// Results folded by this request: `{call_id, url}`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub folded: Vec<FoldedReport>,
    /// A compaction made for this request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compacted: Option<CompactedReport>,
}

impl ContextReport {
    /// Whether this request folded or compacted anything.
    pub fn changed(&self) -> bool {
        !self.folded.is_empty() || self.compacted.is_some()
    }
}

/// One fold, as reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FoldedReport {
    /// The call whose result was folded.
    pub call_id: String,
    /// Where it reads back.
    pub url: String,
}

/// One compaction, as reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CompactedReport {
    /// History messages replaced.
    pub messages: usize,
    /// Where they read back.
    pub url: String,
    /// Whether a model wrote the summary (`false`: the note without one).
    pub summarized: bool,
    /// Whether the provider's own compaction wrote it ([`Compaction::native`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub native: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn message(id: &str, role: Role, content: Vec<Part>) -> Arc<Message> {
        Arc::new(Message {
            id: id.into(),
            role,
            created_at: "2026-01-01T00:00:00Z".into(),
            content,
        })
    }

    fn call(id: &str, name: &str) -> Part {
        Part::ToolCall {
            id: id.into(),
            name: name.into(),
            input: json!({}),
        }
    }

    fn result(id: &str, text: &str) -> Part {
        Part::ToolResult {
            call_id: id.into(),
            is_error: false,
            text: text.into(),
        }
    }

    fn fold_of(messages: &[Arc<Message>], id: &str, tool: &str) -> Fold {
        let text = result_text(messages, id).unwrap();
        Fold {
            call_id: id.into(),
            tool: tool.into(),
            url: format!("artifact://folded/{id}.txt"),
            lines: text.lines().count(),
            chars: text.chars().count(),
            input_url: None,
        }
    }

    #[test]
    fn the_estimate_counts_text_media_calls_and_replayed_thinking() {
        assert_eq!(text_tokens("abcdefgh"), 2);
        assert_eq!(text_tokens("日本語"), 3);
        let thinking = message(
            "a",
            Role::Assistant,
            vec![Part::Reasoning(ishiki_model::Reasoning {
                provider: "anthropic".into(),
                model: "m".into(),
                data: json!({"type": "thinking", "thinking": "x".repeat(4000), "signature": "s"}),
                prefix: None,
            })],
        );
        assert!(
            message_tokens(&thinking) > 1000,
            "replayed thinking is counted"
        );
        let image = message(
            "u",
            Role::User,
            vec![Part::Image(ishiki_model::MediaPart {
                media_type: "image/png".into(),
                url: "asset://x".into(),
                bytes: 10,
                sha256: "0".into(),
                data: None,
            })],
        );
        assert_eq!(
            message_tokens(&image),
            MESSAGE_TOKENS + PART_TOKENS + MEDIA_TOKENS
        );
    }

    #[test]
    fn calibration_converges_on_the_providers_count() {
        let mut state = ContextState::default();
        // The provider counts 1.3 tokens per estimated token, request after request.
        for raw in [10_000u64, 20_000, 40_000, 80_000, 120_000, 160_000] {
            state.calibrate(raw, raw * 13 / 10);
        }
        assert!((1290..=1310).contains(&state.ratio()), "{}", state.ratio());
        assert_eq!(state.calibrated(100_000), 100_000 * state.ratio() / 1000);
        // One absurd report moves it at most halfway, and within the bounds.
        state.calibrate(1, 1_000_000);
        assert!(state.ratio() <= 4000);
    }

    #[test]
    fn a_fold_waits_until_it_frees_enough_then_frees_at_least_that_much() {
        let thresholds = Thresholds {
            fold: 1000,
            at_least: 500,
            compact: 1500,
        };
        let c = |id: &str, tokens: u64| Candidate {
            call_id: id.into(),
            tool: "t".into(),
            tokens,
            stub_tokens: 40,
        };
        let state = ContextState::default();
        let few = [c("a", 240)];
        // Over the fold threshold, but one small result: not worth a rewrite yet.
        assert!(choose(&few, 1100, thresholds, &state).is_empty());
        // Past the compaction threshold it folds what it can.
        assert_eq!(choose(&few, 1600, thresholds, &state), ["a"]);
        let many = [c("a", 240), c("b", 240), c("c", 240), c("d", 240)];
        assert_eq!(choose(&many, 1100, thresholds, &state), ["a", "b", "c"]);
        assert!(choose(&many, 900, thresholds, &state).is_empty());
        let forced = ContextState {
            force: true,
            ..ContextState::default()
        };
        assert_eq!(choose(&many, 10, thresholds, &forced).len(), 4);
    }

    #[test]
    fn the_newest_results_and_never_fold_tools_are_not_candidates() {
        let long = "line of output\n".repeat(100);
        let messages = vec![
            message("m1", Role::User, vec![Part::Text { text: "go".into() }]),
            message(
                "s1-assistant",
                Role::Assistant,
                vec![call("c1", "big"), call("c2", "pinned")],
            ),
            message(
                "s1-tools",
                Role::Tool,
                vec![result("c1", &long), result("c2", &long)],
            ),
            message("s2-assistant", Role::Assistant, vec![call("c3", "big")]),
            message("s2-tools", Role::Tool, vec![result("c3", &long)]),
            message("s3-assistant", Role::Assistant, vec![call("c4", "big")]),
            message("s3-tools", Role::Tool, vec![result("c4", "short")]),
        ];
        let config = ContextConfig {
            keep: 1,
            never_fold: vec!["pinned".into()],
            ..ContextConfig::default()
        };
        let ids: Vec<String> = candidates(&messages, &ContextState::default(), &config)
            .into_iter()
            .map(|c| c.call_id)
            .collect();
        // c2 is pinned, c4 is the newest (kept), and c3 is the second newest but keep is 1.
        assert_eq!(ids, ["c1", "c3"]);
        let state = ContextState {
            folds: vec![fold_of(&messages, "c1", "big")],
            ..ContextState::default()
        };
        let ids: Vec<String> = candidates(&messages, &state, &config)
            .into_iter()
            .map(|c| c.call_id)
            .collect();
        assert_eq!(ids, ["c3"], "a folded result is not folded twice");
    }

    #[test]
    fn a_call_id_that_answers_twice_is_never_folded() {
        let long = "line of output\n".repeat(100);
        let messages = vec![
            message("s1-assistant", Role::Assistant, vec![call("call_0", "big")]),
            message("s1-tools", Role::Tool, vec![result("call_0", &long)]),
            message("s2-assistant", Role::Assistant, vec![call("call_0", "big")]),
            message(
                "s2-tools",
                Role::Tool,
                vec![result("call_0", &format!("other {long}"))],
            ),
            message("s3-assistant", Role::Assistant, vec![call("call_1", "big")]),
            message("s3-tools", Role::Tool, vec![result("call_1", &long)]),
        ];
        let config = ContextConfig {
            keep: 0,
            ..ContextConfig::default()
        };
        let ids: Vec<String> = candidates(&messages, &ContextState::default(), &config)
            .into_iter()
            .map(|c| c.call_id)
            .collect();
        assert_eq!(ids, ["call_1"]);
    }

    #[test]
    fn a_compaction_cut_never_parts_a_call_from_its_result() {
        let m = |id: &str, role| (message(id, role, vec![]), 100u64);
        let history = vec![
            m("m1", Role::User),
            m("s1-assistant", Role::Assistant),
            m("s1-tools", Role::Tool),
            m("s2-assistant", Role::Assistant),
            m("s2-tools", Role::Tool),
            m("m2", Role::User),
            m("s3-assistant", Role::Assistant),
            m("s3-tools", Role::Tool),
        ];
        let cut = compaction_cut(&history, 250).unwrap();
        assert!(matches!(history[cut].0.role, Role::User | Role::Assistant));
        assert_eq!(history[cut].0.id, "s3-assistant");
        assert_eq!(compaction_cut(&history[..1], 0), None);
    }

    #[test]
    fn a_native_cut_ends_the_compacted_turns_on_a_finished_turn() {
        let call = || {
            vec![Part::ToolCall {
                id: "c".into(),
                name: "t".into(),
                input: json!({}),
            }]
        };
        let text = || vec![Part::Text { text: "ok".into() }];
        let m = |id: &str, role, content| (message(id, role, content), 100u64);
        let history = vec![
            m("m1", Role::User, text()),
            m("s1-assistant", Role::Assistant, call()),
            m("s1-tools", Role::Tool, vec![]),
            m("s2-assistant", Role::Assistant, text()),
            m("m2", Role::User, text()),
            m("s3-assistant", Role::Assistant, call()),
            m("s3-tools", Role::Tool, vec![]),
        ];
        // Before the user turn that follows a finished answer, not inside the tool loop.
        assert_eq!(native_cut(&history, 1), Some(4));
        assert_eq!(native_cut(&history, 4), Some(4));
        // Past the last user turn, only the whole history, which ends on results.
        assert_eq!(native_cut(&history, 5), Some(7));
        // A history that ends on calls has no finished turn to end on.
        assert_eq!(native_cut(&history[..6], 5), None);
        assert_eq!(native_cut(&[], 0), None);
    }

    #[test]
    fn a_native_compaction_opens_the_request_as_the_block_alone_then_says_where_turns_read_back() {
        let block = Compacted {
            provider: "anthropic".into(),
            model: "m".into(),
            data: json!({ "type": "compaction", "content": "s", "signature": "x" }),
            summary: Some("s".into()),
        };
        let compaction = Compaction {
            through: "m2".into(),
            messages: 4,
            url: "artifact://compacted/a.txt".into(),
            summary: Some("s".into()),
            step: 7,
            native: Some(block.clone()),
        };
        let messages = summary_messages(&compaction, "2026-01-01T00:00:00Z");
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0].role, Role::Assistant);
        assert_eq!(messages[0].id, "s7-context-summary");
        assert_eq!(messages[0].content, vec![Part::Compaction(block)]);
        assert_eq!(messages[1].role, Role::User);
        let Part::Text { text } = &messages[1].content[0] else {
            panic!("a note");
        };
        assert!(text.contains("artifact://compacted/a.txt"), "{text}");
        // The state round-trips, and a text summary stays one user message.
        let back: Compaction =
            serde_json::from_value(serde_json::to_value(&compaction).unwrap()).unwrap();
        assert_eq!(back, compaction);
        let text_only = Compaction {
            native: None,
            ..compaction
        };
        assert_eq!(summary_messages(&text_only, "t").len(), 1);
        assert!(
            !serde_json::to_string(&text_only)
                .unwrap()
                .contains("native")
        );
    }

    #[test]
    fn an_input_is_foldable_only_when_long_and_in_a_turn_without_reasoning() {
        let long = json!({ "text": "x".repeat(4_000) });
        let plain = message(
            "s1-assistant",
            Role::Assistant,
            vec![Part::ToolCall {
                id: "c1".into(),
                name: "t".into(),
                input: long.clone(),
            }],
        );
        let thinking = message(
            "s2-assistant",
            Role::Assistant,
            vec![
                Part::Reasoning(ishiki_model::Reasoning {
                    provider: "anthropic".into(),
                    model: "m".into(),
                    data: json!({"type": "thinking", "thinking": "t", "signature": "s"}),
                    prefix: None,
                }),
                Part::ToolCall {
                    id: "c2".into(),
                    name: "t".into(),
                    input: long.clone(),
                },
            ],
        );
        let short = message("s3-assistant", Role::Assistant, vec![call("c3", "t")]);
        let messages = vec![plain, thinking, short];
        assert_eq!(foldable_input(&messages, "c1"), Some(&long));
        assert_eq!(
            foldable_input(&messages, "c2"),
            None,
            "a thinking turn is replayed as received"
        );
        assert_eq!(
            foldable_input(&messages, "c3"),
            None,
            "too short to be worth it"
        );
    }

    #[test]
    fn a_long_summary_is_cut_and_says_so() {
        assert_eq!(clean_summary("  "), None);
        let long = "é".repeat(MAX_SUMMARY_CHARS + 10);
        let cut = clean_summary(&long).unwrap();
        assert!(cut.ends_with("characters]"));
        assert!(cut.chars().count() < MAX_SUMMARY_CHARS + 60);
    }

    fn conversation() -> impl Strategy<Value = Vec<Arc<Message>>> {
        prop::collection::vec((1usize..4, 0usize..300, any::<bool>()), 1..12).prop_map(|steps| {
            let mut messages = vec![message(
                "m0",
                Role::User,
                vec![Part::Text {
                    text: "start".into(),
                }],
            )];
            let mut n = 0;
            for (k, (calls, size, user)) in steps.into_iter().enumerate() {
                let ids: Vec<String> = (0..calls)
                    .map(|_| {
                        n += 1;
                        format!("c{n}")
                    })
                    .collect();
                messages.push(message(
                    &format!("s{k}-assistant"),
                    Role::Assistant,
                    ids.iter().map(|id| call(id, "tool")).collect(),
                ));
                messages.push(message(
                    &format!("s{k}-tools"),
                    Role::Tool,
                    ids.iter()
                        .map(|id| result(id, &format!("{id}: {}\n", "ü".repeat(size)).repeat(3)))
                        .collect(),
                ));
                if user {
                    messages.push(message(
                        &format!("m{k}"),
                        Role::User,
                        vec![Part::Text {
                            text: "more".into(),
                        }],
                    ));
                }
            }
            messages
        })
    }

    proptest! {
        /// Folding changes only the messages holding a folded result (every other one is the
        /// same pointer), keeps every part in its place — each call still followed by its
        /// result — and each stub names the URL whose archive is the folded text exactly.
        #[test]
        fn folding_changes_only_what_it_folds_and_every_stub_reads_back_the_text(
            messages in conversation(),
            pick in prop::collection::vec(any::<bool>(), 40),
        ) {
            let config = ContextConfig { keep: 0, ..ContextConfig::default() };
            let all = candidates(&messages, &ContextState::default(), &config);
            let chosen: Vec<&Candidate> = all.iter().zip(&pick).filter(|(_, p)| **p).map(|(c, _)| c).collect();
            // The archive: URL → the exact text folded (what the runtime writes to the store).
            let mut archive = HashMap::new();
            let folds: Vec<Fold> = chosen.iter().map(|c| {
                let fold = fold_of(&messages, &c.call_id, &c.tool);
                archive.insert(fold.url.clone(), result_text(&messages, &c.call_id).unwrap().to_owned());
                fold
            }).collect();
            let folded = apply_folds(messages.clone(), &folds);
            prop_assert_eq!(folded.len(), messages.len());
            let ids: HashSet<&str> = folds.iter().map(|f| f.call_id.as_str()).collect();
            for (before, after) in messages.iter().zip(&folded) {
                let holds = before.content.iter().any(|p| matches!(p, Part::ToolResult { call_id, .. } if ids.contains(call_id.as_str())));
                if !holds {
                    prop_assert!(Arc::ptr_eq(before, after));
                    continue;
                }
                prop_assert_eq!(&before.id, &after.id);
                prop_assert_eq!(before.content.len(), after.content.len());
                for (p, q) in before.content.iter().zip(&after.content) {
                    match (p, q) {
                        (Part::ToolResult { call_id: a, text, is_error: e1 }, Part::ToolResult { call_id: b, text: shown, is_error: e2 }) => {
                            prop_assert_eq!(a, b);
                            prop_assert_eq!(e1, e2);
                            if let Some(fold) = folds.iter().find(|f| &f.call_id == a) {
                                prop_assert_eq!(shown, &stub(fold));
                                prop_assert_eq!(&archive[&fold.url], text);
                                prop_assert!(shown.contains(&fold.url));
                            } else {
                                prop_assert_eq!(text, shown);
                            }
                        }
                        (p, q) => prop_assert_eq!(p, q),
                    }
                }
            }
            // Every call is still answered in the message after it.
            for (i, m) in folded.iter().enumerate().filter(|(_, m)| m.role == Role::Assistant) {
                for part in &m.content {
                    if let Part::ToolCall { id, .. } = part {
                        let next = &folded[i + 1];
                        let answered = next.content.iter().any(|p| matches!(p, Part::ToolResult { call_id, .. } if call_id == id));
                        prop_assert!(answered, "call {} lost its result", id);
                    }
                }
            }
        }
    }
}
