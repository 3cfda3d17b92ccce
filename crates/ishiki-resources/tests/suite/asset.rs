//! The asset store: UUID v7 ids in creation order (RES-6) and retention cleanup (RES-9).

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ishiki_resources::{
    AssetStore as _, DiskAssetStore, ReadResult, ResourceCenter, ResourceErrorKind, uuid_v7_at,
};
use uuid::Uuid;

use super::common::text;

fn png(width: u32, height: u32) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    image::RgbImage::new(width, height)
        .write_to(&mut out, image::ImageFormat::Png)
        .unwrap();
    out.into_inner()
}

fn center_with(store: Arc<DiskAssetStore>) -> ResourceCenter {
    let center = ResourceCenter::new();
    center.register_file_scheme(store);
    center
}

#[tokio::test]
async fn res6_asset_urls_must_name_a_uuid_v7() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DiskAssetStore::open(dir.path()).unwrap());
    let meta = store
        .put_with_id(uuid_v7_at(1_700_000_000_000, 1), b"hi", SystemTime::now())
        .await
        .unwrap();
    let center = center_with(store.clone());
    assert_eq!(text(center.read(&meta.url).await.unwrap()).0, "hi");
    // The id is the URL host; parsing keeps its case, and the id reads either way.
    let upper = format!(
        "asset://{}",
        meta.id.hyphenated().to_string().to_uppercase()
    );
    assert_eq!(text(center.read(&upper).await.unwrap()).0, "hi");
    assert_eq!(store.meta(&meta.id.to_string()).await.unwrap(), meta);
    for bad in [
        format!(
            "asset://{}",
            Uuid::from_u128(0x0190_f9f3_3ff8_4000_8000_0000_0000_0001)
        ),
        format!("asset://{}", Uuid::nil()),
        format!("asset://{}", Uuid::max()),
        "asset://not-a-uuid".to_owned(),
        "asset://".to_owned(),
        format!("{}/extra", meta.url),
        format!("asset:///{}", meta.id),
    ] {
        let err = center.read(&bad).await.unwrap_err();
        assert_eq!(err.kind(), ResourceErrorKind::InvalidUrl, "{bad}: {err}");
        assert_eq!(
            store.meta(&bad).await.unwrap_err().kind(),
            ResourceErrorKind::InvalidUrl
        );
    }
    let v4 = Uuid::from_u128(0x0190_f9f3_3ff8_4000_8000_0000_0000_0001);
    let err = store
        .put_with_id(v4, b"x", SystemTime::now())
        .await
        .unwrap_err();
    assert_eq!(err.kind(), ResourceErrorKind::InvalidParameter);
}

#[tokio::test]
async fn res6_ids_are_v7_and_sort_in_creation_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskAssetStore::open(dir.path()).unwrap();
    let mut metas = Vec::new();
    for i in 0..64u32 {
        metas.push(store.put(&i.to_le_bytes()).await.unwrap());
    }
    for m in &metas {
        assert_eq!(m.id.get_version(), Some(uuid::Version::SortRand));
        assert_eq!(m.url, format!("asset://{}", m.id));
    }
    let ids: Vec<Uuid> = metas.iter().map(|m| m.id).collect();
    let mut sorted = ids.clone();
    sorted.sort();
    assert_eq!(sorted, ids);
    let deterministic: Vec<Uuid> = (0..8).map(|i| uuid_v7_at(1_000 + i / 3, i)).collect();
    let mut sorted = deterministic.clone();
    sorted.sort();
    assert_eq!(sorted, deterministic);
}

#[tokio::test]
async fn res6_assets_are_immutable_snapshots_and_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let id = uuid_v7_at(1_700_000_000_123, 7);
    let created = UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456);
    let image = png(5, 4);
    let meta = {
        let store = DiskAssetStore::open(dir.path()).unwrap();
        let meta = store.put_with_id(id, &image, created).await.unwrap();
        // Same bytes again: the same asset, unchanged; other bytes: refused.
        assert_eq!(
            store
                .put_with_id(id, &image, SystemTime::now())
                .await
                .unwrap(),
            meta
        );
        let err = store.put_with_id(id, b"other", created).await.unwrap_err();
        assert_eq!(err.kind(), ResourceErrorKind::NotAllowed);
        meta
    };
    assert_eq!(meta.media_type, "image/png");
    assert_eq!(meta.dimensions, Some((5, 4)));
    assert_eq!(meta.bytes, image.len() as u64);
    assert_eq!(
        meta.created_at,
        UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
        "stored to the millisecond"
    );
    let store = Arc::new(DiskAssetStore::open(dir.path()).unwrap());
    assert_eq!(store.meta(&meta.url).await.unwrap(), meta);
    assert_eq!(store.get(&meta.url).await.unwrap(), image);
    let center = center_with(store.clone());
    assert_eq!(
        center.read(&meta.url).await.unwrap(),
        ReadResult::File {
            url: meta.url.clone(),
            media_type: "image/png".into(),
            data: image,
            source: None,
        }
    );
    let note = store.put(b"a note").await.unwrap();
    let (_, source) = text(center.read(&note.url).await.unwrap());
    assert!(source.unwrap().snapshot, "an asset never changes");
}

