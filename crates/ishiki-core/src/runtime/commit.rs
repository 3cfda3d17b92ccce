//! Committing a response with its delivery state in one transaction (PRJ-4, PRJ-13), or
//! abandoning a failed step without writing anything.

use std::sync::Arc;

use ishiki_projection::AttachmentRecord;
use serde_json::Value;

use super::meta::Meta;
use super::{
    Entry, MessageRecord, PlannedCall, Prepared, Runtime, delivery_records, stored_message, to_json,
};
use crate::error::RuntimeError;
use crate::message::{Message, ModelResponse, Part, Role, ToolCall};
use crate::profile::ToolCalling;
use crate::store::{Batch, StoredMessage};
use crate::text_protocol;
use crate::text_protocol::Segment;

impl Runtime {
    /// Marks a step as attempted without committing anything (a failed or aborted model call):
    /// the next request gets the next step number and retries every delivery (PRJ-4).
    pub fn abandon(&mut self, prepared: Prepared) {
        self.step = self.step.max(prepared.step);
    }

    /// A request the provider refused as longer than the model's context window: nothing is
    /// committed; the next request folds every result it may and compacts if it must, and the
    /// calibration learns that the estimate was short (the request counted at least the
    /// window).
    pub fn abandon_too_long(&mut self, prepared: Prepared) {
        if let Some(window) = self.window {
            self.context
                .calibrate(prepared.raw_estimate, window.input().saturating_add(1));
        }
        self.context.force = true;
        self.abandon(prepared);
    }

    /// A model request that failed with `error`: nothing is committed, as with
    /// [`Runtime::abandon`]. When the provider refused an image ([`crate::image_rejection`]:
    /// a 400 about an image), the images of that request turn terminal with the provider's
    /// reason, so the next request states it instead of the bytes and can succeed.
    ///
    /// Which images: the one whose URL the error names; otherwise those this request carried
    /// for the first time (the earlier ones were accepted before); otherwise all it carried.
    /// Returns the URLs turned terminal (empty when the failure was not about an image).
    ///
    /// When the provider said the request is longer than the context window
    /// ([`ModelError::says_too_long`](crate::ModelError::says_too_long)), the next request
    /// folds every result it may and compacts if it must, whatever the estimate said, and the
    /// estimate is corrected upwards ([`Runtime::abandon_too_long`]).
    pub fn abandon_failed(&mut self, prepared: Prepared, error: &str) -> Vec<String> {
        if crate::ModelError::says_too_long(None, error) {
            self.abandon_too_long(prepared);
            return Vec::new();
        }
        let reason = crate::image_rejection(error);
        let urls: Vec<String> = prepared
            .request
            .messages
            .iter()
            .flat_map(|m| &m.content)
            .filter_map(|p| match p {
                Part::Image(media) => Some(media.url.clone()),
                _ => None,
            })
            .collect();
        self.abandon(prepared);
        let Some(reason) = reason else {
            return Vec::new();
        };
        let carried: Vec<&AttachmentRecord> = self
            .records
            .iter()
            .filter(|r| urls.contains(&r.url))
            .collect();
        let named: Vec<&AttachmentRecord> = carried
            .iter()
            .copied()
            .filter(|r| error.contains(r.url.as_str()))
            .collect();
        let new: Vec<&AttachmentRecord> = carried
            .iter()
            .copied()
            .filter(|r| !self.delivery.state_of(r).viewed)
            .collect();
        let chosen = [named, new, carried]
            .into_iter()
            .find(|set| !set.is_empty())
            .unwrap_or_default();
        let marked: Vec<(String, String)> = chosen
            .iter()
            .map(|r| (r.id.clone(), r.url.clone()))
            .collect();
        let mut turned = Vec::new();
        for (id, url) in marked {
            self.rejected.insert(id, reason.clone());
            if !turned.contains(&url) {
                turned.push(url);
            }
        }
        turned
    }

