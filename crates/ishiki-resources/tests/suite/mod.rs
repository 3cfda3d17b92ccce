//! Integration tests, one module per area; each test names the requirement it checks.

mod artifact;
mod asset;
mod center;
mod common;
mod errors;
mod escape;
#[cfg(feature = "http")]
mod http;
mod media;
#[cfg(target_os = "linux")]
mod race;
mod wire;