#[tokio::test]
async fn res9_cleanup_deletes_exactly_the_assets_past_retention() {
    let dir = tempfile::tempdir().unwrap();
    let store = DiskAssetStore::open(dir.path()).unwrap();
    let t0 = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    let hour = Duration::from_secs(3600);
    let mut metas = Vec::new();
    for i in 0..10u32 {
        let at = t0 + hour * i;
        let ms = at.duration_since(UNIX_EPOCH).unwrap().as_millis() as u64;
        metas.push(
            store
                .put_with_id(uuid_v7_at(ms, 0), &i.to_le_bytes(), at)
                .await
                .unwrap(),
        );
    }
    // A leftover of an interrupted write: bytes whose metadata was never written.
    std::fs::write(
        dir.path().join(format!("{}.data", uuid_v7_at(1_000, 0))),
        b"orphan",
    )
    .unwrap();
    let now = t0 + hour * 10;
    // Ages are 10 h … 1 h; "more than 5 h" takes ages 10, 9, 8, 7 and 6 h and keeps exactly 5 h.
    let deleted = store.cleanup(now, hour * 5).await.unwrap();
    let expected: Vec<String> = metas[..5].iter().map(|m| m.url.clone()).collect();
    assert_eq!(deleted, expected);
    for m in &metas[..5] {
        assert_eq!(
            store.meta(&m.url).await.unwrap_err().kind(),
            ResourceErrorKind::NotFound
        );
        assert_eq!(
            store.get(&m.url).await.unwrap_err().kind(),
            ResourceErrorKind::NotFound
        );
    }
    for m in &metas[5..] {
        assert_eq!(store.meta(&m.url).await.unwrap(), *m);
    }
    assert!(store.cleanup(now, hour * 5).await.unwrap().is_empty());
    // A clock behind every asset deletes nothing.
    assert!(store.cleanup(t0, Duration::ZERO).await.unwrap().is_empty());
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    files.sort();
    let mut kept: Vec<String> = metas[5..]
        .iter()
        .flat_map(|m| [format!("{}.data", m.id), format!("{}.json", m.id)])
        .collect();
    kept.sort();
    assert_eq!(files, kept, "the orphan is gone, nothing else");
}

#[tokio::test(start_paused = true)]
async fn res9_cleanup_task_runs_on_its_interval() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(DiskAssetStore::open(dir.path()).unwrap());
    let old = store
        .put_with_id(
            uuid_v7_at(1_000, 0),
            b"old",
            UNIX_EPOCH + Duration::from_secs(1),
        )
        .await
        .unwrap();
    let fresh = store.put(b"fresh").await.unwrap();
    let day = Duration::from_secs(86_400);
    let task = ishiki_resources::spawn_asset_cleanup(store.clone(), day, Duration::from_secs(3600));
    // Paused time: these sleeps advance a virtual clock; the first tick fires at once.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        store.meta(&old.url).await.unwrap_err().kind(),
        ResourceErrorKind::NotFound
    );
    assert!(store.meta(&fresh.url).await.is_ok());
    let later = store
        .put_with_id(
            uuid_v7_at(2_000, 0),
            b"later",
            UNIX_EPOCH + Duration::from_secs(2),
        )
        .await
        .unwrap();
    assert!(
        store.meta(&later.url).await.is_ok(),
        "nothing runs between ticks"
    );
    tokio::time::sleep(Duration::from_secs(3600)).await;
    assert_eq!(
        store.meta(&later.url).await.unwrap_err().kind(),
        ResourceErrorKind::NotFound
    );
    assert!(store.meta(&fresh.url).await.is_ok());
    task.abort();
}
