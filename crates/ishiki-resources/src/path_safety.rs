//! Path safety for the directory-rooted schemes `workspace://` and `local://` (RES-4, SEC-2).
//!
//! Three gates, each of which alone keeps a path inside its root:
//! 1. [`check_url_text`] looks at the URL *as typed*: URL parsing silently removes dot segments
//!    (also `%2e%2e`) and deletes tabs and newlines, so a refusal must happen before parsing.
//! 2. [`check_segment`] looks at each percent-decoded path segment: no dot segments, no hidden
//!    `/` or `\`, no control characters, no second layer of percent-encoding, no Unicode
//!    look-alikes of `.`, `/`, `\` or `%` that some later normalisation could turn into real ones.
//! 3. [`resolve_existing`] / [`resolve_for_write`] walk the segments one by one below the
//!    canonical root and follow a symlink only when its canonical target stays inside.
//!
//! What this cannot do: close the race in which another process swaps a checked directory for
//! a symlink between the check and the open (that needs `openat2(RESOLVE_BENEATH)`).

use std::fs;
use std::io::{self, Read as _};
use std::path::{Path, PathBuf};

use percent_encoding::percent_decode_str;
use url::Url;

use crate::center::truncate_for_message;
use crate::{Error, ErrorKind};

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

/// The URL or path as shown in a message: control characters escaped, long text cut.
pub(crate) fn show(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    truncate_for_message(&out)
}

fn escape(url: &str, why: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Escape,
        format!("`{}` is refused: {why}", show(url)),
    )
}

