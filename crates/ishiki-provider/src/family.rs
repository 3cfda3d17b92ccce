//! What the known model families can do, as their providers document it: the defaults behind
//! every capability key of `models.yaml` that a model leaves unset.
//!
//! Sources (read 2026-12): Anthropic "Preserved thinking" / "Prefix checks" (the models that
//! bind thinking to its prefix), "Mid-conversation system messages" (the models that take
//! them), "Compaction" (the models that compact natively; OpenAI's `/responses/compact`), "Adaptive thinking" and "Extended
//! thinking troubleshooting" (Claude 4.7 and later refuse `budget_tokens`); OpenAI's model
//! pages for the GPT-5 family. Windows and output limits are the documented sizes of each
//! family, rounded down where a family varies.

use crate::http::Protocol;

/// The documented defaults of one model family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelFamily {
    /// Whether the family is one this table knows (otherwise the values are cautious
    /// guesses: the replay rule that never gets a 400, no optional request fields).
    pub known: bool,
    /// Thinks adaptively (`thinking: {type: "adaptive"}` with an effort), refusing
    /// `budget_tokens`.
    pub adaptive_thinking: bool,
    /// Binds each thinking block to its prefix (Anthropic preserved thinking).
    pub preserved_thinking: bool,
    /// Takes mid-conversation `role: "system"` messages.
    pub system_messages: bool,
    /// Compacts a conversation itself (Anthropic `compaction: {type: "summarize"}`, OpenAI
    /// `/responses/compact`).
    pub native_compaction: bool,
    /// Reasons (OpenAI `reasoning` parameter).
    pub reasoning: bool,
    /// Takes explicit prompt-cache breakpoints (OpenAI `prompt_cache_options`, GPT-5.6+).
    pub cache_breakpoints: bool,
    /// The context window, in tokens.
    pub context_window: u32,
    /// The output limit of one request, in tokens (the default `max_tokens`).
    pub max_output_tokens: u32,
}

impl ModelFamily {
    /// The family of `model` as `protocol` names it (a dated suffix such as `-20261015` or a
    /// gateway prefix such as `anthropic/` is allowed).
    pub fn of(protocol: Protocol, model: &str) -> Self {
        let name = model.rsplit('/').next().unwrap_or(model);
        let starts = |prefixes: &[&str]| prefixes.iter().any(|p| name.starts_with(p));
        match protocol {
            Protocol::Anthropic if name.starts_with("claude-") => {
                let preserved = starts(&[
                    "claude-fable-5-1",
                    "claude-fable-5-2",
                    "claude-mythos-5-1",
                    "claude-mythos-5-2",
                    "claude-opus-5-5",
                    "claude-sonnet-5-5",
                    "claude-haiku-5-5",
                ]);
                let adaptive = preserved
                    || starts(&[
                        "claude-opus-4-7",
                        "claude-opus-4-8",
                        "claude-opus-5",
                        "claude-sonnet-5",
                        "claude-fable-5",
                        "claude-mythos-5",
                    ]);
                // Fable 5, Mythos 5 and Opus 5 themselves (not their minor versions, which are
                // listed one by one) take system messages; Sonnet 5 does not.
                let exactly = |family: &str| {
                    name == family
                        || name
                            .strip_prefix(family)
                            .and_then(|r| r.strip_prefix('-'))
                            .is_some_and(|date| {
                                date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit())
                            })
                };
                let system_messages = starts(&[
                    "claude-fable-5-1",
                    "claude-mythos-5-1",
                    "claude-opus-5-5",
                    "claude-sonnet-5-5",
                    "claude-haiku-5-5",
                    "claude-opus-4-8",
                ]) || ["claude-fable-5", "claude-mythos-5", "claude-opus-5"]
                    .iter()
                    .any(|f| exactly(f));
                let known =
                    adaptive || starts(&["claude-opus-4", "claude-sonnet-4", "claude-haiku-4"]);
                // "Compaction": Opus 4.6 and later, Sonnet 4.6 and later, every 5 family.
                let native_compaction =
                    adaptive || starts(&["claude-opus-4-6", "claude-sonnet-4-6", "claude-haiku-5"]);
                Self {
                    known,
                    adaptive_thinking: adaptive,
                    // An unknown Claude model gets the rule that never gets a 400.
                    preserved_thinking: preserved || !known,
                    system_messages,
                    native_compaction,
                    reasoning: false,
                    cache_breakpoints: false,
                    context_window: 200_000,
                    max_output_tokens: if adaptive { 32_000 } else { 8_192 },
                }
            }
            Protocol::OpenAi | Protocol::OpenAiResponses if starts(&["gpt-5", "o3", "o4"]) => {
                Self {
                    known: true,
                    adaptive_thinking: false,
                    preserved_thinking: false,
                    system_messages: true,
                    // `/responses/compact` is a Responses endpoint.
                    native_compaction: protocol == Protocol::OpenAiResponses,
                    reasoning: true,
                    cache_breakpoints: gpt_version(name).is_some_and(|v| v >= (5, 6)),
                    context_window: if name.starts_with("gpt-5") {
                        400_000
                    } else {
                        200_000
                    },
                    max_output_tokens: 32_000,
                }
            }
            Protocol::Anthropic => Self {
                known: false,
                adaptive_thinking: false,
                preserved_thinking: true,
                system_messages: false,
                native_compaction: false,
                reasoning: false,
                cache_breakpoints: false,
                context_window: 200_000,
                max_output_tokens: 4_096,
            },
            Protocol::OpenAi | Protocol::OpenAiResponses => Self {
                known: false,
                adaptive_thinking: false,
                preserved_thinking: false,
                // Every Chat Completions and Responses server takes system messages anywhere.
                system_messages: true,
                native_compaction: false,
                reasoning: false,
                cache_breakpoints: false,
                context_window: 128_000,
                max_output_tokens: 4_096,
            },
        }
    }
}

