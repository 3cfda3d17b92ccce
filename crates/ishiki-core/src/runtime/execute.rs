//! Executing the committed calls: validation, limits, the tool's direct call, the outlet,
//! and one transaction for the results and their attachment records (OUT-1).

use std::sync::Arc;

use ishiki_outlet::Outlet;
use ishiki_projection::{AttachmentRecord, SourceLink};
use ishiki_tool::{ToolContext, ToolErrorKind};

use super::meta::Meta;
use super::{
    CallReport, Entry, PlannedCall, Runtime, stored_message, stored_record, validation_error,
};
use crate::builtin::{self, DirectCall};
use crate::convert;
use crate::error::{RuntimeError, RuntimeErrorKind};
use crate::message::{Message, Model, Part, Role};
use crate::registry::Origin;
use crate::store::Batch;

impl Runtime {
    /// Executes the committed response's calls in order, passes each result through the
    /// outlet, and commits results and attachment records in one transaction.
    ///
    /// Cancel-safe: dropping the returned future (or an error before the results are stored)
    /// leaves the calls waiting, so `prepare` keeps refusing; the next `execute` answers them
    /// as interrupted ("may or may not have taken effect"), exactly as a runtime reopened from
    /// the store would, and runs none of them a second time.
    pub async fn execute(&mut self) -> Result<Vec<CallReport>, RuntimeError> {
        // Whether calls wait depends on what the store holds, which a cut commit left unknown.
        self.refuse_in_doubt()?;
        if self.planned.is_empty() {
            return Ok(Vec::new());
        }
        if self.executing {
            // The last `execute` of these calls was dropped or failed before storing their
            // results: some may have run. Answered as a reopened runtime would, never run twice.
            let planned = std::mem::take(&mut self.planned);
            let reports = match self.answer_interrupted(&planned).await {
                Ok(reports) => reports,
                Err(e) => {
                    self.planned = planned;
                    return Err(e);
                }
            };
            self.executing = false;
            return Ok(reports);
        }
        // The calls stay planned until their results are stored, so a dropped `execute` leaves
        // them waiting (and `prepare` refusing) instead of lost.
        self.executing = true;
        let planned = self.planned.clone();
        let step = self.step;
        let mut reports = Vec::new();
        let mut new_records = Vec::new();
        for call in planned {
            let (report, records) = self.run_call(&call, step).await;
            new_records.extend(records);
            reports.push(report);
        }
        let message = self.results_message(step, &reports);
        let mut batch = Batch::default();
        batch.messages.push(stored_message(&message)?);
        for (k, record) in new_records.iter_mut().enumerate() {
            record.seq = (self.records.len() + k) as u64;
            batch.attachments.push(stored_record(record, None)?);
        }
        self.put_catalog(&mut batch, &self.announced)?;
        Meta::PendingCalls.put(&mut batch, &[] as &[super::PlannedCall])?;
        self.commit_batch(&batch, "cannot store the tool results")
            .await?;
        self.catalog_committed(batch);
        self.planned.clear();
        self.executing = false;
        self.history.push(Entry::new(Arc::new(message), false));
        self.records.extend(new_records);
        Ok(reports)
    }

    /// Refuses `what` while the last committed response's calls wait for [`Runtime::execute`]:
    /// a request with calls that have no results is malformed, and another response would
    /// drop the waiting calls from memory while the store still holds them.
    pub(super) fn refuse_while_calls_wait(&self, what: &str) -> Result<(), RuntimeError> {
        if self.planned.is_empty() {
            return Ok(());
        }
        Err(RuntimeError::new(
            RuntimeErrorKind::Usage,
            format!(
                "the calls of step {} have not run yet: call execute before {what}",
                self.step
            ),
        ))
    }

    /// The message holding the results of step `step`'s calls, as the model reads them.
    pub(super) fn results_message(&self, step: u64, reports: &[CallReport]) -> Message {
        Message {
            id: crate::ids::tools_message(step),
            role: Role::Tool,
            created_at: self.now(),
            content: reports
                .iter()
                .map(|r| Part::ToolResult {
                    call_id: r.call_id.clone(),
                    is_error: r.is_error,
                    text: r.text.clone(),
                })
                .collect(),
        }
    }

    /// One whole step against a model: prepare, respond, commit, execute. When the context
    /// engine asks for a compaction, `model` compacts first (natively when it can,
    /// [`Model::compact`](crate::Model::compact), else as a text summary); a request `model`
    /// refuses as longer than its window is folded and compacted and tried once more. Calls
    /// left waiting before it (a step cut while its calls ran) are settled first, as
    /// [`Runtime::execute`] settles them; their reports are not returned.
    pub async fn step_with(&mut self, model: &dyn Model) -> Result<Vec<CallReport>, RuntimeError> {
        // A step cut while its calls ran (this future dropped) left them waiting: they are
        // answered first, as interrupted, so the step after a cancellation just works.
        if !self.planned.is_empty() {
            self.execute().await?;
        }
        let mut retried = false;
        loop {
            let mut prepared = self.prepare().await?;
            if let Some(compaction) = &prepared.compaction {
                // The provider's own compaction when the model has one; a text summary when
                // it has none or its compaction failed (an adapter fails one that wrote
                // nothing).
                let native = match compaction.native_request() {
                    Some(request) => model.compact(request).await.ok().flatten(),
                    None => None,
                };
                prepared = match native {
                    Some(block) => self.compact_natively(prepared, block).await?,
                    None => {
                        let summary = model
                            .respond(&compaction.request)
                            .await
                            .map(|r| r.text().unwrap_or_default())
                            .map_err(|e| e.message().to_owned());
                        self.compact(prepared, summary).await?
                    }
                };
            }
            match model.respond(&prepared.request).await {
                Ok(response) => {
                    self.commit(prepared, response).await?;
                    return self.execute().await;
                }
                Err(reason)
                    if reason.kind() == crate::ModelErrorKind::ContextTooLong && !retried =>
                {
                    self.abandon_too_long(prepared);
                    retried = true;
                }
                Err(reason) => {
                    self.abandon_failed(prepared, reason.message());
                    return Err(RuntimeError::model(&reason));
                }
            }
        }
    }