/// Refuses URL text that parsing would silently change: control characters (the parser drops
/// tabs and newlines, so `.\t.` becomes `..`) and dot segments in any percent-encoding.
pub(crate) fn check_url_text(text: &str) -> Result<(), Error> {
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

fn dot_segment(url: &str, raw: &str) -> Error {
    escape(
        url,
        format!(
            "dot segment `{}` (`.` and `..` are not allowed in resource paths)",
            show(raw)
        ),
    )
}

/// Checks one path segment, already percent-decoded (`raw` is how it was written).
pub(crate) fn check_segment(url: &str, raw: &str, segment: &str) -> Result<(), Error> {
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
pub(crate) fn url_segments(url: &Url, shown: &str) -> Result<Vec<String>, Error> {
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
pub(crate) fn path_segments(path: &str) -> Result<Vec<String>, Error> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(Error::new(
            ErrorKind::InvalidUrl,
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

pub(crate) fn directory(url: &str) -> Error {
    Error::new(
        ErrorKind::NotAllowed,
        format!("`{}` is a directory, not a file", show(url)),
    )
}

pub(crate) fn not_found(url: &str) -> Error {
    Error::new(ErrorKind::NotFound, format!("no file at `{}`", show(url)))
}

fn io_failure(verb: &str, url: &str, e: &io::Error) -> Error {
    Error::new(ErrorKind::Io, format!("cannot {verb} `{}`: {e}", show(url)))
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
) -> Result<PathBuf, Error> {
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
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(Error::new(
            ErrorKind::NotFound,
            format!(
                "`{}`: the symlink `{}` points to nothing",
                show(url),
                relative(walked)
            ),
        )),
        Err(e) => Err(io_failure("resolve", url, &e)),
    }
}

/// The host path of an existing file or directory below the canonical `root`.
pub(crate) fn resolve_existing(
    root: &Path,
    segments: &[String],
    url: &str,
) -> Result<PathBuf, Error> {
    let mut current = root.to_path_buf();
    for (i, segment) in segments.iter().enumerate() {
        let next = current.join(segment);
        match fs::symlink_metadata(&next) {
            Ok(meta) if meta.file_type().is_symlink() => {
                current = follow_symlink(root, &next, url, &segments[..=i])?;
            }
            Ok(_) => current = next,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                ) =>
            {
                return Err(not_found(url));
            }
            Err(e) => return Err(io_failure("resolve", url, &e)),
        }
    }
    // Each step above stays inside; this re-check guards the invariant against future edits.
    if !current.starts_with(root) {
        return Err(escape(url, "the path leaves the root"));
    }
    Ok(current)
}

/// The host path to write below the canonical `root`, creating missing parent directories.
///
/// A final-component symlink is followed only to an existing file inside the root; a dangling
/// one is refused, since writing through it could create a file anywhere.
pub(crate) fn resolve_for_write(
    root: &Path,
    segments: &[String],
    url: &str,
) -> Result<PathBuf, Error> {
    let Some((last, parents)) = segments.split_last() else {
        return Err(directory(url));
    };
    let mut current = root.to_path_buf();
    for (i, segment) in parents.iter().enumerate() {
        let next = current.join(segment);
        let walked = &segments[..=i];
        let meta = match fs::symlink_metadata(&next) {
            Ok(meta) => meta,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                match fs::create_dir(&next) {
                    Ok(()) => {}
                    // A concurrent writer made it: check what it is like any existing entry.
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(io_failure("write", url, &e)),
                }
                fs::symlink_metadata(&next).map_err(|e| io_failure("write", url, &e))?
            }
            Err(e) => return Err(io_failure("write", url, &e)),
        };
        current = if meta.file_type().is_symlink() {
            follow_symlink(root, &next, url, walked)?
        } else {
            next
        };
        if !current.is_dir() {
            return Err(Error::new(
                ErrorKind::NotAllowed,
                format!(
                    "cannot write `{}`: `{}` is a file, not a directory",
                    show(url),
                    relative(walked)
                ),
            ));
        }
    }
    let target = current.join(last);
    let target = match fs::symlink_metadata(&target) {
        Ok(meta) if meta.file_type().is_symlink() => {
            match follow_symlink(root, &target, url, segments) {
                Ok(resolved) => resolved,
                Err(e) if e.kind() == ErrorKind::NotFound => {
                    return Err(escape(
                        url,
                        format!(
                            "the symlink `{}` points to nothing, and writing through it could create a file outside the root",
                            relative(segments)
                        ),
                    ));
                }
                Err(e) => return Err(e),
            }
        }
        Ok(_) | Err(_) => target,
    };
    if target.is_dir() {
        return Err(directory(url));
    }
    if !target.starts_with(root) {
        return Err(escape(url, "the path leaves the root"));
    }
    Ok(target)
}

/// Reads a regular file, refusing directories, devices and FIFOs (a FIFO would block forever)
/// and anything larger than `max_bytes`.
pub(crate) fn read_regular_file(path: &Path, url: &str, max_bytes: u64) -> Result<Vec<u8>, Error> {
    let meta = fs::metadata(path).map_err(|e| io_failure("read", url, &e))?;
    if meta.is_dir() {
        return Err(directory(url));
    }
    if !meta.is_file() {
        return Err(Error::new(
            ErrorKind::NotAllowed,
            format!("`{}` is not a regular file", show(url)),
        ));
    }
    if meta.len() > max_bytes {
        return Err(too_large(url, meta.len(), max_bytes));
    }
    let file = fs::File::open(path).map_err(|e| io_failure("read", url, &e))?;
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| io_failure("read", url, &e))?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_large(url, bytes.len() as u64, max_bytes));
    }
    Ok(bytes)
}

pub(crate) fn too_large(url: &str, size: u64, max: u64) -> Error {
    Error::new(
        ErrorKind::TooLarge,
        format!(
            "`{}` is {size} bytes, more than the read limit of {max} bytes",
            show(url)
        ),
    )
}

/// Writes `bytes` to `target` through a temporary file in the same directory and a rename, so
/// a reader sees the old or the new content, never a mix. The rename replaces a directory entry
/// and never writes through a symlink put there in the meantime.
pub(crate) fn write_atomically(target: &Path, bytes: &[u8], url: &str) -> Result<(), Error> {
    use std::io::Write as _;
    let dir = target.parent().unwrap_or(target);
    let temp = dir.join(crate::temp_name());
    let result = (|| -> io::Result<()> {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&temp, target)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&temp);
    }
    result.map_err(|e| io_failure("write", url, &e))
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
            assert_eq!(err.map(|e| e.kind()), Some(ErrorKind::Escape), "{bad}");
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