/// The version of a `gpt-X.Y…` model name.
fn gpt_version(name: &str) -> Option<(u32, u32)> {
    let rest = name.strip_prefix("gpt-")?;
    let mut numbers = rest
        .split(|c: char| !c.is_ascii_digit())
        .map(|n| n.parse::<u32>().ok());
    let major = numbers.next()??;
    let minor = numbers.next().flatten().unwrap_or(0);
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn families_follow_the_provider_pages() {
        let anthropic = |m: &str| ModelFamily::of(Protocol::Anthropic, m);
        let fable = anthropic("claude-fable-5-2-20261101");
        assert!(fable.known && fable.adaptive_thinking && fable.preserved_thinking);
        assert!(
            !fable.system_messages,
            "not listed on the system-messages page"
        );
        let opus = anthropic("claude-opus-5-5");
        assert!(opus.preserved_thinking && opus.system_messages);
        let sonnet5 = anthropic("claude-sonnet-5");
        assert!(sonnet5.adaptive_thinking && !sonnet5.preserved_thinking);
        assert!(
            !sonnet5.system_messages,
            "Sonnet 5 does not take system messages"
        );
        let opus5 = anthropic("claude-opus-5-20260601");
        assert!(opus5.system_messages && !opus5.preserved_thinking);
        let old = anthropic("claude-sonnet-4-5");
        assert!(old.known && !old.adaptive_thinking && !old.preserved_thinking);
        let unknown = anthropic("my-gateway-model");
        assert!(!unknown.known && unknown.preserved_thinking);
        let gpt = ModelFamily::of(Protocol::OpenAiResponses, "openai/gpt-5.6");
        assert!(gpt.reasoning && gpt.cache_breakpoints);
        assert!(!ModelFamily::of(Protocol::OpenAiResponses, "gpt-5.5").cache_breakpoints);
        // Compaction: Opus and Sonnet 4.6 and later, the 5 families, Responses' endpoint.
        assert!(opus.native_compaction && sonnet5.native_compaction && fable.native_compaction);
        assert!(anthropic("claude-sonnet-4-6").native_compaction);
        assert!(!old.native_compaction && !unknown.native_compaction);
        assert!(gpt.native_compaction);
        assert!(!ModelFamily::of(Protocol::OpenAi, "gpt-5.6").native_compaction);
    }
}
