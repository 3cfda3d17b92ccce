//! Preparing a request: inbound messages and their images (PRJ-2), withdrawals, asset
//! cleanup, and the projection of history into the next request (PRJ-*).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use ishiki_outlet::MediaRef;
use ishiki_projection::{
    AttachmentContent, AttachmentRecord, Lifetime, ProjectionInput, SourceLink, Verdict,
};
use ishiki_toolsearch::ToolDef;

use super::{Entry, MediaFailure, Prepared, Projected, Runtime, stored_message, stored_record};
use crate::attachment::AttachmentInfo;
use crate::clock::rfc3339;
use crate::context::{ContextReport, ContextState, Thresholds};
use crate::convert;
use crate::edits::ImageBudget;
use crate::error::{RuntimeError, RuntimeErrorKind, err};
use crate::message::{Message, Part, Request, Role, ToolSpec};
use crate::store::Batch;

/// What the catalog gives one request: the tool list, the delta message announcing what
/// changed (if anything did), and what is announced once the request is committed.
/// What the context engine weighs for one request besides its messages: the window, the
/// tokens of the tool list and the delta (`fixed`), and the tool list a compaction must keep.
#[derive(Clone, Copy)]
struct ContextStep<'a> {
    window: crate::context::Window,
    fixed: u64,
    tools: &'a [ToolSpec],
}

struct CatalogStep {
    tools: Vec<ToolSpec>,
    delta: Option<Arc<Message>>,
    announced: Vec<String>,
}

impl Runtime {
    /// Registers an inbound platform message (PRJ-2): its images become `asset://<UUID v7>`
    /// resources (when within `assets.autoDownloadMaxBytes`, RES-9) and attachment records of
    /// lifetime `once` (unless `messageImageInput` is off). Returns each image as registered;
    /// one that was not downloaded has the URL `inbound:<message id>/<n>`.
    pub async fn add_user_message(
        &mut self,
        id: &str,
        text: &str,
        images: &[Vec<u8>],
    ) -> Result<Vec<AttachmentInfo>, RuntimeError> {
        if self.history.position(id).is_some() {
            return Err(RuntimeError::new(
                RuntimeErrorKind::Usage,
                format!("message id `{id}` is already used"),
            ));
        }
        let limit = self.shared.assembly.profile.assets.auto_download_max_bytes;
        let message_images = self.shared.assembly.profile.attachment.message_image_input;
        let now = self.shared.clock.now();
        let created_at = rfc3339(now);
        let mut body = text.to_owned();
        let mut inbound = Vec::new();
        let mut records = Vec::new();
        // Every image of the message is a `once` record linked to the message (PRJ-2).
        let record = |record_id: String, media: &MediaRef| {
            let source = SourceLink::Message {
                message_id: id.to_owned(),
            };
            convert::attachment_record(record_id, source, media, Lifetime::Once, &created_at)
        };
        for (k, bytes) in images.iter().enumerate() {
            let info = ishiki_resources::sniff(bytes);
            let size = bytes.len() as u64;
            let record_id = crate::ids::inbound_image(id, k + 1);
            if limit == 0 || size > limit {
                let reason = if limit == 0 {
                    "inbound downloads are off (assets.autoDownloadMaxBytes is 0)".to_owned()
                } else {
                    format!("it is {size} bytes, over assets.autoDownloadMaxBytes ({limit} bytes)")
                };
                let url = crate::ids::inbound_url(id, k + 1);
                body.push_str(&format!(
                    "\n[attachment not downloaded: image {} of this message; {}; {size} bytes: {reason}]",
                    k + 1,
                    info.media_type
                ));
                self.not_downloaded
                    .insert(record_id.clone(), reason.clone());
                let media = MediaRef {
                    url,
                    media_type: info.media_type,
                    bytes: size,
                    dimensions: info.dimensions,
                };
                inbound.push(convert::attachment_info(&media, Lifetime::Once));
                records.push((record(record_id, &media), Some(reason)));
                continue;
            }
            // A replayed clock (a scenario run again on its own state) repeats ids: skip taken
            // ones rather than refuse the message.
            // An id retention deleted is taken too: an old record names it (issue 24).
            let mut uuid = self.shared.clock.new_uuid_v7();
            for _ in 0..10_000 {
                if !self.asset_id_used(&uuid).await {
                    break;
                }
                uuid = self.shared.clock.new_uuid_v7();
            }
            let meta = self
                .shared
                .assets
                .put_with_id(uuid, bytes, now)
                .await
                .map_err(|e| err(RuntimeErrorKind::Io, "cannot store an inbound image")(&e))?;
            let media = MediaRef {
                url: meta.url,
                media_type: meta.media_type,
                bytes: size,
                dimensions: meta.dimensions,
            };
            body.push_str(&format!("\n{}", ishiki_outlet::marker(&media)));
            inbound.push(convert::attachment_info(&media, Lifetime::Once));
            if message_images {
                records.push((record(record_id, &media), None));
            }
        }
        let message = Message {
            id: id.to_owned(),
            role: Role::User,
            created_at,
            content: vec![Part::Text { text: body }],
        };
        let mut batch = Batch::default();
        batch.messages.push(stored_message(&message)?);
        let mut new_records = Vec::new();
        for (mut record, not_downloaded) in records {
            record.seq = (self.records.len() + new_records.len()) as u64;
            batch
                .attachments
                .push(stored_record(&record, not_downloaded)?);
            new_records.push(record);
        }
        self.commit_batch(&batch, "cannot store the message")
            .await?;
        self.history.push(Entry::new(Arc::new(message), false));
        self.records.extend(new_records);
        Ok(inbound)
    }

