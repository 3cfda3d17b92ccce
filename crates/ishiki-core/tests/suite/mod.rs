//! Integration tests, one module per area; each test names the requirement it checks.

mod assembly;
mod backends;
mod cancel;
mod context;
mod crash;
mod errors;
mod image_limits;
mod limits;
mod mid_commit;
mod retention;
mod runtime;
mod scale;
mod send_markup;
mod state_dir;
mod store;
mod text_protocol;
mod tools_after_start;

/// Runs `f` with insta writing to `tests/snapshots/`, snapshot names without module prefixes.
pub(crate) fn with_snapshots(f: impl FnOnce()) {
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.bind(f);
}
