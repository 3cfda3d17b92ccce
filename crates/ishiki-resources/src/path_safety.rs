//! Path safety for the directory-rooted schemes `workspace://` and `local://` (RES-4, SEC-2).
//!
//! Three gates, each of which alone keeps a path inside its root:
//! 1. [`check_url_text`] looks at the URL *as typed*: URL parsing silently removes dot segments
//!    (also `%2e%2e`) and deletes tabs and newlines, so a refusal must happen before parsing.
//! 2. [`check_segment`] looks at each percent-decoded path segment: no dot segments, no hidden
//!    `/` or `\`, no control characters, no second layer of percent-encoding, no Unicode
//!    look-alikes of `.`, `/`, `\` or `%` that some later normalisation could turn into real ones.
//! 3. [`Root`] opens the root directory once and resolves every path *beneath* that handle
//!    (cap-std: `openat2(RESOLVE_BENEATH)` where the kernel has it, a per-component walk
//!    otherwise). Reads check the file they opened; writes create and open the parent beneath
//!    the root and make the temporary file and the rename inside it. No path is ever checked
//!    and then opened again by name, so another process swapping a checked file or directory
//!    for a symlink cannot lead a read or a write outside. Relative symlinks that stay inside
//!    are followed; ones that leave, loop or are absolute are refused.
//!
//! When cap-std refuses a path, the segments are walked once more on host paths only to name
//! the symlink responsible in the message; nothing is opened from that walk.

use std::fs;
use std::io::{self, Read as _};
use std::path::{Path, PathBuf};

use percent_encoding::percent_decode_str;
use url::Url;

pub(crate) use crate::url_text::show;
use crate::{ResourceError, ResourceErrorKind};

/// Characters refused in a segment because they look like, or normalise (NFKC) to, `.`, `/`,
/// `\` or `%`.
const LOOK_ALIKES: &[(char, &str)] = &[
    ('\u{2024}', "one dot leader"),
    ('\u{2025}', "two dot leader"),
    ('\u{2026}', "horizontal ellipsis"),
    ('\u{FE52}', "small full stop"),
    ('\u{FF0E}', "fullwidth full stop"),
    ('\u{2044}', "fraction slash"),
    ('\u{2215}', "division slash"),
    ('\u{29F8}', "big solidus"),
    ('\u{FF0F}', "fullwidth solidus"),
    ('\u{2216}', "set minus"),
    ('\u{29F9}', "big reverse solidus"),
    ('\u{FE68}', "small reverse solidus"),
    ('\u{FF3C}', "fullwidth reverse solidus"),
    ('\u{FE6A}', "small percent sign"),
    ('\u{FF05}', "fullwidth percent sign"),
];

fn escape(url: &str, why: impl std::fmt::Display) -> ResourceError {
    ResourceError::new(
        ResourceErrorKind::Escape,
        format!("`{}` is refused: {why}", show(url)),
    )
}

/// Refuses URL text that parsing would silently change: control characters (the parser drops
/// tabs and newlines, so `.\t.` becomes `..`) and dot segments in any percent-encoding.
pub(crate) fn check_url_text(text: &str) -> Result<(), ResourceError> {
    if text.chars().any(char::is_control) {
        return Err(escape(
            text,
            "it contains a control character, which URL parsing would drop or misread",
        ));
    }
    let Some((_, rest)) = text.split_once(':') else {
        return Ok(());
    };
    let end = rest.find(['?', '#']).unwrap_or(rest.len());
    for piece in rest[..end].split(['/', '\\']) {
        let decoded = percent_decode_str(piece).decode_utf8_lossy();
        if decoded == "." || decoded == ".." {
            return Err(dot_segment(text, piece));
        }
    }
    Ok(())
}

fn dot_segment(url: &str, raw: &str) -> ResourceError {
    escape(
        url,
        format!(
            "dot segment `{}` (`.` and `..` are not allowed in resource paths)",
            show(raw)
        ),
    )
}