    /// Whether a message with this id is in the history (ids must be unique).
    pub fn has_message(&self, id: &str) -> bool {
        self.history.position(id).is_some()
    }

    /// Withdraws a platform message: it and its attachments leave the context (PRJ-7, PRJ-11).
    pub async fn withdraw(&mut self, id: &str) -> Result<(), RuntimeError> {
        let Some(index) = self.history.position(id) else {
            return Err(RuntimeError::new(
                RuntimeErrorKind::Usage,
                format!("no message `{id}` to withdraw"),
            ));
        };
        let batch = Batch {
            withdrawn: vec![id.to_owned()],
            ..Batch::default()
        };
        self.commit_batch(&batch, "cannot store the withdrawal")
            .await?;
        self.history.withdraw(index);
        Ok(())
    }

    /// Runs one asset-cleanup pass (RES-9); returns the deleted asset URLs.
    pub async fn cleanup_assets(&self) -> Result<Vec<String>, RuntimeError> {
        let days = u64::from(self.shared.assembly.profile.assets.cleanup.retention_days);
        let deleted = self
            .shared
            .assets
            .cleanup(
                self.shared.clock.now(),
                Duration::from_secs(days.saturating_mul(86_400)),
            )
            .await
            .map_err(|e| err(RuntimeErrorKind::Io, "asset cleanup failed")(&e))?;
        // What the cache knew as readable is gone now, for good.
        let mut cache = self
            .media_cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for url in &deleted {
            cache.insert(url.clone(), Err(MediaFailure::Deleted));
        }
        Ok(deleted)
    }

    /// Projects the next request (PRJ-3): history, attachment messages after their sources,
    /// and the catalog delta at the end (TS-3). Nothing is committed until
    /// [`Runtime::commit`]. Fails while the last committed response's calls wait for
    /// [`Runtime::execute`].
    ///
    /// The context engine runs here ([`crate::context`]): past `context.foldAt` the oldest
    /// results are folded (archived, then shown as stubs); when folding is not enough, the
    /// request comes with a [`CompactionRequest`](super::CompactionRequest)
    /// ([`Prepared::compaction`]) for [`Runtime::compact`]. What it changed is in
    /// [`Prepared::context`] and is committed with the response.
    pub async fn prepare(&mut self) -> Result<Prepared, RuntimeError> {
        self.prepare_with(None).await
    }