    /// Commits the model's response together with the delivery state of the request it
    /// answered, in one store transaction (PRJ-13). Returns the calls to execute.
    pub async fn commit(
        &mut self,
        prepared: Prepared,
        response: ModelResponse,
    ) -> Result<Vec<ToolCall>, RuntimeError> {
        // Another response's calls still wait (two requests prepared, one committed): taking
        // this one would drop them from memory while the store still holds them.
        self.refuse_while_calls_wait("committing another response")?;
        let step = prepared.step;
        let text_protocol = self.shared.assembly.main.tool_calling == ToolCalling::Text;
        // The turn as received: text blocks, reasoning and calls keep their order, because
        // today's reasoning models check each reasoning block against everything before it.
        let mut content: Vec<Part> = Vec::with_capacity(response.parts.len());
        let mut planned = Vec::new();
        for part in &response.parts {
            match part {
                Part::Text { text } if text.is_empty() => {}
                Part::ToolCall { id, name, input } => {
                    content.push(part.clone());
                    planned.push(PlannedCall {
                        id: id.clone(),
                        name: name.clone(),
                        input: input.clone(),
                        malformed: None,
                    });
                }
                Part::Text { .. } | Part::Reasoning(_) => content.push(part.clone()),
                // A model adapter returns only the three kinds above; these are not part of an
                // assistant turn and are not committed (a compaction block stands first in a
                // request, never in history: the context engine places it).
                Part::Image(_)
                | Part::Audio(_)
                | Part::ToolResult { .. }
                | Part::CatalogDelta { .. }
                | Part::Compaction(_) => {}
            }
        }
        if text_protocol && let Some(text) = response.text() {
            let schema_of = |name: &str| self.tools.input_schema(name).cloned();
            for segment in text_protocol::parse(&text, &schema_of) {
                let id = crate::ids::text_call(step, planned.len() + 1);
                match segment {
                    Segment::Text(_) => {}
                    Segment::Call(call) => planned.push(PlannedCall {
                        id,
                        name: call.name,
                        input: call.arguments,
                        malformed: None,
                    }),
                    Segment::Malformed { raw: _, error } => planned.push(PlannedCall {
                        id,
                        name: "(malformed)".to_owned(),
                        input: Value::Null,
                        malformed: Some(error),
                    }),
                }
            }
        }
        // One cap on the calls a step runs, whichever way they came (native, streamed or
        // not, or written in text): the turn is kept whole, the calls past the cap are answered
        // with a refusal instead of running.
        let made = planned.len();
        for call in planned.iter_mut().skip(text_protocol::MAX_CALLS) {
            if call.malformed.is_none() {
                call.malformed = Some(format!(
                    "not run: this response made {made} tool calls and at most {} run in one step; make the rest in the next step",
                    text_protocol::MAX_CALLS
                ));
            }
        }
        let assistant = Message {
            id: crate::ids::assistant_message(step),
            role: Role::Assistant,
            created_at: self.now(),
            content,
        };
        // Only the records this request changed: the whole state is neither copied nor
        // rewritten (issue 26).
        let changed = self.delivery.changed_by(&prepared.pending);
        let mut batch = Batch::default();
        if let Some(delta) = &prepared.delta {
            batch.messages.push(stored_message(delta)?);
        }
        // The provider's usage and input transformations are kept beside the message they
        // belong to, in its record.
        let record = MessageRecord {
            message: assistant.clone(),
            usage: response.usage,
            input_transformations: response.input_transformations.clone(),
        };
        batch.messages.push(StoredMessage {
            id: assistant.id.clone(),
            json: to_json(&record)?,
        });
        batch.delivery_records = delivery_records(&changed)?;
        self.put_catalog(&mut batch, &prepared.announced)?;
        let mut context = prepared.next_context;
        if let Some(usage) = &response.usage {
            context.calibrate(prepared.raw_estimate, usage.input_tokens);
        }
        if context != self.context {
            // Folds, a compaction and the calibration take effect with the response to the
            // request that carried them, in its transaction: a restart projects the same.
            Meta::Context.put(&mut batch, &context)?;
        }
        Meta::Step.put(&mut batch, &step)?;
        Meta::PendingCalls.put(&mut batch, &planned)?;
        self.commit_batch(&batch, "cannot store the response")
            .await?;
        self.catalog_committed(batch);
        self.step = step;
        self.delivery.commit(&prepared.pending);
        self.announced = prepared.announced;
        self.last_sent = prepared.request.messages;
        self.context = context;
        if let Some(delta) = prepared.delta {
            self.history.push(Entry::new(delta, false));
        }
        self.history.push(Entry::new(Arc::new(assistant), false));
        let calls = planned
            .iter()
            .map(|p| ToolCall {
                id: p.id.clone(),
                name: p.name.clone(),
                input: p.input.clone(),
            })
            .collect();
        self.planned = planned;
        Ok(calls)
    }
}