/// Checks one path segment, already percent-decoded (`raw` is how it was written).
pub(crate) fn check_segment(url: &str, raw: &str, segment: &str) -> Result<(), ResourceError> {
    let raw = show(raw);
    if segment.is_empty() {
        return Err(escape(url, "empty path segment (`//`)"));
    }
    if segment == "." || segment == ".." {
        return Err(dot_segment(url, &raw));
    }
    if segment.contains('/') {
        return Err(escape(
            url,
            format!("segment `{raw}` hides a `/` (encoded slash)"),
        ));
    }
    if segment.contains('\\') {
        return Err(escape(url, format!("segment `{raw}` contains a backslash")));
    }
    if segment.chars().any(char::is_control) {
        return Err(escape(
            url,
            format!("segment `{raw}` contains a NUL or control character"),
        ));
    }
    if has_percent_escape(segment) {
        return Err(escape(
            url,
            format!("segment `{raw}` is percent-encoded twice"),
        ));
    }
    if let Some((c, name)) = segment
        .chars()
        .find_map(|c| LOOK_ALIKES.iter().find(|(l, _)| *l == c))
    {
        return Err(escape(
            url,
            format!(
                "segment `{raw}` contains U+{:04X} ({name}), a look-alike of `.`, `/`, `\\` or `%`",
                u32::from(*c)
            ),
        ));
    }
    let bytes = segment.as_bytes();
    if bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' {
        return Err(escape(
            url,
            format!("segment `{raw}` looks like a drive letter"),
        ));
    }
    Ok(())
}

/// `%XX`, or the non-standard `%uXXXX` some servers decode.
fn has_percent_escape(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter()
        .enumerate()
        .filter(|(_, c)| **c == b'%')
        .any(|(i, _)| {
            let rest = &b[i + 1..];
            let hex = |r: &[u8], n: usize| r.len() >= n && r[..n].iter().all(u8::is_ascii_hexdigit);
            hex(rest, 2)
                || (rest.first().is_some_and(|c| c.eq_ignore_ascii_case(&b'u'))
                    && hex(&rest[1..], 4))
        })
}

/// The checked, percent-decoded segments of a parsed URL's path.
///
/// `shown` is the URL as the caller wrote it, for messages. An empty path or `/` gives no
/// segments (the root directory).
pub(crate) fn url_segments(url: &Url, shown: &str) -> Result<Vec<String>, ResourceError> {
    let path = url.path();
    let Some(rest) = path.strip_prefix('/') else {
        return Ok(Vec::new());
    };
    if rest.is_empty() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    let pieces: Vec<&str> = rest.split('/').collect();
    for (i, raw) in pieces.iter().enumerate() {
        if raw.is_empty() && i + 1 == pieces.len() {
            return Err(directory(shown));
        }
        // Overlong encodings such as `%c0%ae` (a dot to a lax decoder) are invalid UTF-8.
        let decoded = percent_decode_str(raw).decode_utf8().map_err(|_| {
            escape(
                shown,
                format!(
                    "segment `{}` is not UTF-8 after percent-decoding",
                    show(raw)
                ),
            )
        })?;
        check_segment(shown, raw, &decoded)?;
        out.push(decoded.into_owned());
    }
    Ok(out)
}

/// The checked segments of an absolute sandbox path such as `/home/workspace/tasks.txt`.
pub(crate) fn path_segments(path: &str) -> Result<Vec<String>, ResourceError> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(ResourceError::new(
            ResourceErrorKind::InvalidUrl,
            format!(
                "`{}` is not an absolute sandbox path (like /home/workspace/notes.txt) or a workspace:// URL",
                show(path)
            ),
        ));
    };
    if rest.is_empty() || rest.ends_with('/') {
        return Err(directory(path));
    }
    let mut out = Vec::new();
    for segment in rest.split('/') {
        check_segment(path, segment, segment)?;
        out.push(segment.to_owned());
    }
    Ok(out)
}

pub(crate) fn directory(url: &str) -> ResourceError {
    ResourceError::new(
        ResourceErrorKind::NotAllowed,
        format!("`{}` is a directory, not a file", show(url)),
    )
}

pub(crate) fn not_found(url: &str) -> ResourceError {
    ResourceError::new(
        ResourceErrorKind::NotFound,
        format!("no file at `{}`", show(url)),
    )
}

fn io_failure(verb: &str, url: &str, e: &io::Error) -> ResourceError {
    ResourceError::new(
        ResourceErrorKind::Io,
        format!("cannot {verb} `{}`: {e}", show(url)),
    )
}

/// The URL-relative name of the first `n` segments, for messages: never a host path.
fn relative(segments: &[String]) -> String {
    let mut out = String::new();
    for s in segments {
        out.push('/');
        out.push_str(s);
    }
    out
}

fn is_loop(e: &io::Error) -> bool {
    #[cfg(unix)]
    {
        e.raw_os_error() == Some(libc::ELOOP)
    }
    #[cfg(not(unix))]
    {
        let _ = e;
        false
    }
}