    pub(super) async fn prepare_with(
        &mut self,
        context: Option<ContextState>,
    ) -> Result<Prepared, RuntimeError> {
        // First: after a commit cut in doubt, even whether calls wait is unknown.
        self.refuse_in_doubt()?;
        // A request with calls that have no results is malformed, and committing another
        // response would drop the waiting calls for good.
        self.refuse_while_calls_wait("preparing the next request")?;
        let step = self.step + 1;
        let CatalogStep {
            tools,
            delta,
            announced,
        } = self.catalog_step(step);

        // The tokens of the tool list and the delta, which the projection does not count.
        let fixed = crate::context::tools_tokens(&tools)
            + delta.as_deref().map_or(0, crate::context::message_tokens);
        let mut ctx = context.unwrap_or_else(|| self.context.clone());
        let mut built = self.project_messages(&ctx).await?;
        let estimated_before = ctx.calibrated(fixed + built.raw);
        let mut report = ContextReport {
            estimated_before,
            estimated_after: estimated_before,
            window: self.window.map(|w| w.tokens),
            ..ContextReport::default()
        };
        let compaction = match self.window {
            Some(window) => {
                let step = ContextStep {
                    window,
                    fixed,
                    tools: &tools,
                };
                self.fold_or_compact(step, &mut ctx, &mut built, &mut report)
                    .await?
            }
            None => None,
        };
        let raw_estimate = fixed + built.raw;
        report.estimated_after = ctx.calibrated(raw_estimate);
        let Projected {
            mut messages,
            pending,
            ..
        } = built;
        if let Some(delta) = &delta {
            messages.push(delta.clone());
        }
        let budget = self.image_budget();
        let (messages, edits) =
            crate::edits::plan(&self.last_sent, messages, self.edit_policy, budget);
        Ok(Prepared {
            step,
            request: Request { tools, messages },
            edits,
            context: report,
            compaction,
            pending,
            delta,
            announced,
            next_context: ctx,
            raw_estimate,
        })
    }

    /// The step's tool list and catalog delta (TS-3, TS-5): every tool listed so far keeps its
    /// place (removed ones too, so the prefix stays); tools not yet announced are announced as
    /// added, and announced ones that were removed as gone, once.
    fn catalog_step(&self, step: u64) -> CatalogStep {
        let step_catalog = self.shared.catalog_mut().begin_step();
        let tools: Vec<ToolSpec> = step_catalog
            .tools
            .iter()
            .map(crate::convert::tool_spec)
            .collect();
        let announced_set: BTreeSet<&String> = self.announced.iter().collect();
        // Removed tools keep their place in the list (the prefix stays) but are not announced
        // as added; those the model was told about are announced as gone, once (TS-5).
        let gone: BTreeSet<String> = {
            let catalog = self.shared.catalog_mut();
            step_catalog
                .tools
                .iter()
                .filter(|d| catalog.is_removed(&d.name))
                .map(|d| d.name.clone())
                .collect()
        };
        let added: Vec<&ToolDef> = step_catalog
            .tools
            .iter()
            .filter(|d| !announced_set.contains(&d.name) && !gone.contains(&d.name))
            .collect();
        let removed: Vec<String> = step_catalog
            .removed
            .iter()
            .filter(|n| announced_set.contains(n) && gone.contains(*n))
            .cloned()
            .collect();
        let with_signatures = self.sandbox.is_some();
        let delta = (!added.is_empty() || !removed.is_empty()).then(|| {
            let mut content = Vec::new();
            if !added.is_empty() {
                content.push(Part::Text {
                    text: ishiki_toolsearch::delta_text(
                        &added.iter().map(|d| (*d).clone()).collect::<Vec<_>>(),
                        if with_signatures {
                            ishiki_toolsearch::DeltaForm::Signatures
                        } else {
                            ishiki_toolsearch::DeltaForm::Described
                        },
                    ),
                });
                content.push(Part::CatalogDelta {
                    added: added
                        .iter()
                        .map(|d| crate::convert::delta_entry(d, with_signatures))
                        .collect(),
                });
            }
            if !removed.is_empty() {
                content.push(Part::Text {
                    text: ishiki_toolsearch::removed_text(&removed),
                });
            }
            Arc::new(Message {
                id: crate::ids::catalog_message(step),
                role: Role::System,
                created_at: self.now(),
                content,
            })
        });
        let mut announced = self.announced.clone();
        announced.extend(added.iter().map(|d| d.name.clone()));
        announced.retain(|n| !removed.contains(n));
        CatalogStep {
            tools,
            delta,
            announced,
        }
    }

