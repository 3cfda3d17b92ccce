//! Every id the runtime makes, in one place. Message, call and attachment-record ids are
//! stored, keep their place in every later request (PRJ-14) and appear in transcripts, so
//! their spelling is part of the format: a change here changes stored histories.

/// The tool-results message of step `step`: `s3-tools`.
pub(crate) fn tools_message(step: u64) -> String {
    format!("s{step}-tools")
}

/// The catalog-delta message of step `step` (TS-3): `s3-catalog`.
pub(crate) fn catalog_message(step: u64) -> String {
    format!("s{step}-catalog")
}

/// The assistant message of step `step`: `s3-assistant`.
pub(crate) fn assistant_message(step: u64) -> String {
    format!("s{step}-assistant")
}

/// The `n`-th call (from 1) parsed from the text of step `step`'s response (TP-1):
/// `s3-call1`.
pub(crate) fn text_call(step: u64, n: usize) -> String {
    format!("s{step}-call{n}")
}

/// A message of the compaction made for step `step` (`summary`, `note`, `compaction`):
/// `s3-context-summary`.
pub(crate) fn context_message(step: u64, suffix: &str) -> String {
    format!("s{step}-context-{suffix}")
}

/// The `n`-th attachment record (from 1) of the result of call `call_id` in step `step`:
/// `s3-c1-att-1`.
pub(crate) fn result_attachment(step: u64, call_id: &str, n: usize) -> String {
    format!("s{step}-{call_id}-att-{n}")
}

/// The `n`-th image (from 1) of the user message `message_id`: its attachment record's id,
/// `m1-image-1`.
pub(crate) fn inbound_image(message_id: &str, n: usize) -> String {
    format!("{message_id}-image-{n}")
}

/// The `n`-th image (from 1) of the user message `message_id` as a URL that names it before
/// it has an asset: `inbound:m1/1`.
pub(crate) fn inbound_url(message_id: &str, n: usize) -> String {
    format!("inbound:{message_id}/{n}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_their_stored_spelling() {
        assert_eq!(
            [
                tools_message(3),
                catalog_message(3),
                assistant_message(3),
                text_call(3, 1),
                context_message(3, "summary"),
                result_attachment(3, "c1", 1),
                inbound_image("m1", 1),
                inbound_url("m1", 1),
            ],
            [
                "s3-tools",
                "s3-catalog",
                "s3-assistant",
                "s3-call1",
                "s3-context-summary",
                "s3-c1-att-1",
                "m1-image-1",
                "inbound:m1/1",
            ]
        );
    }
}
