//! Where one capability crate's type becomes another's, in one place.
//!
//! The capability crates do not depend on each other, so a concept that crosses a boundary
//! has a type on each side: a program's attachment lifetime (`ishiki-codemode`) becomes
//! projection's [`Lifetime`]; persisted media (`ishiki-outlet`'s [`MediaRef`]) becomes an
//! [`AttachmentRecord`] and the embedder's [`AttachmentInfo`]; a catalog [`ToolDef`]
//! (`ishiki-toolsearch`) becomes the model boundary's [`ToolSpec`] or [`DeltaEntry`]
//! (`ishiki-model`); a resource, program, outlet or side-model error becomes the [`ToolError`]
//! the model reads, with its kind. Every such mapping is here, so a new variant or field is
//! added in one file.

use ishiki_outlet::MediaRef;
use ishiki_projection::{AttachmentRecord, Lifetime, SourceLink};
use ishiki_tool::{ToolError, ToolErrorKind};
use ishiki_toolsearch::ToolDef;

use crate::attachment::AttachmentInfo;
use crate::message::{DeltaEntry, ModelError, ModelErrorKind, ToolSpec};

/// A program attachment's lifetime as projection keeps it (CM-6 → PRJ-4..PRJ-7).
#[cfg(feature = "codemode")]
pub(crate) fn lifetime(l: ishiki_codemode::Lifetime) -> Lifetime {
    match l {
        ishiki_codemode::Lifetime::Once => Lifetime::Once,
        ishiki_codemode::Lifetime::Recent => Lifetime::Recent,
        ishiki_codemode::Lifetime::Retain => Lifetime::Retain,
    }
}

/// Media the outlet or the asset store persisted, as the attachment record projection keeps
/// (PRJ-1): `id`, left by `source`, with `lifetime`, created at `created_at` (its `seq` is
/// assigned when it is stored).
pub(crate) fn attachment_record(
    id: String,
    source: SourceLink,
    media: &MediaRef,
    lifetime: Lifetime,
    created_at: &str,
) -> AttachmentRecord {
    AttachmentRecord {
        id,
        source,
        url: media.url.clone(),
        media_type: media.media_type.clone(),
        bytes: media.bytes,
        dimensions: media.dimensions,
        lifetime,
        seq: 0,
        created_at: created_at.to_owned(),
    }
}

/// The same media as a call report or an inbound message shows it to the embedder.
pub(crate) fn attachment_info(media: &MediaRef, lifetime: Lifetime) -> AttachmentInfo {
    AttachmentInfo {
        url: media.url.clone(),
        media_type: media.media_type.clone(),
        bytes: media.bytes,
        lifetime,
    }
}

/// A catalog tool as the request's tool list names it.
pub(crate) fn tool_spec(def: &ToolDef) -> ToolSpec {
    ToolSpec {
        name: def.name.clone(),
        description: def.description.clone(),
        input_schema: def.input_schema.clone(),
    }
}

/// A tool that joined the catalog, as a `catalog_delta` part announces it (TS-3); with its
/// TypeScript declaration when programs can call it (TS-4).
pub(crate) fn delta_entry(def: &ToolDef, with_signature: bool) -> DeltaEntry {
    DeltaEntry {
        name: def.name.clone(),
        description: def.description.clone(),
        input_schema: def.input_schema.clone(),
        signature: with_signature.then(|| ishiki_toolsearch::signature(def)),
    }
}

/// A codemode failure as a tool error: a program that does not parse is the model's to fix; a
/// time, memory, size or engine limit is a limit; a sandbox that failed is unavailable; a
/// program that threw failed.
#[cfg(feature = "codemode")]
pub(crate) fn codemode_tool_error(e: ishiki_codemode::CodemodeError) -> ToolError {
    use ishiki_codemode::CodemodeErrorKind as C;
    let kind = match e.kind() {
        C::Syntax | C::InvalidAttachments => ToolErrorKind::Input,
        C::Timeout | C::Memory | C::TransferTooLarge | C::ResultTooLarge | C::Limit => {
            ToolErrorKind::Limit
        }
        C::Worker => ToolErrorKind::Unavailable,
        _ => ToolErrorKind::Failed,
    };
    // What the program printed before it failed is often the best clue; it is shown as
    // after a program that returned (CM-9).
    let mut text = e.to_string();
    if !e.console().is_empty() {
        text.push_str("\n[console]\n");
        text.push_str(&e.console().join("\n"));
    }
    ToolError::with_kind(kind, text)
}

/// A side model's failure (the vision model of `read(…?question=)`) as a tool error: retryable
/// is unavailable, the rest failed.
pub(crate) fn model_tool_error(e: ModelError) -> ToolError {
    let kind = match e.kind() {
        ModelErrorKind::Retryable => ToolErrorKind::Unavailable,
        _ => ToolErrorKind::Failed,
    };
    ToolError::with_kind(kind, e.message())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ts3_a_delta_entry_carries_the_whole_definition_and_a_signature_only_when_asked() {
        let schema = json!({ "type": "object", "properties": { "path": { "type": "string" } } });
        let def = ToolDef::new("write_file", "Write a file.", schema.clone());
        let plain = delta_entry(&def, false);
        assert_eq!(
            (
                plain.name.as_str(),
                plain.description.as_str(),
                &plain.input_schema
            ),
            ("write_file", "Write a file.", &schema)
        );
        assert_eq!(plain.signature, None);
        let with = delta_entry(&def, true);
        assert_eq!(with.signature, Some(ishiki_toolsearch::signature(&def)));
        assert!(
            with.signature
                .as_deref()
                .is_some_and(|s| s.contains("\n  write_file(input: {"))
        );
        assert_eq!(tool_spec(&def).input_schema, schema);
    }

    #[cfg(feature = "codemode")]
    #[test]
    fn cm6_every_program_lifetime_maps_to_the_projection_lifetime_of_the_same_name() {
        for l in [
            ishiki_codemode::Lifetime::Once,
            ishiki_codemode::Lifetime::Recent,
            ishiki_codemode::Lifetime::Retain,
        ] {
            assert_eq!(
                serde_json::to_value(lifetime(l)).ok(),
                serde_json::to_value(l).ok()
            );
        }
    }
}