    /// The context engine for one request (`crate::context`): past `context.foldAt` the oldest
    /// results are folded (`fold_results`) and `built` is projected again; when that is not
    /// enough, the request to compact. `ctx` and `report` take what changed.
    async fn fold_or_compact(
        &self,
        step: ContextStep<'_>,
        ctx: &mut ContextState,
        built: &mut Projected,
        report: &mut ContextReport,
    ) -> Result<Option<super::CompactionRequest>, RuntimeError> {
        let estimated_before = report.estimated_before;
        let mut compaction = None;
        let thresholds = Thresholds::new(&self.context_config, step.window);
        // Only a request past foldAt (or after a "too long") looks for what to fold: the
        // scan reads every result's text.
        let candidates = if estimated_before > thresholds.fold || ctx.force {
            crate::context::candidates(&built.messages, ctx, &self.context_config)
        } else {
            Vec::new()
        };
        let chosen = crate::context::choose(&candidates, estimated_before, thresholds, ctx);
        self.fold_results(&chosen, &candidates, built, ctx, report)
            .await?;
        // Past foldAt with too little left to fold (stubs, calls and never-folded results
        // pile up in a long session): compaction is what frees room, and it also keeps
        // every later step's work proportional to what it kept.
        let exhausted = estimated_before > thresholds.fold
            && !crate::context::worth_folding(&candidates, thresholds, ctx);
        if !chosen.is_empty() {
            *built = self.project_messages(ctx).await?;
        }
        let estimate = ctx.calibrated(step.fixed + built.raw);
        let over = estimate > thresholds.compact
            || (ctx.force && estimate > thresholds.fold)
            || (exhausted && estimate > thresholds.fold);
        if over {
            compaction = self.compaction_request(ctx, built, step.tools, thresholds);
        }
        ctx.force = false;
        Ok(compaction)
    }

    /// Archives each chosen result's exact text (and, with `context.foldInputs`, its input)
    /// and records the fold in `ctx`: the stub's URL reads the text back byte for byte.
    async fn fold_results(
        &self,
        chosen: &[String],
        candidates: &[crate::context::Candidate],
        built: &Projected,
        ctx: &mut ContextState,
        report: &mut ContextReport,
    ) -> Result<(), RuntimeError> {
        for call_id in chosen {
            let Some(candidate) = candidates.iter().find(|c| &c.call_id == call_id) else {
                continue;
            };
            let Some(text) = crate::context::result_text(&built.messages, call_id) else {
                continue;
            };
            // The exact text the model saw: the stub's URL reads it back byte for byte.
            let url = self
                .shared
                .artifacts
                .put("folded", text.as_bytes(), "txt")
                .await
                .map_err(|e| err(RuntimeErrorKind::Io, "cannot archive a folded result")(&e))?;
            self.own_archive(&url);
            report.folded.push(crate::context::FoldedReport {
                call_id: call_id.clone(),
                url: url.clone(),
            });
            let input_url = match self.context_config.fold_inputs {
                true => match crate::context::foldable_input(&built.messages, call_id) {
                    Some(input) => Some(
                        self.shared
                            .artifacts
                            .put("folded", input.to_string().as_bytes(), "json")
                            .await
                            .map_err(|e| {
                                err(RuntimeErrorKind::Io, "cannot archive a folded input")(&e)
                            })
                            .inspect(|url| self.own_archive(url))?,
                    ),
                    None => None,
                },
                false => None,
            };
            ctx.folds.push(crate::context::Fold {
                call_id: call_id.clone(),
                tool: candidate.tool.clone(),
                url,
                lines: text.lines().count(),
                chars: text.chars().count(),
                input_url,
            });
        }
        Ok(())
    }

