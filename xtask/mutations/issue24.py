#!/usr/bin/env python3
"""Issue 24's mutations: each brings back the old behaviour of one hardening fix, and names the
tests that must fail with it (and pass without it). They show that the tests catch the defect,
not only that they pass.

    python3 xtask/mutations/issue24.py all        # apply every mutation but 11c; prints the tests
    cargo test --no-fail-fast --workspace --lib --tests --features <CI features> -- <the tests>
    git checkout -- crates                         # take the mutations back

    python3 xtask/mutations/issue24.py 11b        # one mutation (ids below, comma-separated)

11c is applied alone (`issue24.py 11c`) and its test binary run under `ulimit -v 4000000`:
without the check, the handler would make 2^64 lines of text.
"""
import os
import sys

# Each mutation brings back the old behaviour of one issue-24 fix; `tests` are the tests that
# must fail with it (and pass without it).
M = [
 ("1", "crates/ishiki-provider/src/http.rs",
  "fn same_origin_redirects() -> reqwest::redirect::Policy {\n",
  "fn same_origin_redirects() -> reqwest::redirect::Policy {\n    return reqwest::redirect::Policy::default();\n",
  ["a_redirect_to_another_origin_is_never_followed_and_the_key_stays_home"]),
 ("3", "crates/ishiki-core/src/markup.rs",
  "            if IMG_ATTRIBUTES.contains(&key.as_str()) {",
  "            if true || IMG_ATTRIBUTES.contains(&key.as_str()) {",
  ["an_img_keeps_no_attribute_that_fetches_and_fetching_tags_are_escaped"]),
 ("3b", "crates/ishiki-core/src/markup.rs",
  "    } else if FORMATTING_TAGS.contains(&name.as_str()) {\n        remove_attributes(&name, &tag.attributes, reports);",
  "    } else if true {\n        markup.html(&original(message, tag.span, String::new));\n    } else if FORMATTING_TAGS.contains(&name.as_str()) {\n        remove_attributes(&name, &tag.attributes, reports);",
  ["an_img_keeps_no_attribute_that_fetches_and_fetching_tags_are_escaped", "text_never_becomes_markup_when_rebuilt", "element_markup_reaches_the_platform_only_as_allowed_images_and_escaped_text"]),
 ("4", "crates/ishiki-cli/src/chat.rs",
  "            for dir in ishiki_postgres::socket_dirs(&config) {",
  "            for dir in ishiki_postgres::socket_dirs(&config).into_iter().filter(|_| false) {",
  ["chat_refuses_a_postgres_socket_directory_inside_the_workspace"]),
 ("5", "crates/ishiki-resources/src/http.rs",
  "    if next.scheme() == \"http\" && previous.iter().any(|u| u.scheme() == \"https\") {",
  "    if false && next.scheme() == \"http\" && previous.iter().any(|u| u.scheme() == \"https\") {",
  ["a_redirect_never_downgrades_https_to_plain_http"]),
 ("9a", "crates/ishiki-provider/src/common.rs",
  "    if count > crate::MAX_STREAM_ITEMS {",
  "    if count > usize::MAX - 1 {",
  ["a_non_streamed_answer_is_held_to_the_item_limit_of_a_stream"]),
 ("9b", "crates/ishiki-core/src/runtime/commit.rs",
  "        for call in planned.iter_mut().skip(text_protocol::MAX_CALLS) {",
  "        for call in planned.iter_mut().skip(usize::MAX) {",
  ["a_step_runs_at_most_128_calls_and_refuses_the_rest_saying_why"]),
 ("10", "crates/ishiki-provider/src/sse.rs",
  "                let mut append = |key: &'static str, text: &str| {\n                    block.pieces.entry(key).or_default().push_str(text);\n                };",
  "                let mut append = |key: &'static str, text: &str| {\n                    let mut whole = block.block.get(key).and_then(Value::as_str).unwrap_or_default().to_owned();\n                    whole.push_str(text);\n                    block.block.insert(key.to_owned(), Value::String(whole));\n                };",
  ["anthropic_deltas_are_assembled_in_work_linear_in_the_stream"]),
 ("11", "crates/ishiki-resources/src/workspace.rs",
  "        let max = self.max_read_bytes.min(limit.max_bytes());",
  "        let max = self.max_read_bytes.max(limit.max_bytes() * 0);",
  ["workspace_and_local_reads_stop_at_the_centers_read_limit"]),
 ("11b", "crates/ishiki-resources/src/local.rs",
  "        let max = self.max_read_bytes.min(limit.max_bytes());",
  "        let max = self.max_read_bytes.max(limit.max_bytes() * 0);",
  ["workspace_and_local_reads_stop_at_the_centers_read_limit"]),
 ("13", "crates/ishiki-core/src/runtime/execute.rs",
  "fn error_through_outlet(outlet: &Outlet, tool: &str, text: String) -> (String, Option<String>) {\n",
  "fn error_through_outlet(outlet: &Outlet, tool: &str, text: String) -> (String, Option<String>) {\n    if tool != \"\" { return (text, None); }\n",
  ["a_long_tool_error_is_paged_through_the_outlet_like_a_result"]),
 ("16", "crates/ishiki-core/src/runtime/mod.rs",
  "        self.state_identity.check()?;",
  "        let _ = self.state_identity.check();",
  ["sec4_a_state_dir_moved_mid_run_stops_the_next_commit_with_an_error_naming_it"]),
 ("19", "crates/ishiki-cli/src/chat.rs",
  "    let mut out = EscapingWriter::new(out);\n    let mut err = EscapingWriter::new(err);",
  "    let mut out = out;\n    let mut err = err;",
  ["chat_never_prints_terminal_escape_sequences_from_the_provider"]),
 ("20", "crates/ishiki-core/src/tool.rs",
  "    if total <= MAX_MEDIA_PER_RESULT {\n        return display;",
  "    if total <= usize::MAX {\n        return display;",
  ["a_direct_result_shows_at_most_32_media_items_and_says_how_many_were_left_out"]),
 ("21", "crates/ishiki-provider/src/sse.rs",
  "        crate::common::parse_json(&event.data)\n",
  "        serde_json::from_str::<Value>(&event.data)\n",
  ["a_lone_surrogate_in_a_streamed_delta_becomes_a_replacement_character"]),
 ("22a", "crates/ishiki-model/src/message.rs",
  "        if FRAMES.iter().any(|f| bare.starts_with(f)) {",
  "        if false && FRAMES.iter().any(|f| bare.starts_with(f)) {",
  ["a_result_cannot_close_its_frame_or_open_another"]),
 ("22b", "crates/ishiki-core/src/text_protocol.rs",
  "    fn holding(&mut self, from: usize, open: usize) -> Option<usize> {\n",
  "    fn holding(&mut self, from: usize, open: usize) -> Option<usize> {\n        if from < usize::MAX { return None; }\n",
  ["calls_inside_think_or_code_are_text_and_are_not_run"]),
 ("23", "crates/ishiki-core/src/builtin/send_message.rs",
  "                ishiki_resources::check_image(&data, max)?;",
  "                let _ = max;",
  ["images_that_do_not_decode_are_dropped_with_a_reason"]),
 ("25", "crates/ishiki-postgres/src/lease.rs",
  "        let gone = live && holder_is_gone(&holder, &host_name());",
  "        let gone = live && false && holder_is_gone(&holder, &host_name());",
  ["a_lease_whose_holder_process_is_gone_is_taken_over_at_once"]),
 ("27a", "crates/ishiki-core/src/convert.rs",
  "        if !e.console().is_empty() {",
  "        if false && !e.console().is_empty() {",
  ["cm9_a_failed_program_keeps_its_console_output"]),
 ("27b", "crates/ishiki-mcp/src/server.rs",
  "        ServerResult::CustomResult(CustomResult(raw))\n            if [",
  "        ServerResult::CustomResult(CustomResult(raw))\n            if false && [",
  ["an_unknown_content_block_type_is_a_text_note_and_the_server_keeps_running"]),
 ("27d", "crates/ishiki-resources/src/artifact.rs",
  "        remove_stale_temps(&root, SystemTime::now());",
  "        let _ = remove_stale_temps;",
  ["a_store_removes_temporary_files_a_killed_writer_left_when_it_opens"]),
]
M11C = ("11c", "crates/ishiki-cli/src/fixture_tools.rs",
  "        limit.check(url, lines.saturating_mul(64))?;",
  "        let _ = limit;",
  ["a_read_of_huge_generated_text_ends_with_the_read_limit_not_an_allocation"])


def main():
    root = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", ".."))
    chosen = sys.argv[1] if len(sys.argv) > 1 else "all"
    mutations = M + [M11C] if chosen != "all" else M
    want = None if chosen == "all" else set(chosen.split(","))
    tests = []
    for mid, path, old, new, names in mutations:
        if want is not None and mid not in want:
            continue
        full = os.path.join(root, path)
        with open(full) as f:
            text = f.read()
        if text.count(old) != 1:
            sys.exit(f"{mid}: {path}: the code to mutate is found {text.count(old)} times, not once")
        with open(full, "w") as f:
            f.write(text.replace(old, new))
        tests += names
    print(" ".join(sorted(set(tests))))


if __name__ == "__main__":
    main()