/// Where a symlink leads, if its canonical target stays inside `root`.
fn follow_symlink(
    root: &Path,
    link: &Path,
    url: &str,
    walked: &[String],
) -> Result<PathBuf, ResourceError> {
    match fs::canonicalize(link) {
        Ok(target) if target.starts_with(root) => Ok(target),
        Ok(_) => Err(escape(
            url,
            format!("the symlink `{}` points outside the root", relative(walked)),
        )),
        Err(e) if is_loop(&e) => Err(escape(
            url,
            format!("the symlink `{}` loops", relative(walked)),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(ResourceError::new(
            ResourceErrorKind::NotFound,
            format!(
                "`{}`: the symlink `{}` points to nothing",
                show(url),
                relative(walked)
            ),
        )),
        Err(e) => Err(io_failure("resolve", url, &e)),
    }
}

/// Whether cap-std refused a path because it would leave the directory it was opened beneath.
fn is_escape(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied && e.raw_os_error().is_none()
}

/// A root directory, opened once. Every path below it is opened *beneath* this handle (cap-std:
/// `openat2(RESOLVE_BENEATH)` where the kernel has it, a per-component walk otherwise), so a
/// symlink swapped in after any check can never lead an open, a create or a rename outside.
/// Relative symlinks that stay inside are followed; absolute ones are not.
#[derive(Debug)]
pub(crate) struct Root {
    dir: cap_std::fs::Dir,
    /// The canonical host path, for `resolve` and for naming a refused symlink in messages.
    path: PathBuf,
}

impl Root {
    /// Opens the existing directory `path` (canonicalised first).
    pub(crate) fn open(path: &Path) -> io::Result<Self> {
        let path = fs::canonicalize(path)?;
        let dir = cap_std::fs::Dir::open_ambient_dir(&path, cap_std::ambient_authority())?;
        Ok(Self { dir, path })
    }

    /// The canonical host directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The canonical host path of an existing file or directory, checked beneath the root at
    /// the time of the call (opening it later by name is not race-free; reading and writing
    /// through [`Root::read_file`] and [`Root::write_file`] is).
    pub(crate) fn resolve(&self, segments: &[String], url: &str) -> Result<PathBuf, ResourceError> {
        let relative = self
            .dir
            .canonicalize(relative_path(segments))
            .map_err(|e| self.failure(&e, "resolve", segments, url))?;
        Ok(self.path.join(relative))
    }

    /// Reads a regular file beneath the root, refusing directories, devices and FIFOs and
    /// anything larger than `max_bytes`. The checks are made on the opened file itself.
    pub(crate) fn read_file(
        &self,
        segments: &[String],
        url: &str,
        max_bytes: u64,
    ) -> Result<Vec<u8>, ResourceError> {
        let relative = relative_path(segments);
        // A cheap early refusal of directories and special files (opening some devices has
        // effects); the check that counts is on the open file below.
        let meta = self
            .dir
            .metadata(&relative)
            .map_err(|e| self.failure(&e, "read", segments, url))?;
        check_readable(meta.is_dir(), meta.is_file(), meta.len(), url, max_bytes)?;
        let mut options = cap_std::fs::OpenOptions::new();
        options.read(true);
        #[cfg(unix)]
        {
            use cap_std::fs::OpenOptionsExt as _;
            // A FIFO swapped in after the check must not block the open.
            options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
        }
        let file = self
            .dir
            .open_with(&relative, &options)
            .map_err(|e| self.failure(&e, "read", segments, url))?;
        let meta = file.metadata().map_err(|e| io_failure("read", url, &e))?;
        check_readable(meta.is_dir(), meta.is_file(), meta.len(), url, max_bytes)?;
        let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
        file.take(max_bytes.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| io_failure("read", url, &e))?;
        if bytes.len() as u64 > max_bytes {
            return Err(too_large(url, bytes.len() as u64, max_bytes));
        }
        Ok(bytes)
    }

    /// Writes `bytes` to the file the segments name, creating missing parent directories,
    /// through a temporary file in the same directory and a rename: a reader sees the old or
    /// the new content, never a mix. Parents are created and opened beneath the root, and the
    /// temporary file and the rename happen inside the opened parent, so a directory swapped
    /// for a symlink meanwhile cannot redirect the bytes. A final-component symlink is
    /// followed only to an existing file inside the root.
    pub(crate) fn write_file(
        &self,
        segments: &[String],
        url: &str,
        bytes: &[u8],
    ) -> Result<(), ResourceError> {
        let Some((last, parents)) = segments.split_last() else {
            return Err(directory(url));
        };
        let parent = if parents.is_empty() {
            self.dir.try_clone()
        } else {
            let parent_path = relative_path(parents);
            self.dir
                .create_dir_all(&parent_path)
                .and_then(|()| self.dir.open_dir(&parent_path))
        }
        .map_err(|e| self.write_failure(&e, parents, url))?;
        let (dir, name) = match parent.symlink_metadata(last) {
            Ok(meta) if meta.file_type().is_symlink() => self.symlink_target(segments, url)?,
            Ok(meta) if meta.is_dir() => return Err(directory(url)),
            _ => (parent, PathBuf::from(last)),
        };
        let replaced = replaced_mode(&dir, &name, url)?;
        let mut options = cap_std::fs::OpenOptions::new();
        options.write(true).create_new(true);
        let (temp, mut file) = crate::create_temp(|name| dir.open_with(name, &options))
            .map_err(|e| io_failure("write", url, &e))?;
        let result = (|| -> io::Result<()> {
            use std::io::Write as _;
            // The new content keeps the replaced file's mode (a 0600 secret stays 0600, a
            // script keeps its execute bit), set before any byte is in it.
            if let Some(mode) = replaced {
                file.set_permissions(mode)?;
            }
            file.write_all(bytes)?;
            file.sync_all()?;
            // Replaces the directory entry; never writes through a symlink put there since.
            dir.rename(&temp, &dir, &name)
        })();
        if let Err(e) = result {
            let _ = dir.remove_file(&temp);
            return Err(if e.raw_os_error() == Some(EISDIR) {
                directory(url)
            } else {
                io_failure("write", url, &e)
            });
        }
        Ok(())
    }

    /// The directory and name an existing final-component symlink leads to, beneath the root.
    fn symlink_target(
        &self,
        segments: &[String],
        url: &str,
    ) -> Result<(cap_std::fs::Dir, PathBuf), ResourceError> {
        let dangling = || {
            escape(
                url,
                format!(
                    "the symlink `{}` points to nothing, and writing through it could create a file outside the root",
                    relative(segments)
                ),
            )
        };
        let target = match self.dir.canonicalize(relative_path(segments)) {
            Ok(target) => target,
            Err(e) => {
                let error = self.failure(&e, "write", segments, url);
                return Err(if error.kind() == ResourceErrorKind::NotFound {
                    dangling()
                } else {
                    error
                });
            }
        };
        let parent = target.parent().map(Path::to_path_buf).unwrap_or_default();
        let Some(name) = target.file_name() else {
            return Err(directory(url)); // the link leads to the root itself
        };
        let dir = self
            .dir
            .open_dir(relative_or_dot(&parent))
            .map_err(|e| self.failure(&e, "write", segments, url))?;
        match dir.metadata(name) {
            Ok(meta) if meta.is_dir() => Err(directory(url)),
            Ok(_) => Ok((dir, PathBuf::from(name))),
            Err(_) => Err(dangling()),
        }
    }

    /// The error for a failed open or lookup beneath the root: a refused or broken symlink is
    /// named (found by walking the segments again, for the message only), a missing file is
    /// not found, anything else is an I/O failure.
    fn failure(&self, e: &io::Error, verb: &str, segments: &[String], url: &str) -> ResourceError {
        if let Some(diagnosis) = self.diagnose(segments, url) {
            return diagnosis;
        }
        if is_escape(e) || is_loop(e) {
            return escape(url, "the path leaves the root");
        }
        match e.kind() {
            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory => not_found(url),
            io::ErrorKind::IsADirectory => directory(url),
            _ => io_failure(verb, url, e),
        }
    }

    /// Like [`Root::failure`] for creating the parents of a write: names a parent that is a file.
    fn write_failure(&self, e: &io::Error, parents: &[String], url: &str) -> ResourceError {
        if let Some(diagnosis) = self.diagnose(parents, url) {
            return diagnosis;
        }
        for n in 1..=parents.len() {
            if let Ok(meta) = self.dir.metadata(relative_path(&parents[..n]))
                && !meta.is_dir()
            {
                return ResourceError::new(
                    ResourceErrorKind::NotAllowed,
                    format!(
                        "cannot write `{}`: `{}` is a file, not a directory",
                        show(url),
                        relative(&parents[..n])
                    ),
                );
            }
        }
        if is_escape(e) || is_loop(e) {
            return escape(url, "the path leaves the root");
        }
        io_failure("write", url, e)
    }

    /// Why the segments cannot be followed inside the root, if a symlink is the reason: it
    /// points outside, loops, points to nothing, or is absolute. Walks host paths, so it only
    /// ever explains a refusal; nothing is opened from what it finds.
    fn diagnose(&self, segments: &[String], url: &str) -> Option<ResourceError> {
        let mut current = self.path.clone();
        for (i, segment) in segments.iter().enumerate() {
            let next = current.join(segment);
            let walked = &segments[..=i];
            match fs::symlink_metadata(&next) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    match follow_symlink(&self.path, &next, url, walked) {
                        Ok(target) => {
                            if fs::read_link(&next).is_ok_and(|t| t.is_absolute()) {
                                return Some(escape(
                                    url,
                                    format!(
                                        "the symlink `{}` is absolute (only relative symlinks that stay inside the root are followed)",
                                        relative(walked)
                                    ),
                                ));
                            }
                            current = target;
                        }
                        Err(e) => return Some(e),
                    }
                }
                Ok(_) => current = next,
                Err(_) => return None,
            }
        }
        None
    }
}

