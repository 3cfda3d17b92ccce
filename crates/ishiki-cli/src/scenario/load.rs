//! Loading a scenario: YAML into the raw shape with located errors, generated fixture files,
//! tool entries with their definition files.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ishiki_core::located::Located;
use serde_json::Value;
use serde_saphyr::Spanned;

use super::check::check_steps;
use super::diagnostic::{ScenarioError, ScenarioErrorKind, Source};
use super::{FixtureFile, RawScenario, RawTool, Scenario, Step, ToolDefinition, ToolSpec, VERSION};
use crate::fixtures;
use crate::fixtures::FileSpec;
use crate::interpolate::Interpolator;

/// Reads and checks the scenario at `path`; relative paths inside it resolve against its
/// directory.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        kind: ScenarioErrorKind::Io,
        path: None,
        location: None,
        summary: format!("cannot read {name}: {e}"),
        rendered: format!("cannot read {name}: {e}"),
    })?;
    let base_dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    parse_named(&text, &base_dir, &name)
}

/// Parses and checks scenario text; `base_dir` is where `definitions` paths resolve.
pub fn parse(text: &str, base_dir: &Path) -> Result<Scenario, ScenarioError> {
    parse_named(text, base_dir, "<scenario>")
}

pub(super) fn parse_named(
    text: &str,
    base_dir: &Path,
    name: &str,
) -> Result<Scenario, ScenarioError> {
    let src = Source { text, name };
    let raw = deserialize(&src)?;
    if raw.version.value != VERSION {
        return Err(src.error(
            ScenarioErrorKind::Invalid,
            "version",
            Some(raw.version.referenced),
            &format!(
                "unsupported scenario version {} (this runner reads version {VERSION})",
                raw.version.value
            ),
        ));
    }
    let tools = resolve_tools(&src, raw.tools, base_dir)?;
    let ids = check_steps(&src, &raw.steps)?;
    let workspace = generate_files(&src, "workspace", raw.workspace)?;
    let local = generate_files(&src, "local", raw.local)?;
    let mut steps = Vec::with_capacity(raw.steps.len());
    for (i, spanned) in raw.steps.into_iter().enumerate() {
        let mut step = spanned.value;
        if let Step::User(user) = &mut step {
            for (j, image) in user.images.iter().enumerate() {
                let bytes = fixtures::image_bytes(image).map_err(|e| {
                    src.error(
                        ScenarioErrorKind::Fixture,
                        &format!("steps[{i}].user.images[{j}].{}", e.field()),
                        Some(spanned.referenced),
                        e.message(),
                    )
                })?;
                user.image_bytes.push(bytes);
            }
        }
        steps.push(step);
    }
    Ok(Scenario {
        name: raw.name,
        profile: raw.profile,
        models: raw.models,
        main_model: raw.main_model,
        workspace,
        local,
        tools,
        vision: raw.vision,
        compaction: raw.compaction,
        steps,
        base_dir: base_dir.to_path_buf(),
        interpolator: Interpolator::new(ids.into_keys()),
    })
}

/// Deserializes with the path of the failing field tracked alongside serde-saphyr's location.
pub(super) fn deserialize(src: &Source<'_>) -> Result<RawScenario, ScenarioError> {
    let mut failed_at = None;
    let mut options = serde_saphyr::Options::default();
    // YAML 1.2 booleans only: `y`, `no`, `on` in a tool input or message stay strings.
    options.strict_booleans = true;
    let result = serde_saphyr::with_deserializer_from_str_with_options(src.text, options, |de| {
        serde_path_to_error::deserialize::<_, RawScenario>(de).map_err(|e| {
            failed_at = Some(render_path(e.path()));
            e.into_inner()
        })
    });
    result.map_err(|e| {
        src.located(
            ScenarioErrorKind::Yaml,
            Located::from_yaml_error(failed_at.unwrap_or_default(), &e),
        )
    })
}

