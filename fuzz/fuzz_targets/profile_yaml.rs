//! Profile and `models.yaml` assembly (PRO-1..PRO-8): any text decodes or fails with an error
//! that names what was wrong; never a panic, and a decoded profile assembles without one.
#![no_main]

use ishiki_core::{ModelsDoc, Profile, assemble};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The first line of the input picks which document the rest is.
    let (head, body) = text.split_once('\n').unwrap_or(("", text));
    let profile = Profile::from_yaml(if head.contains('p') { body } else { "" });
    let models = ModelsDoc::from_yaml(if head.contains('p') { "models: { m: { input: [text, image] } }" } else { body });
    for error in [profile.as_ref().err(), models.as_ref().err()].into_iter().flatten() {
        assert!(!error.message().is_empty());
        assert!(!error.message().contains("budget breached"), "{}", error.message());
    }
    if let (Ok(profile), Ok(models)) = (profile, models) {
        let name = models.models.keys().next().cloned().unwrap_or_default();
        let _ = assemble(profile, models, &name);
    }
});