    async fn run_call(
        &mut self,
        call: &PlannedCall,
        step: u64,
    ) -> (CallReport, Vec<AttachmentRecord>) {
        match self.try_call(call, step).await {
            Ok(done) => done,
            Err((kind, text)) => {
                // An error's text is a tool's output like any other (OUT-1): within the
                // display budget, archived and paged with a Continue line when longer.
                let (text, continuation) =
                    error_through_outlet(&self.outlet, &call.name, text).await;
                let report = CallReport {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    is_error: true,
                    error_kind: Some(kind),
                    text,
                    attachments: Vec::new(),
                    continuation,
                    missed_by_search: Vec::new(),
                };
                (report, Vec::new())
            }
        }
    }

    /// Runs one call: its report and attachment records, or the error kind and text the
    /// model reads.
    async fn try_call(
        &mut self,
        call: &PlannedCall,
        step: u64,
    ) -> Result<(CallReport, Vec<AttachmentRecord>), (ToolErrorKind, String)> {
        // The runtime's own refusals are about the call itself: the model can fix them.
        let failed = |text: String| Err((ToolErrorKind::Input, text));
        if let Some(error) = &call.malformed {
            return failed(error.clone());
        }
        if self.shared.catalog_mut().is_removed(&call.name) {
            return failed(format!(
                "the tool `{}` is no longer available: it was removed from the catalog (its server no longer offers it)",
                call.name
            ));
        }
        let available = self
            .shared
            .catalog_mut()
            .available()
            .iter()
            .any(|d| d.name == call.name);
        let Some(entry) = self.tools.get(&call.name) else {
            return failed(format!("there is no tool named `{}`", call.name));
        };
        if !available {
            return failed(format!(
                "the tool `{}` is not loaded yet: find it with search first; it becomes callable from the next step",
                call.name
            ));
        }
        if let Some(message) = crate::guard::imprecise_number(&call.input)
            .or_else(|| validation_error(&entry.validator, &call.input))
        {
            return failed(format!("invalid input for `{}`: {message}", call.name));
        }
        let context = ToolContext {
            call_id: call.id.clone(),
            step,
            from_program: false,
        };
        // Every call has a deadline and a result cap (issue 13); a program has its own limits.
        let limits = crate::guard::CallLimits::from_profile(
            &self.shared.assembly.profile.tools,
            self.shared.abandoned.clone(),
        );
        let direct = DirectCall {
            tool: entry.tool.clone(),
            name: &call.name,
            context: &context,
            limits,
            outlet: &self.outlet,
            shared: &self.shared,
            tools: &self.tools,
            sandbox: self.sandbox.as_ref(),
        };
        let input = call.input.clone();
        let outcome = match &entry.origin {
            Origin::BuiltinDirect(builtin) => builtin.call_direct(input, &direct).await,
            Origin::Builtin | Origin::Registered => builtin::call_plain(input, &direct).await,
        };
        match outcome {
            Ok(done) => {
                let now = self.now();
                let mut records = Vec::new();
                let mut infos = Vec::new();
                for (k, (media, lifetime)) in done.attachments.iter().enumerate() {
                    infos.push(convert::attachment_info(media, *lifetime));
                    records.push(convert::attachment_record(
                        crate::ids::result_attachment(step, &call.id, k + 1),
                        SourceLink::ToolResult {
                            call_id: call.id.clone(),
                        },
                        media,
                        *lifetime,
                        &now,
                    ));
                }
                Ok((
                    CallReport {
                        call_id: call.id.clone(),
                        name: call.name.clone(),
                        is_error: false,
                        error_kind: None,
                        text: done.text,
                        attachments: infos,
                        continuation: done.continuation,
                        missed_by_search: self.missed_by_search(&call.name),
                    },
                    records,
                ))
            }
            Err(e) => Err((e.kind(), e.message().to_owned())),
        }
    }

    /// Earlier searches that did not return `tool`, when it is a deferred tool.
    fn missed_by_search(&self, tool: &str) -> Vec<String> {
        let deferred = self
            .shared
            .catalog_mut()
            .get(tool)
            .is_some_and(|d| !d.resident);
        if deferred {
            self.shared.searches_missing(tool)
        } else {
            Vec::new()
        }
    }
}

/// The most bytes of an error shown when its whole text cannot be archived for paging.
const UNARCHIVED_ERROR_BYTES: usize = 4096;

/// An error's text through the outlet: the page the model reads and its continuation. When the
/// outlet cannot archive a long text, the model reads its start and why the rest is missing.
async fn error_through_outlet(
    outlet: &Outlet,
    tool: &str,
    text: String,
) -> (String, Option<String>) {
    let length = text.len();
    let mut end = length.min(UNARCHIVED_ERROR_BYTES);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let head = text[..end].to_owned();
    match outlet
        .emit(tool, ishiki_outlet::ToolDisplay::text(text))
        .await
    {
        Ok(emitted) => (emitted.text, emitted.continuation.map(|c| c.url)),
        Err(_) if end == length => (head, None),
        Err(e) => (
            format!(
                "{head}\n[the error is {length} bytes; the rest is not shown: {}]",
                e.message()
            ),
            None,
        ),
    }
}