    /// The per-request image budgets (PRJ-8): the profile's, within the provider's limits.
    fn image_budget(&self) -> ImageBudget {
        let config = self.attachment_config();
        let limits = &config.provider_limits;
        ImageBudget {
            images: limits
                .images
                .map_or(config.max_image_count, |n| n.min(config.max_image_count)),
            // Provider request limits count base64: four bytes for every three.
            bytes: limits
                .request_bytes
                .map_or(config.max_total_image_bytes, |b| {
                    (b / 4 * 3).min(config.max_total_image_bytes)
                }),
        }
    }

    /// History as the next request shows it under `ctx`: compacted turns replaced by their
    /// summary, folded results by their stubs, attachment messages after their sources (the
    /// projection, asked with a source set that leaves folded and compacted sources out).
    async fn project_messages(&self, ctx: &ContextState) -> Result<Projected, RuntimeError> {
        let from = self.compacted_upto(ctx);
        let folded = ctx.folded();
        // A source is active when it is at or after the compaction's cut, not withdrawn, and
        // (a result) not folded: a folded result's attachments leave with it (PRJ-7, PRJ-11).
        // The projection asks only about records still in play, and each question is a
        // lookup: nothing here passes over the whole history.
        let active = |link: &SourceLink| match link {
            SourceLink::Message { message_id } => {
                self.history.user_message_active(message_id, from)
            }
            SourceLink::ToolResult { call_id } => {
                !folded.contains(call_id.as_str()) && self.history.result_active(call_id, from)
            }
        };
        let config = self.attachment_config();
        // The projection asks for verdicts synchronously and a verdict may need bytes never
        // read (a new attachment): a pass that met such records is set aside, their bytes are
        // read (and remembered), and the projection asks again. Each pass reads at least one
        // record that no later pass reads again, so this ends; in a steady conversation the
        // first pass is the only one.
        let projection = loop {
            let unread = std::sync::Mutex::new(Vec::new());
            let verdict = |r: &AttachmentRecord| {
                if !active(&r.source) {
                    return Verdict::Unavailable {
                        reason: "its source is no longer in the conversation".to_owned(),
                    };
                }
                self.verdict(r).unwrap_or_else(|missing| {
                    unread
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(missing);
                    Verdict::Unavailable {
                        reason: "its bytes were not read yet".to_owned(),
                    }
                })
            };
            let projection = ishiki_projection::project(&ProjectionInput {
                records: &self.records,
                active: &active,
                verdict: &verdict,
                state: &self.delivery,
                config: &config,
                image_input: self.shared.assembly.image_input,
                audio_input: self.shared.assembly.audio_input,
            });
            let unread = unread
                .into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if unread.is_empty() {
                break projection;
            }
            for media in &unread {
                // What it finds is remembered: the next pass's verdict reads it.
                self.learn_media(media).await;
            }
        };

        // Attachment messages go right after their source: a user message, or a tool result
        // (in the order of the results in their message). Keyed by where that is in history.
        let mut attached: BTreeMap<(usize, usize), Vec<Arc<Message>>> = BTreeMap::new();
        for m in projection.messages {
            let place = match &m.after {
                SourceLink::Message { message_id } => {
                    self.history.position(message_id).map(|i| (i, 0))
                }
                SourceLink::ToolResult { call_id } => {
                    self.history.result_position(call_id, from).and_then(|i| {
                        let parts = &self.history.message(i)?.content;
                        let part = parts.iter().position(
                            |p| matches!(p, Part::ToolResult { call_id: c, .. } if c == call_id),
                        )?;
                        Some((i, part))
                    })
                }
            };
            let Some(place) = place else { continue };
            let mut content = Vec::new();
            for c in m.content {
                match c {
                    AttachmentContent::Text(text) => content.push(Part::Text { text }),
                    AttachmentContent::Media {
                        url, media_type, ..
                    } => content.push(self.media_part(&url, &media_type).await),
                }
            }
            attached.entry(place).or_default().push(Arc::new(Message {
                id: m.id,
                role: Role::User,
                created_at: m.created_at,
                content,
            }));
        }
        let mut raw = 0u64;
        let mut messages = Vec::with_capacity(self.history.len() - from + 3);
        if let Some(compaction) = &ctx.compaction {
            // Dated like the last message it replaces (stable across requests and restarts).
            let created_at = from
                .checked_sub(1)
                .and_then(|i| self.history.get(i))
                .map_or("1970-01-01T00:00:00Z", |e| e.message.created_at.as_str());
            for summary in crate::context::summary_messages(compaction, created_at) {
                raw += crate::context::message_tokens(&summary);
                messages.push(Arc::new(summary));
            }
        }
        let mut push = |message: Arc<Message>, tokens: u64, messages: &mut Vec<Arc<Message>>| {
            raw += tokens;
            messages.push(message);
        };
        let mut attached = attached.into_iter().peekable();
        for (index, entry) in self.history.iter().enumerate().skip(from) {
            if entry.withdrawn {
                continue;
            }
            let (shown, tokens) = self.shown(entry, ctx, &folded);
            push(shown, tokens, &mut messages);
            // What is placed after an entry skipped above (none is: its sources are not
            // active) is dropped with it.
            while let Some(((at, _), _)) = attached.peek()
                && *at <= index
            {
                let Some(((at, _), after)) = attached.next() else {
                    break;
                };
                if at == index {
                    for m in after {
                        let t = crate::context::message_tokens(&m);
                        push(m, t, &mut messages);
                    }
                }
            }
        }
        Ok(Projected {
            messages,
            pending: projection.pending,
            raw,
        })
    }

