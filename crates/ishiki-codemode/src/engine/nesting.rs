//! How deeply a program's brackets nest, measured before the parser sees it.
//!
//! Boa's parser recurses on the native stack for every nested bracket, so a program of a few
//! kilobytes of `((((…` overflows any stack and aborts the process. This lexer-lite skips
//! strings, template text, comments and regular expressions (telling a regex from a division by
//! the previous token, as lexers do) and counts `(`, `[`, `{` and `${`. It only has to be close:
//! the limit is far above what real programs use.

/// Words after which a `/` starts a regular expression rather than a division.
const REGEX_AFTER_WORDS: [&str; 15] = [
    "return",
    "typeof",
    "case",
    "do",
    "else",
    "in",
    "of",
    "new",
    "delete",
    "void",
    "throw",
    "instanceof",
    "yield",
    "await",
    "extends",
];

/// The deepest bracket nesting in `source`.
pub(crate) fn max_nesting(source: &str) -> usize {
    let b = source.as_bytes();
    // `b'$'` marks a template substitution `${`, whose `}` returns to template text.
    let mut stack: Vec<u8> = Vec::new();
    let mut max = 0usize;
    let mut regex_ok = true;
    let mut i = 0usize;
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i = skip_until(b, i + 2, b"\n");
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                i = skip_until(b, i + 2, b"*/");
            }
            b'/' if regex_ok => {
                i = skip_regex(b, i + 1);
                regex_ok = false;
            }
            b'\'' | b'"' => {
                i = skip_string(b, i + 1, c);
                regex_ok = false;
            }
            b'`' => {
                let (next, opened) = skip_template(b, i + 1);
                i = next;
                if opened {
                    stack.push(b'$');
                    max = max.max(stack.len());
                    regex_ok = true;
                } else {
                    regex_ok = false;
                }
            }
            b'(' | b'[' | b'{' => {
                stack.push(c);
                max = max.max(stack.len());
                regex_ok = true;
                i += 1;
            }
            b')' | b']' => {
                stack.pop();
                regex_ok = false;
                i += 1;
            }
            b'}' => {
                let closes_substitution = stack.pop() == Some(b'$');
                if closes_substitution {
                    let (next, opened) = skip_template(b, i + 1);
                    i = next;
                    if opened {
                        stack.push(b'$');
                        max = max.max(stack.len());
                        regex_ok = true;
                    } else {
                        regex_ok = false;
                    }
                } else {
                    regex_ok = true;
                    i += 1;
                }
            }
            c if c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80 => {
                let start = i;
                while i < b.len()
                    && (b[i].is_ascii_alphanumeric()
                        || b[i] == b'_'
                        || b[i] == b'$'
                        || b[i] >= 0x80)
                {
                    i += 1;
                }
                let word = &source[start..i];
                regex_ok = REGEX_AFTER_WORDS.contains(&word);
            }
            _ => {
                regex_ok = true;
                i += 1;
            }
        }
    }
    max
}

fn skip_until(b: &[u8], mut i: usize, end: &[u8]) -> usize {
    while i < b.len() {
        if b[i..].starts_with(end) {
            return i + end.len();
        }
        i += 1;
    }
    b.len()
}

fn skip_string(b: &[u8], mut i: usize, quote: u8) -> usize {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'\n' => return i,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

fn skip_regex(b: &[u8], mut i: usize) -> usize {
    let mut in_class = false;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'\n' => return i,
            b'[' => {
                in_class = true;
                i += 1;
            }
            b']' => {
                in_class = false;
                i += 1;
            }
            b'/' if !in_class => return i + 1,
            _ => i += 1,
        }
    }
    b.len()
}

/// Skips template text; returns where code resumes and whether a `${` opened there.
fn skip_template(b: &[u8], mut i: usize) -> (usize, bool) {
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'`' => return (i + 1, false),
            b'$' if b.get(i + 1) == Some(&b'{') => return (i + 2, true),
            _ => i += 1,
        }
    }
    (b.len(), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_real_nesting_only() {
        assert_eq!(max_nesting("return 1"), 0);
        assert_eq!(max_nesting("f(a[b({})])"), 4);
        assert_eq!(max_nesting("const s = '(((('; // ((((\n/* [[[[ */ x"), 0);
        assert_eq!(max_nesting("const r = /[(]{2}/g; f(r)"), 1);
        assert_eq!(max_nesting("const t = `a ${ f(`b ${ [1] }`) } c`;"), 4);
        assert_eq!(max_nesting("x = a / (b / c)"), 1);
        assert_eq!(max_nesting("return /((/.test(s)"), 1);
    }

    #[test]
    fn deep_source_is_measured() {
        let deep = format!("{}1{}", "(".repeat(5000), ")".repeat(5000));
        assert_eq!(max_nesting(&deep), 5000);
    }
}
