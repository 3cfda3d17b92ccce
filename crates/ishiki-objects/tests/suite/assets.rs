//! Assets on object storage: write-once with metadata, clear errors, and retention cleanup
//! that lists the bucket and deletes exactly the assets past retention (RES-6, RES-9).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ishiki_resources::{AssetStore, ResourceErrorKind, uuid_v7_at};

use super::backends;

const T0_MS: u64 = 1_767_225_600_000;

fn at(hours: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(T0_MS) + Duration::from_secs(hours * 3600)
}

#[tokio::test]
async fn res6_assets_are_written_once_with_their_metadata() {
    let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x02\0\0\0\x03\x08\x02\0\0\0";
    for backend in backends() {
        let store = backend.objects.assets();
        let id = uuid_v7_at(T0_MS, 1);
        let meta = store.put_with_id(id, png, at(0)).await.expect("put");
        assert_eq!(meta.url, format!("asset://{id}"));
        assert_eq!(meta.media_type, "image/png", "{}", backend.name);
        assert_eq!(meta.dimensions, ishiki_resources::sniff(png).dimensions);
        assert_eq!(meta.bytes, png.len() as u64);
        assert_eq!(store.meta(&meta.url).await.expect("meta"), meta);
        assert_eq!(store.meta(&id.to_string()).await.expect("meta by id"), meta);
        assert_eq!(store.get(&meta.url).await.expect("get"), png);
        // The same bytes again: the first metadata stands, even with a later time.
        assert_eq!(
            store.put_with_id(id, png, at(5)).await.expect("again"),
            meta
        );
        let changed = store
            .put_with_id(id, b"other", at(0))
            .await
            .expect_err("changed");
        assert_eq!(changed.kind(), ResourceErrorKind::NotAllowed);
        assert_eq!(
            changed.message(),
            format!(
                "asset `{}` already exists with other bytes; assets never change",
                meta.url
            )
        );
        assert_eq!(store.get(&meta.url).await.expect("unchanged"), png);
        let v4 = uuid::Uuid::from_u128(0x0190_f9f3_3ff8_4000_8000_0000_0000_0001);
        let err = store.put_with_id(v4, b"x", at(0)).await.expect_err("v4");
        assert_eq!(err.kind(), ResourceErrorKind::InvalidParameter);
        assert_eq!(
            backend.keys("assets").await,
            vec![format!("assets/{id}.data"), format!("assets/{id}.json")],
            "{}",
            backend.name
        );
    }
}

#[tokio::test]
async fn res6_missing_and_malformed_assets_are_clear_errors() {
    for backend in backends() {
        let store = backend.objects.assets();
        let id = uuid_v7_at(T0_MS, 7);
        let missing = store
            .get(&format!("asset://{id}"))
            .await
            .expect_err("missing");
        assert_eq!(
            missing.kind(),
            ResourceErrorKind::NotFound,
            "{}",
            backend.name
        );
        assert_eq!(
            missing.message(),
            format!(
                "no asset at `asset://{id}` (it may have been deleted after its retention period)"
            )
        );
        // Bytes without metadata are an interrupted write: the asset is not there.
        backend.put_raw(&format!("assets/{id}.data"), b"half").await;
        assert_eq!(
            store.get(&id.to_string()).await.expect_err("half").kind(),
            ResourceErrorKind::NotFound
        );
        for bad in [
            "asset://not-a-uuid",
            "artifact://x/y",
            "asset://0190f9f3-3ff8-4000-8000-000000000001",
        ] {
            assert_eq!(
                store.get(bad).await.expect_err(bad).kind(),
                ResourceErrorKind::InvalidUrl,
                "{bad}"
            );
        }
    }
}

#[tokio::test]
async fn res9_cleanup_deletes_exactly_the_assets_past_retention() {
    for backend in backends() {
        let store = backend.objects.assets();
        // One asset an hour for ten hours; the ids' own times are all t0, so only the
        // metadata's creation time can decide.
        let mut urls = Vec::new();
        for h in 0..10u64 {
            let id = uuid_v7_at(T0_MS, h);
            let meta = store
                .put_with_id(id, format!("asset {h}").as_bytes(), at(h))
                .await
                .expect("put");
            urls.push(meta.url);
        }
        // An interrupted write older than the retention, and a fresh one.
        let old_orphan = uuid_v7_at(T0_MS - 24 * 3600 * 1000, 0);
        let new_orphan = uuid_v7_at(T0_MS + 10 * 3600 * 1000, 0);
        backend
            .put_raw(&format!("assets/{old_orphan}.data"), b"old")
            .await;
        backend
            .put_raw(&format!("assets/{new_orphan}.data"), b"new")
            .await;

        // At t0+10h with 5h retention: ages 10h..6h go, 5h (not past) .. 1h stay.
        let deleted = store
            .cleanup(at(10), Duration::from_secs(5 * 3600))
            .await
            .expect("cleanup");
        assert_eq!(deleted, urls[..5].to_vec(), "{}", backend.name);
        for url in &urls[..5] {
            assert_eq!(
                store.get(url).await.expect_err(url).kind(),
                ResourceErrorKind::NotFound
            );
        }
        for url in &urls[5..] {
            assert!(store.get(url).await.is_ok(), "{}: {url} kept", backend.name);
        }
        let mut expected: Vec<String> = (5..10u64)
            .flat_map(|h| {
                let id = uuid_v7_at(T0_MS, h);
                [format!("assets/{id}.data"), format!("assets/{id}.json")]
            })
            .collect();
        expected.push(format!("assets/{new_orphan}.data"));
        expected.sort();
        assert_eq!(backend.keys("assets").await, expected, "{}", backend.name);
        // Nothing more is past retention.
        assert!(
            store
                .cleanup(at(10), Duration::from_secs(5 * 3600))
                .await
                .expect("again")
                .is_empty()
        );
    }
}