    /// A history message as requests show it, with its raw token estimate: the stored message,
    /// or, when it holds folded results, its folded version (made once per set of folds).
    pub(super) fn shown(
        &self,
        entry: &Entry,
        ctx: &ContextState,
        folded: &HashSet<&str>,
    ) -> (Arc<Message>, u64) {
        if folded.is_empty() || !matches!(entry.message.role, Role::Tool | Role::Assistant) {
            return (entry.message.clone(), entry.tokens);
        }
        let touched = |p: &Part| match p {
            Part::ToolResult { call_id, .. } => {
                entry.message.role == Role::Tool && folded.contains(call_id.as_str())
            }
            // A call's input is folded only with `foldInputs`: ask the fold itself.
            Part::ToolCall { id, .. } => {
                self.context_config.fold_inputs
                    && entry.message.role == Role::Assistant
                    && folded.contains(id.as_str())
            }
            _ => false,
        };
        let count = entry.message.content.iter().filter(|p| touched(p)).count();
        if count == 0 {
            return (entry.message.clone(), entry.tokens);
        }
        let mut cache = self
            .fold_cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((n, message, tokens)) = cache.get(&entry.message.id)
            && *n == count
        {
            return (message.clone(), *tokens);
        }
        let folds: Vec<crate::context::Fold> = ctx
            .folds
            .iter()
            .filter(|f| {
                entry.message.content.iter().any(|p| match p {
                    Part::ToolResult { call_id, .. } => *call_id == f.call_id,
                    Part::ToolCall { id, .. } => *id == f.call_id,
                    _ => false,
                })
            })
            .cloned()
            .collect();
        let shown = crate::context::apply_folds(vec![entry.message.clone()], &folds)
            .pop()
            .unwrap_or_else(|| entry.message.clone());
        let tokens = if Arc::ptr_eq(&shown, &entry.message) {
            entry.tokens
        } else {
            crate::context::message_tokens(&shown)
        };
        cache.insert(entry.message.id.clone(), (count, shown.clone(), tokens));
        (shown, tokens)
    }
}
