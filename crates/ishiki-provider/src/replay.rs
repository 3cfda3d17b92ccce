//! The one reasoning-replay rule, for every protocol that replays reasoning.
//!
//! Today's reasoning models bind each reasoning block to its prefix: the tools, the system
//! prompt and every message before it (Anthropic "Preserved thinking" and "Prefix checks",
//! platform.claude.com/docs/build-with-claude/preserved-thinking). A block whose prefix changed
//! since it was made is invalid, and so is every later block made before the change; a block
//! left out between others changes the prefix of the later ones. Thinking made after a change
//! is bound to the new prefix and stays valid.
//!
//! Ishiki keeps that rule by construction instead of predicting the provider's diff:
//! - when a response arrives, each of its reasoning blocks is stamped with a digest of the
//!   request prefix it was made after ([`stamp_reasoning`]): every unit of the rendered request (each
//!   tool, system block and message block, `cache_control` markers removed, since the check
//!   leaves them out) in the order the provider reads them, then the assistant role;
//! - when a request is rendered, the renderer feeds the same units in the same order and keeps
//!   a reasoning block only where the digest at the start of its assistant turn equals its
//!   stamp. A dropped block is not fed, so every later block made before
//!   the drop no longer matches either: the cascade the provider enforces falls out of the
//!   digest, and so does "never omit one between kept ones".
//!
//! The stamp lives in the history with the block ([`Reasoning::prefix`]), so a restart renders
//! the same request. A block without a stamp (history from before stamps) is never replayed.

use ishiki_model::{ModelResponse, Reasoning};

use crate::http::Protocol;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// A running digest of a rendered request's prefix.
#[derive(Clone, Default)]
pub(crate) struct Prefix(Sha256);

impl std::fmt::Debug for Prefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Prefix")
    }
}

impl Prefix {
    /// Feeds one unit: a tool, a system block, a message block or an input item. A top-level
    /// `cache_control` marker is not part of the prefix the providers compare.
    pub(crate) fn push(&mut self, unit: &Value) {
        let marked = |v: &Value| {
            v.get("cache_control").is_some()
                || v["content"].as_array().is_some_and(|blocks| {
                    blocks
                        .iter()
                        .any(|b| b.get("prompt_cache_breakpoint").is_some())
                })
        };
        if !marked(unit) {
            return self.push_text(&unit.to_string());
        }
        // Cache markers (Anthropic `cache_control`, Responses `prompt_cache_breakpoint` on an
        // item's content blocks) are not part of the prefix.
        let mut unit = unit.clone();
        if let Some(fields) = unit.as_object_mut() {
            fields.remove("cache_control");
        }
        if let Some(blocks) = unit.get_mut("content").and_then(Value::as_array_mut) {
            for block in blocks.iter_mut().filter_map(Value::as_object_mut) {
                block.remove("prompt_cache_breakpoint");
            }
        }
        self.push_text(&unit.to_string());
    }

    /// Feeds a message boundary with its role.
    pub(crate) fn push_role(&mut self, role: &str) {
        self.push_text(&format!("role:{role}"));
    }

    fn push_text(&mut self, text: &str) {
        // Length-prefixed, so no two unit sequences feed the same bytes.
        self.0.update((text.len() as u64).to_le_bytes());
        self.0.update(text.as_bytes());
    }

    /// The digest so far, lower-case hex.
    pub(crate) fn digest(&self) -> String {
        let bytes = self.0.clone().finalize();
        let mut out = String::with_capacity(64);
        for byte in bytes {
            out.push(char::from(b"0123456789abcdef"[usize::from(byte >> 4)]));
            out.push(char::from(b"0123456789abcdef"[usize::from(byte & 15)]));
        }
        out
    }

    /// Whether `reasoning` may be replayed at a turn whose prefix digest is `turn_start`.
    pub(crate) fn keeps(turn_start: &str, reasoning: &Reasoning) -> bool {
        reasoning.prefix.as_deref() == Some(turn_start)
    }
}

/// Stamps every reasoning block of `response` with `prefix`, the digest of the request it
/// answers as the next render will feed it (see the module docs).
pub(crate) fn stamp(response: &mut ModelResponse, prefix: &str) {
    for r in response.reasoning_mut() {
        r.prefix = Some(prefix.to_owned());
    }
}

/// Binds the reasoning of `response` to the request body `sent` that got it, so that later
/// renders replay it exactly while its prefix is unchanged (see the module docs).
/// [`HttpModel`](crate::HttpModel) does this itself; a caller that sends rendered bodies
/// through its own client calls it with the body it sent (streaming fields or not) and the
/// parsed response, before committing it. Chat Completions takes no reasoning back: nothing is
/// stamped there.
pub fn stamp_reasoning(protocol: Protocol, sent: &Value, response: &mut ModelResponse) {
    let prefix = match protocol {
        Protocol::OpenAi => return,
        Protocol::Anthropic => crate::anthropic::anthropic_response_prefix(sent),
        Protocol::OpenAiResponses => crate::responses::responses_response_prefix(sent),
    };
    stamp(response, &prefix);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cache_markers_are_not_part_of_the_prefix_and_units_do_not_run_together() {
        let mut a = Prefix::default();
        a.push(&json!({ "type": "text", "text": "x", "cache_control": { "type": "ephemeral" } }));
        let mut b = Prefix::default();
        b.push(&json!({ "type": "text", "text": "x" }));
        assert_eq!(a.digest(), b.digest());
        let mut c = Prefix::default();
        c.push(&json!("ab"));
        let mut d = Prefix::default();
        d.push(&json!("a"));
        d.push(&json!("b"));
        assert_ne!(c.digest(), d.digest());
        assert_eq!(a.digest().len(), 64);
    }
}
