//! Committing a response with its delivery state in one transaction (PRJ-4, PRJ-13), or
//! abandoning a failed step without writing anything.

use super::*;

impl Runtime {
    /// Marks a step as attempted without committing anything (a failed or aborted model call):
    /// the next request gets the next step number and retries every delivery (PRJ-4).
    pub fn abandon(&mut self, prepared: Prepared) {
        self.step = self.step.max(prepared.step);
    }

    /// A model request that failed with `error`: nothing is committed, as with
    /// [`Runtime::abandon`]. When the provider refused an image ([`crate::image_rejection`]:
    /// a 400 about an image), the images of that request turn terminal with the provider's
    /// reason, so the next request states it instead of the bytes and can succeed.
    ///
    /// Which images: the one whose URL the error names; otherwise those this request carried
    /// for the first time (the earlier ones were accepted before); otherwise all it carried.
    /// Returns the URLs turned terminal (empty when the failure was not about an image).
    pub fn abandon_failed(&mut self, prepared: Prepared, error: &str) -> Vec<String> {
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
    pub fn commit(
        &mut self,
        prepared: Prepared,
        response: ModelResponse,
    ) -> Result<Vec<ToolCall>, RuntimeError> {
        let step = prepared.step;
        let text_protocol = self.shared.assembly.main.tool_calling == ToolCalling::Text;
        // Reasoning first, verbatim: the provider replays it ahead of the text and calls.
        let mut content: Vec<Part> = response
            .reasoning
            .iter()
            .cloned()
            .map(Part::Reasoning)
            .collect();
        let mut planned = Vec::new();
        if let Some(text) = &response.text {
            if !text.is_empty() {
                content.push(Part::Text { text: text.clone() });
            }
            if text_protocol {
                let schema_of = |name: &str| {
                    self.tools
                        .iter()
                        .find(|(d, _)| d.name == name)
                        .map(|(d, _)| d.input_schema.clone())
                };
                for segment in text_protocol::parse(text, &schema_of) {
                    let id = format!("s{step}-call{}", planned.len() + 1);
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
        }
        for call in &response.calls {
            content.push(Part::ToolCall {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
            });
            planned.push(PlannedCall {
                id: call.id.clone(),
                name: call.name.clone(),
                input: call.input.clone(),
                malformed: None,
            });
        }
        let assistant = Message {
            id: format!("s{step}-assistant"),
            role: Role::Assistant,
            created_at: self.now(),
            content,
        };
        let mut delivery = self.delivery.clone();
        delivery.commit(&prepared.pending);
        let mut batch = Batch::default();
        if let Some(delta) = &prepared.delta {
            batch.messages.push(stored_message(delta)?);
        }
        let mut stored = stored_message(&assistant)?;
        if let (Some(usage), Value::Object(record)) = (&response.usage, &mut stored.json) {
            // Persisted beside the message it paid for; `Message` ignores the key on load.
            record.insert("usage".to_owned(), to_json(usage)?);
        }
        batch.messages.push(stored);
        batch.delivery = Some(to_json(&delivery)?);
        batch.catalog = Some(to_json(&CatalogBlob {
            catalog: Some(self.shared.catalog_mut().state()),
            announced: prepared.announced.clone(),
        })?);
        batch.meta.push(("step".to_owned(), json!(step)));
        batch
            .meta
            .push(("pending_calls".to_owned(), to_json(&planned)?));
        self.store_mut()
            .commit(&batch)
            .map_err(|e| RuntimeError::store("cannot store the response", &e))?;
        self.step = step;
        self.delivery = delivery;
        self.announced = prepared.announced;
        if let Some(delta) = prepared.delta {
            self.history.push(Entry {
                message: delta,
                withdrawn: false,
            });
        }
        self.history.push(Entry {
            message: Arc::new(assistant),
            withdrawn: false,
        });
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
