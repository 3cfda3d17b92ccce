//! Compaction: the oldest turns replaced by a summary (text, or the provider's own block),
//! planned while preparing a request and applied before it is sent ([`crate::context`]).

use std::collections::HashSet;
use std::sync::Arc;

use ishiki_model::{Compacted, Message, Part, Request, Role, ToolSpec};

use super::{CompactionRequest, NativePlan, Prepared, Projected, Runtime, err};
use crate::context::{Compaction, ContextState, Thresholds};
use crate::{RuntimeError, RuntimeErrorKind};

/// What replaces compacted turns: a summary as text (or why there is none), or the provider's
/// own compaction block.
enum Summary {
    Text(Result<String, String>),
    Native(Compacted),
}

impl Runtime {
    /// Compacts the turns `prepared` asked to compact ([`Prepared::compaction`]) with
    /// `summary` — the compaction model's answer, or `Err` with why there is none (it failed,
    /// or no model could be asked) — and prepares the request again. Without a summary the
    /// turns are still replaced, by a note saying where they read back, so a failed summary
    /// never ends the session. Nothing is committed until [`Runtime::commit`].
    pub async fn compact(
        &mut self,
        prepared: Prepared,
        summary: Result<String, String>,
    ) -> Result<Prepared, RuntimeError> {
        self.compact_with(prepared, Summary::Text(summary)).await
    }

    /// Compacts the turns `prepared` asked to compact with the provider's own compaction
    /// `block` — the answer of [`Model::compact`](crate::Model::compact) to
    /// [`CompactionRequest::native_request`] — and prepares the request again: the block is
    /// sent back first, verbatim, in place of the turns it summarizes, which read back from
    /// their archive as with [`Runtime::compact`]. Fails when `prepared` asked for no native
    /// compaction. Nothing is committed until [`Runtime::commit`].
    pub async fn compact_natively(
        &mut self,
        prepared: Prepared,
        block: Compacted,
    ) -> Result<Prepared, RuntimeError> {
        if prepared
            .compaction
            .as_ref()
            .is_none_or(|c| c.native.is_none())
        {
            return Err(RuntimeError::new(
                RuntimeErrorKind::Usage,
                "this request asked for no native compaction: compact it with a text summary",
            ));
        }
        self.compact_with(prepared, Summary::Native(block)).await
    }

