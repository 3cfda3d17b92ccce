//! Snapshots of what the model reads: a bash display cut at the budget, a file page with its
//! Continue line, a display whose two images became markers (OUT-3, OUT-4, OUT-5, OUT-6).

use ishiki_outlet::{Budget, Media, Outlet, ToolDisplay};
use ishiki_resources::ReadSource;

use super::archive::{gif, png};
use super::common::{TempStore, check_page};

/// A bash tool's own display (OUT-2): command, stdout, stderr and exit code laid out as text.
fn bash_display() -> ToolDisplay {
    let stdout: String = (1..=40)
        .map(|n| format!("test suite::case_{n:02} ... ok\n"))
        .collect();
    let stderr = "warning: unused variable `x`\n  --> src/lib.rs:3:9\nerror: 1 test failed\n";
    ToolDisplay::text(format!(
        "$ cargo test\n[stdout]\n{stdout}[stderr]\n{stderr}[exit code: 101]\n"
    ))
}

#[tokio::test]
async fn out4_out5_bash_display_cut_at_the_budget() {
    let store = TempStore::new();
    let budget = Budget {
        max_lines: 12,
        max_units: 600,
    };
    let outlet = Outlet::new(store.store.clone()).with_budget(budget);
    let shown = outlet.emit("bash", bash_display()).await.unwrap();
    check_page(&shown, budget);
    insta::assert_snapshot!(shown.text);
    insta::assert_json_snapshot!("out4_out5_bash_display_continuation", shown.continuation);
}

#[test]
fn out6_file_page_with_its_continue_line() {
    let store = TempStore::new();
    let budget = Budget {
        max_lines: 8,
        max_units: 400,
    };
    let outlet = Outlet::new(store.store.clone()).with_budget(budget);
    let file: String = (1..=30)
        .map(|n| format!("TODO {n}: water the plants 🌱\n"))
        .collect();
    // The second page: the FileScheme returned the text from byte 150 on.
    let offset = file
        .match_indices('\n')
        .map(|(i, _)| i + 1)
        .find(|&i| i >= 150)
        .unwrap();
    let source = ReadSource {
        url: "workspace:///home/workspace/notes.txt".into(),
        offset: offset as u64,
        total: file.len() as u64,
        snapshot: false,
    };
    let shown = outlet.emit_read_text(&file[offset..], &source);
    check_page(&shown, budget);
    insta::assert_snapshot!(shown.text);
    assert_eq!(store.count(), 0);
}

#[tokio::test]
async fn out3_display_with_two_images_replaced_by_markers() {
    let store = TempStore::new();
    let outlet = Outlet::new(store.store.clone());
    let shown = outlet
        .emit(
            "screenshot",
            ToolDisplay::text("Captured two windows:")
                .with_media(Media::new("image/png", png(64, 48)))
                .with_text("\nand the settings dialog")
                .with_media(Media::new("image/gif", gif(32, 16)))
                .with_text("Both are attached."),
        )
        .await
        .unwrap();
    assert_eq!(shown.continuation, None);
    insta::assert_snapshot!(shown.text);
    insta::assert_json_snapshot!("out3_two_images_attachments", shown.attachments);
}
