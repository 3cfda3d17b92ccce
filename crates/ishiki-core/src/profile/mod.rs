//! Profile and `models.yaml` assembly (requirements §1, PRO-1..PRO-8).
//!
//! A profile says which capabilities run (`codemode`, `toolsearch`) and how attachments and
//! assets behave; `models.yaml` declares what each model accepts. [`assemble`] joins the two
//! with the name of the main model and answers the questions the runtime asks at every step:
//! may the main model see images (PRO-8), and which model answers `read(...?question=)`.
//!
//! Both documents are decoded by hand from a small located tree instead of a serde derive, so
//! that YAML text ([`Profile::from_yaml`]) and JSON values embedded in other documents
//! ([`Profile::from_value`]) follow exactly the same rules, and every error names its key path
//! (plus line and column for YAML). Unknown keys are refused everywhere (PRO-7).

pub use ishiki_projection::ImageLimits;

/// The exact message of PRO-6, for a profile that still sets `attachment.maxImageRenders`.
pub const MAX_IMAGE_RENDERS_REMOVED: &str = "attachment.maxImageRenders was removed; use image lifetimes (once, recent, retain) and attachment.recentImageCount/imagePruneBatchSize";

mod assemble;
mod decode;
mod decode_models;
mod decode_profile;
mod diagnostic;
mod schema;
#[cfg(test)]
mod tests;
mod tree;

pub use assemble::assemble;
#[cfg(feature = "semantic")]
pub use assemble::load_semantic_model;
pub use diagnostic::{AssemblyError, AssemblyErrorKind};
pub use schema::{
    Assembly, AssetsSection, CleanupSection, CodemodeSection, McpAuthDecl,
    McpClientCredentialsDecl, McpOAuthDecl, McpSection, McpServerDecl, Modality, ModelCapabilities,
    ModelDecl, ModelsDoc, Profile, SemanticSection, ToolCalling, ToolsSection, ToolsearchSection,
    VisionTarget,
};