/// A serde path as the scenario reads: `steps[0].user.images[1].height`,
/// `workspace["/home/workspace/a.txt"].image`. The `value` segments `Spanned` wrappers add
/// (the top-level `version`, items of `steps`/`tools`, files of `workspace`/`local`) are
/// dropped: no scenario field is called `value` there.
pub(super) fn render_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = path.iter().collect();
    let mut out = String::new();
    for (i, seg) in segments.iter().enumerate() {
        let spanned_wrapper = match (segments.first(), i) {
            (Some(Segment::Map { key: first }), 1) => first == "version",
            (Some(Segment::Map { key: first }), 2) => {
                matches!(first.as_str(), "steps" | "tools" | "workspace" | "local")
            }
            _ => false,
        };
        match seg {
            Segment::Map { key } if spanned_wrapper && key == "value" => {}
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } => push_key(&mut out, key),
            Segment::Enum { variant } => push_key(&mut out, variant),
            Segment::Unknown => {}
        }
    }
    out
}

pub(super) fn push_key(out: &mut String, key: &str) {
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '$');
    if plain {
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(key);
    } else {
        out.push_str(&format!("[{}]", Value::String(key.to_owned())));
    }
}

pub(super) fn file_path(section: &str, key: &str) -> String {
    let mut out = section.to_owned();
    push_key(&mut out, key);
    out
}

pub(super) fn generate_files(
    src: &Source<'_>,
    section: &str,
    files: BTreeMap<String, Spanned<FileSpec>>,
) -> Result<Vec<FixtureFile>, ScenarioError> {
    files
        .into_iter()
        .map(|(path, spec)| {
            let bytes = fixtures::file_bytes(&spec.value).map_err(|e| {
                src.error(
                    ScenarioErrorKind::Fixture,
                    &format!("{}.{}", file_path(section, &path), e.field()),
                    Some(spec.referenced),
                    e.message(),
                )
            })?;
            Ok(FixtureFile {
                path,
                spec: spec.value,
                bytes,
            })
        })
        .collect()
}

pub(super) fn resolve_tools(
    src: &Source<'_>,
    raw: Vec<Spanned<RawTool>>,
    base_dir: &Path,
) -> Result<Vec<ToolSpec>, ScenarioError> {
    let mut tools = Vec::new();
    for (i, entry) in raw.into_iter().enumerate() {
        let at = Some(entry.referenced);
        let RawTool {
            name,
            define,
            definitions,
            resident,
        } = entry.value;
        let given: Vec<&str> = [
            name.is_some().then_some("`name`"),
            define.is_some().then_some("`define`"),
            definitions.is_some().then_some("`definitions`"),
        ]
        .into_iter()
        .flatten()
        .collect();
        let path = format!("tools[{i}]");
        if given.len() != 1 {
            let message = if given.is_empty() {
                "a tool entry needs one of `name` (a fixture tool), `define` or `definitions`"
                    .to_owned()
            } else {
                format!("{} cannot be combined in one entry", given.join(" and "))
            };
            return Err(src.error(ScenarioErrorKind::Invalid, &path, at, &message));
        }
        if let Some(tool) = name {
            tools.push(ToolSpec::Fixture { tool, resident });
        } else if let Some(definition) = define {
            tools.push(ToolSpec::Declared {
                definition,
                resident,
            });
        } else if let Some(file) = definitions {
            let loaded = load_definitions(&base_dir.join(&file), &file).map_err(|message| {
                src.error(
                    ScenarioErrorKind::Definitions,
                    &format!("{path}.definitions"),
                    at,
                    &message,
                )
            })?;
            tools.extend(loaded.into_iter().map(|definition| ToolSpec::Declared {
                definition,
                resident,
            }));
        }
    }
    Ok(tools)
}

pub(super) fn load_definitions(path: &Path, written: &str) -> Result<Vec<ToolDefinition>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {written} ({}): {e}", path.display()))?;
    let mut de = serde_json::Deserializer::from_str(&text);
    serde_path_to_error::deserialize::<_, Vec<ToolDefinition>>(&mut de).map_err(|e| {
        let inner = render_path(e.path());
        let at = if inner.is_empty() {
            String::new()
        } else {
            format!("{inner}: ")
        };
        format!(
            "{written} is not a JSON list of tool definitions: {at}{}",
            e.into_inner()
        )
    })
}