#[cfg(unix)]
const EISDIR: i32 = libc::EISDIR;
#[cfg(not(unix))]
const EISDIR: i32 = -1;

/// The segments as a path relative to the root (`.` for none).
fn relative_path(segments: &[String]) -> PathBuf {
    if segments.is_empty() {
        PathBuf::from(".")
    } else {
        segments.iter().collect()
    }
}

fn relative_or_dot(path: &Path) -> &Path {
    if path.as_os_str().is_empty() {
        Path::new(".")
    } else {
        path
    }
}

fn check_readable(
    is_dir: bool,
    is_file: bool,
    len: u64,
    url: &str,
    max_bytes: u64,
) -> Result<(), ResourceError> {
    if is_dir {
        return Err(directory(url));
    }
    if !is_file {
        return Err(ResourceError::new(
            ResourceErrorKind::NotAllowed,
            format!("`{}` is not a regular file", show(url)),
        ));
    }
    if len > max_bytes {
        return Err(too_large(url, len, max_bytes));
    }
    Ok(())
}

pub(crate) fn too_large(url: &str, size: u64, max: u64) -> ResourceError {
    ResourceError::new(
        ResourceErrorKind::TooLarge,
        format!(
            "`{}` is {size} bytes, more than the read limit of {max} bytes",
            show(url)
        ),
    )
}