    async fn compact_with(
        &mut self,
        prepared: Prepared,
        summary: Summary,
    ) -> Result<Prepared, RuntimeError> {
        let Some(mut request) = prepared.compaction else {
            return Ok(prepared);
        };
        let (native, summarized) = match summary {
            Summary::Native(block) => {
                // The native cut is its own: the provider summarizes up to a finished turn.
                if let Some(plan) = request.native.take() {
                    request.through = plan.through;
                    request.replaced = plan.replaced;
                }
                let summarized = block.summary.clone();
                (Some(block), summarized)
            }
            Summary::Text(text) => (
                None,
                text.as_deref().ok().and_then(crate::context::clean_summary),
            ),
        };
        let mut ctx = prepared.next_context;
        let previous = ctx.compaction.clone();
        let mut archived: Vec<Arc<Message>> = Vec::new();
        if let Some(previous) = &previous {
            // The earlier summary names the earlier archive: the chain reads back in full.
            archived.extend(
                crate::context::summary_messages(previous, &self.now())
                    .into_iter()
                    .map(Arc::new),
            );
        }
        archived.extend(request.replaced[request.fresh..].iter().cloned());
        let text = crate::context::archive_text(&archived);
        let url = self
            .shared
            .artifacts
            .put("compacted", text.as_bytes(), "txt")
            .await
            .map_err(|e| err(RuntimeErrorKind::Io, "cannot archive the compacted turns")(&e))?;
        let is_native = native.is_some();
        let compacted = Compaction {
            through: request.through.clone(),
            messages: request.replaced.len(),
            url: url.clone(),
            summary: summarized.clone(),
            step: prepared.step,
            native,
        };
        // Folds of compacted results are gone with them.
        let gone: HashSet<&str> = request
            .replaced
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|p| match p {
                Part::ToolResult { call_id, .. } => Some(call_id.as_str()),
                _ => None,
            })
            .collect();
        // What no longer names its archive still reads back, in this conversation only.
        let mut archives: Vec<String> = Vec::new();
        for fold in ctx
            .folds
            .iter()
            .filter(|f| gone.contains(f.call_id.as_str()))
        {
            archives.push(fold.url.clone());
            archives.extend(fold.input_url.clone());
        }
        archives.extend(previous.as_ref().map(|p| p.url.clone()));
        for url in archives {
            if !ctx.archives.contains(&url) {
                ctx.archives.push(url);
            }
        }
        ctx.folds.retain(|f| !gone.contains(f.call_id.as_str()));
        self.own_archive(&url);
        ctx.compaction = Some(compacted);
        let folded_before = prepared.context.folded;
        let estimated_before = prepared.context.estimated_before;
        let mut again = self.prepare_with(Some(ctx)).await?;
        again.context.estimated_before = estimated_before;
        let mut folded = folded_before;
        folded.append(&mut again.context.folded);
        again.context.folded = folded;
        again.context.compacted = Some(crate::context::CompactedReport {
            messages: request.replaced.len(),
            url,
            summarized: is_native || summarized.is_some(),
            native: is_native,
        });
        // One compaction per request: a summary that is itself too long waits for the next.
        again.compaction = None;
        Ok(again)
    }

    /// The first history index a compaction in `ctx` keeps (0 without one).
    pub(super) fn compacted_upto(&self, ctx: &ContextState) -> usize {
        ctx.compaction
            .as_ref()
            // From the end: a compaction keeps few messages after the one it ends at.
            .and_then(|c| self.history.iter().rposition(|e| e.message.id == c.through))
            .map_or(0, |i| i + 1)
    }

    /// The summary request for compacting the oldest turns of `built`, when a cut exists:
    /// the request's own prefix up to the cut (so a provider cache serves it), then the
    /// instruction. The newest messages that fit in half the fold threshold are kept.
    pub(super) fn compaction_request(
        &self,
        ctx: &ContextState,
        built: &Projected,
        tools: &[ToolSpec],
        thresholds: Thresholds,
    ) -> Option<CompactionRequest> {
        let from = self.compacted_upto(ctx);
        let folded = ctx.folded();
        let visible: Vec<(usize, Arc<Message>, u64)> = self.history[from..]
            .iter()
            .enumerate()
            .filter(|(_, e)| !e.withdrawn)
            .map(|(i, e)| {
                let (m, t) = self.shown(e, ctx, &folded);
                (from + i, m, t)
            })
            .collect();
        let pairs: Vec<(Arc<Message>, u64)> =
            visible.iter().map(|(_, m, t)| (m.clone(), *t)).collect();
        // Half the fold threshold stays, in raw tokens (the thresholds are calibrated).
        let keep = (thresholds.fold / 2).saturating_mul(1000) / ctx.ratio();
        let cut = crate::context::compaction_cut(&pairs, keep)?;
        // Where a cut falls in history and in the request: the id of the last message it
        // replaces, the history messages it replaces, and the request's messages before it.
        let plan = |cut: usize| {
            let through_index = visible[cut - 1].0;
            let position = visible
                .get(cut)
                .map_or(built.messages.len(), |(_, kept, _)| {
                    built
                        .messages
                        .iter()
                        .position(|m| m.id == kept.id)
                        .unwrap_or(built.messages.len())
                });
            let replaced: Vec<Arc<Message>> = self.history[..=through_index]
                .iter()
                .filter(|e| !e.withdrawn)
                .map(|e| e.message.clone())
                .collect();
            (
                self.history[through_index].message.id.clone(),
                replaced,
                built.messages[..position].to_vec(),
            )
        };
        // Cheap to plan, whether or not the model compacts natively (it says so by answering).
        let native = crate::context::native_cut(&pairs, cut).map(|native_cut| {
            let (through, replaced, messages) = plan(native_cut);
            NativePlan {
                request: Request {
                    tools: tools.to_vec(),
                    messages,
                },
                through,
                replaced,
            }
        });
        let (through, replaced, mut messages) = plan(cut);
        messages.push(Arc::new(Message {
            id: crate::ids::context_message(self.step + 1, "compaction"),
            role: Role::User,
            created_at: self.now(),
            content: vec![Part::Text {
                text: crate::context::SUMMARY_INSTRUCTION.to_owned(),
            }],
        }));
        // Those before `from` were compacted already: their archive is the earlier one's.
        let fresh = self.history[..from].iter().filter(|e| !e.withdrawn).count();
        Some(CompactionRequest {
            request: Request {
                tools: tools.to_vec(),
                messages,
            },
            through,
            replaced,
            fresh,
            native,
        })
    }
}
