//! Where the runtime's outbound messages and side-model questions go: [`Platform`] receives
//! what `send_message` sends (SEND-1), [`VisionModel`] answers `read(…?question=…)` (VIS-1).

use async_trait::async_trait;
use ishiki_tool::ToolError;

use crate::message::ModelError;

/// An image `send_message` left out, and why (SEND-2).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Dropped {
    /// The `src` as the model wrote it.
    pub src: String,
    /// Why it was removed.
    pub reason: String,
}

/// An image that goes out with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutgoingImage {
    /// The `src` as the model wrote it.
    pub src: String,
    /// Its media type.
    pub media_type: String,
    /// The bytes.
    pub data: Vec<u8>,
}

/// What one `send_message` call sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// The step of the call.
    pub step: u64,
    /// The call id (the outer `codemode` call when sent from a program).
    pub call_id: String,
    /// The messages, with dropped `<img>` elements removed.
    pub messages: Vec<String>,
    /// The images that go out, in order of appearance.
    pub images: Vec<OutgoingImage>,
    /// The images that were removed, with reasons.
    pub dropped: Vec<Dropped>,
}

/// Receives outbound messages (a chat platform, a terminal, a transcript).
#[async_trait]
pub trait Platform: Send + Sync + std::fmt::Debug {
    /// Delivers one `send_message` call's messages, awaited on the caller's runtime under the
    /// call's deadline (`tools.timeoutMs`): a platform that does not answer in time fails the
    /// call, and its future is dropped. A failure becomes the call's error, with its kind
    /// ([`ToolErrorKind::Unavailable`](crate::ToolErrorKind::Unavailable) when the platform
    /// is down and a retry may work).
    async fn send(&self, outgoing: &Outgoing) -> Result<(), ToolError>;
}

/// A platform that drops everything (for embedders without outbound messages).
#[derive(Debug, Default)]
pub struct NullPlatform;

#[async_trait]
impl Platform for NullPlatform {
    async fn send(&self, _outgoing: &Outgoing) -> Result<(), ToolError> {
        Ok(())
    }
}

/// A side model that answers questions about one image (VIS-1).
#[async_trait]
pub trait VisionModel: Send + Sync + std::fmt::Debug {
    /// Asks `target` (a model or a model group from `attachment.visionModel`) about the image.
    /// It is a model request like any other: a [`ModelError`] says whether a retry may work.
    async fn ask(
        &self,
        target: &str,
        media_type: &str,
        image: &[u8],
        question: &str,
    ) -> Result<String, ModelError>;
}