/// The permissions of the file a write would replace (`None` when there is none), or a refusal
/// when that file is read-only: the rename would otherwise replace a file that writing in place
/// could not change (0444), since replacing needs only the directory's permission.
fn replaced_mode(
    dir: &cap_std::fs::Dir,
    name: &Path,
    url: &str,
) -> Result<Option<cap_std::fs::Permissions>, ResourceError> {
    let Ok(meta) = dir.metadata(name) else {
        return Ok(None);
    };
    if !meta.is_file() {
        return Ok(None);
    }
    if meta.permissions().readonly() {
        return Err(ResourceError::new(
            ResourceErrorKind::NotAllowed,
            format!(
                "cannot write `{}`: the file is read-only, so it is not replaced",
                show(url)
            ),
        ));
    }
    Ok(Some(meta.permissions()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn res4_raw_dot_segments_are_seen_before_parsing() {
        for bad in [
            "workspace:///a/../b",
            "workspace:///a/%2e%2E/b",
            "workspace:///a/.%2e/b",
            "workspace:///a/./b",
            "workspace:///a/..",
            "workspace:///a\\..\\b",
            "workspace:///a/.\t./b",
        ] {
            let err = check_url_text(bad).err();
            assert_eq!(
                err.map(|e| e.kind()),
                Some(ResourceErrorKind::Escape),
                "{bad}"
            );
        }
        assert!(check_url_text("workspace:///a/b.txt?lines=1-2#x/..").is_ok());
        assert!(check_url_text("workspace:///a/...txt").is_ok());
    }

    #[test]
    fn res4_segment_checks() {
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a\\b",
            "a\0b",
            "%2e",
            "\u{2025}",
            "C:",
            "x\u{FF0F}y",
        ] {
            assert!(check_segment("u", bad, bad).is_err(), "{bad:?}");
        }
        for good in ["notes.txt", "...", "a b", "笔记。txt", "100%", "notes:v2"] {
            assert!(check_segment("u", good, good).is_ok(), "{good:?}");
        }
    }

    #[test]
    fn res4_sandbox_paths_must_be_absolute_files() {
        assert_eq!(
            path_segments("/home/workspace/tasks.txt").ok(),
            Some(vec!["home".into(), "workspace".into(), "tasks.txt".into()])
        );
        assert!(path_segments("home/x").is_err());
        assert!(path_segments("/home/").is_err());
        assert!(path_segments("/").is_err());
        assert!(path_segments("//etc/passwd").is_err());
    }
}
