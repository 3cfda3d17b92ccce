//! Wire shapes (RES-7): the raw read result, the read source and asset metadata, as JSON.

use std::time::{Duration, UNIX_EPOCH};

use ishiki_resources::{AssetMeta, ReadResult, ReadSource, uuid_v7_at};

fn pretty<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap()
}

fn source(snapshot: bool) -> ReadSource {
    ReadSource {
        url: "workspace:///home/workspace/notes.txt?lines=1-40".into(),
        offset: 120,
        total: 4096,
        snapshot,
    }
}

#[test]
fn res7_text_result_shape() {
    let bare = ReadResult::Text {
        text: "hello\n".into(),
        source: None,
    };
    insta::assert_snapshot!("res7_text_without_source", pretty(&bare));
    let with = ReadResult::Text {
        text: "page".into(),
        source: Some(source(false)),
    };
    insta::assert_snapshot!("res7_text_with_source", pretty(&with));
    for value in [bare, with] {
        let back: ReadResult = serde_json::from_str(&pretty(&value)).unwrap();
        assert_eq!(back, value);
    }
}

#[test]
fn res7_file_result_shape() {
    let file = ReadResult::File {
        url: "artifact://codemode/2cf24dba5fb0a30e.png".into(),
        media_type: "image/png".into(),
        data: b"\x89PNG\r\n\x1a\n".to_vec(),
        source: None,
    };
    insta::assert_snapshot!("res7_file_without_source", pretty(&file));
    let with = ReadResult::File {
        url: "artifact://codemode/2cf24dba5fb0a30e.png".into(),
        media_type: "image/png".into(),
        data: vec![0, 1, 2, 253, 254, 255],
        source: Some(source(true)),
    };
    insta::assert_snapshot!("res7_file_with_source", pretty(&with));
    for value in [file, with] {
        let back: ReadResult = serde_json::from_str(&pretty(&value)).unwrap();
        assert_eq!(back, value);
    }
}

#[test]
fn res7_malformed_wire_data_gives_clear_errors() {
    let errors: Vec<String> = [
        r#"{"type":"file","url":"u","mediaType":"image/png","data":"not base64!"}"#,
        r#"{"type":"file","url":"u","data":"AAAA"}"#,
        r#"{"type":"video","url":"u"}"#,
        r#"{"text":"no type"}"#,
    ]
    .iter()
    .map(|json| {
        let err = serde_json::from_str::<ReadResult>(json).unwrap_err();
        format!("{json}\n  -> {err}")
    })
    .collect();
    insta::assert_snapshot!("res7_malformed_wire_data", errors.join("\n"));
}

#[test]
fn res7_asset_metadata_shape() {
    let id = uuid_v7_at(1_700_000_000_123, 1);
    let meta = AssetMeta {
        id,
        url: format!("asset://{id}"),
        media_type: "image/png".into(),
        bytes: 1234,
        dimensions: Some((640, 480)),
        created_at: UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
    };
    insta::assert_snapshot!("res7_asset_meta", pretty(&meta));
    let back: AssetMeta = serde_json::from_str(&pretty(&meta)).unwrap();
    assert_eq!(back, meta);
    let text = AssetMeta {
        dimensions: None,
        media_type: "text/plain".into(),
        ..meta
    };
    assert!(!pretty(&text).contains("dimensions"));
}
