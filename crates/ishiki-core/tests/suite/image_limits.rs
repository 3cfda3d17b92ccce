//! Provider image limits (issue 15): `models.yaml` defaults and overrides, and a provider's
//! refusal of an image turning that image terminal so the next request succeeds.

use std::time::Duration;

use ishiki_core::profile::ImageLimits;
use ishiki_core::{
    Durability, ModelResponse, ModelsDoc, Part, Profile, Runtime, WorkerSpawn, assemble,
    image_rejection,
};

use super::runtime::{clock_at, images, png};

fn models(yaml: &str) -> Result<ModelsDoc, String> {
    ModelsDoc::from_yaml(yaml).map_err(|e| e.to_string())
}

#[test]
fn models_get_their_providers_image_limits_overridable_per_model() {
    let doc = models(
        "models:\n\
         \x20 claude: { input: [text, image], provider: anthropic }\n\
         \x20 gpt: { input: [text, image], provider: openai-responses }\n\
         \x20 local: { input: [text, image], provider: llama }\n\
         \x20 tight: { input: [text, image], provider: anthropic, imageLimits: { dimension: 4000, images: 8, manyImages: 4 } }\n",
    )
    .expect("valid models");
    assert_eq!(
        doc.models["claude"].image_limits(),
        ImageLimits::anthropic()
    );
    assert_eq!(
        doc.models["gpt"].image_limits(),
        ImageLimits {
            provider: "openai-responses".into(),
            ..ImageLimits::openai()
        }
    );
    assert_eq!(
        doc.models["local"].image_limits(),
        ImageLimits {
            provider: "llama".into(),
            ..ImageLimits::default()
        }
    );
    assert_eq!(
        doc.models["tight"].image_limits(),
        ImageLimits {
            dimension: Some(4000),
            images: Some(8),
            many_images: Some(4),
            ..ImageLimits::anthropic()
        }
    );
}

#[test]
fn pro7_bad_image_limits_fail_assembly_naming_the_key() {
    let zero = models("models:\n  m: { input: [text], imageLimits: { dimension: 0 } }\n");
    assert_eq!(
        zero.unwrap_err(),
        "models.m.imageLimits.dimension: must be at least 1, found 0 (line 2, column 49)"
    );
    let unknown = models("models:\n  m: { input: [text], imageLimits: { dimensions: 10 } }\n");
    assert!(
        unknown.unwrap_err().starts_with(
            "models.m.imageLimits.dimensions: unknown key (did you mean `dimension`?)"
        ),
    );
}

async fn runtime(dir: &std::path::Path) -> Runtime {
    let profile = Profile::from_yaml("").expect("a valid profile");
    let doc = models("models:\n  claude: { input: [text, image], provider: anthropic }\n")
        .expect("valid models");
    let assembly = assemble(profile, doc, "claude").expect("assembles");
    Runtime::builder(assembly, dir)
        .clock(clock_at(Duration::ZERO))
        .codemode_worker(WorkerSpawn::InProcess)
        .durability(Durability::Normal)
        .build()
        .await
        .expect("the runtime builds")
}

fn say(text: &str) -> ModelResponse {
    ModelResponse::from_text(text)
}

fn texts(request: &ishiki_core::Request) -> String {
    request
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .filter_map(|p| match p {
            Part::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[tokio::test]
async fn a_provider_400_about_an_image_makes_it_terminal_so_the_next_request_succeeds() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut rt = runtime(dir.path()).await;
    rt.add_user_message("m1", "first", &[png(4, 4, 1)])
        .await
        .expect("m1");
    let first = rt.prepare().await.expect("prepares");
    let seen = images(&first.request);
    rt.commit(first, say("seen")).await.expect("commits");

    rt.add_user_message("m2", "second", &[png(5, 5, 2), png(6, 6, 3)])
        .await
        .expect("m2");
    let attempt = rt.prepare().await.expect("prepares");
    let carried: Vec<String> = images(&attempt.request)
        .into_iter()
        .map(|(_, u)| u)
        .collect();
    assert_eq!(carried.len(), 2, "{carried:?}");
    // A failure that is not about an image costs nothing: the retry carries the same images.
    assert!(rt.abandon_failed(attempt, "provider 500").is_empty());
    let attempt = rt.prepare().await.expect("prepares");
    assert_eq!(images(&attempt.request).len(), 2);

    let error = "https://api.anthropic.com/v1/messages answered 400 Bad Request: \
                 messages.3.content.1.image.source.base64: image exceeds 5 MB maximum";
    let turned = rt.abandon_failed(attempt, error);
    // The images this request carried for the first time; m1's was accepted before.
    assert_eq!(turned, carried);
    assert!(seen.iter().all(|(_, url)| !turned.contains(url)));

    let next = rt.prepare().await.expect("prepares");
    assert!(images(&next.request).is_empty(), "no refused image again");
    let text = texts(&next.request);
    for url in &turned {
        assert!(
            text.contains(&format!(
                "[attachment: {url}] not provided: the provider refused the request that carried \
                 it (messages.3.content.1.image.source.base64: image exceeds 5 MB maximum)"
            )),
            "{text}"
        );
    }
    rt.commit(next, say("understood")).await.expect("commits");
    let after = rt.prepare().await.expect("prepares");
    assert!(
        !texts(&after.request).contains("refused"),
        "the reason is stated once"
    );
}

#[tokio::test]
async fn a_refusal_naming_an_image_url_turns_only_that_image_terminal() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let mut rt = runtime(dir.path()).await;
    rt.add_user_message("m1", "two", &[png(4, 4, 1), png(5, 5, 2)])
        .await
        .expect("m1");
    let attempt = rt.prepare().await.expect("prepares");
    let carried: Vec<String> = images(&attempt.request)
        .into_iter()
        .map(|(_, u)| u)
        .collect();
    let error = format!("400 Bad Request: invalid image {}", carried[1]);
    assert_eq!(rt.abandon_failed(attempt, &error), vec![carried[1].clone()]);
    let next = rt.prepare().await.expect("prepares");
    let now: Vec<String> = images(&next.request).into_iter().map(|(_, u)| u).collect();
    assert_eq!(now, vec![carried[0].clone()]);
    assert_eq!(image_rejection("provider 500"), None);
}
