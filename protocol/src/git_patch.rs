//! Reading `git diff` patches: splitting one into its per-file `diff --git` sections, and the
//! file names in a section's header lines, which git C-quotes when they hold unusual bytes
//! (`"a/caf\303\251.txt"`). Pure, over bytes: a name comes back as the bytes git quoted.
//!
//! Strict: a quoted name that git would not have written, or a `diff --git` line that does not
//! name both sides with `a/` and `b/`, is an error. Readers that only display a patch may fall
//! back to the text as written ([`display_name`]); readers that act on it refuse it.
//!
//! A file's section starts at a line beginning with `diff --git `. That is unambiguous: hunk
//! lines start with ` `, `+`, `-` or `\`, and the base85 lines of a binary patch never hold a
//! space.

/// What starts each file's section of a patch.
pub const DIFF_HEADER: &[u8] = b"diff --git ";

/// Why a file name in a patch header cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// A quoted name was expected and the text does not start with `"`.
    #[error("the name is not quoted")]
    NotQuoted,
    /// A quoted name runs to the end of the line.
    #[error("a quoted name has no closing quote")]
    Unterminated,
    /// A `\` ends the text, or an octal escape is not three octal digits up to `\377`.
    #[error("a quoted name holds a bad escape")]
    BadEscape,
    /// A `diff --git` name lacks its `a/` or `b/` prefix.
    #[error("a name lacks its `{0}` prefix")]
    MissingPrefix(&'static str),
    /// A `diff --git` line names one file where it must name two.
    #[error("the header line does not name two files")]
    NoSecondName,
}

/// The per-file sections of a patch, in order, each starting at its `diff --git ` line and
/// running to the next one. Text before the first header (git never writes any) is dropped:
/// no section holds it.
pub fn sections(patch: &[u8]) -> Vec<&[u8]> {
    let mut starts = Vec::new();
    let mut offset = 0;
    for line in patch.split_inclusive(|&b| b == b'\n') {
        if line.starts_with(DIFF_HEADER) {
            starts.push(offset);
        }
        offset += line.len();
    }
    let ends = starts.iter().skip(1).copied().chain([patch.len()]);
    starts
        .iter()
        .zip(ends)
        .map(|(&s, e)| &patch[s..e])
        .collect()
}

/// The two names of a `diff --git a/X b/Y` line (the text after `diff --git `), prefixes
/// removed. Unquoted names holding ` b/` are split where both halves name the same file, as
/// git writes a file that was not renamed.
pub fn header_names(rest: &[u8]) -> Result<(Vec<u8>, Vec<u8>), NameError> {
    if rest.first() == Some(&b'"') {
        let (a, tail) = unquote(rest)?;
        let tail = tail.strip_prefix(b" ").ok_or(NameError::NoSecondName)?;
        let b = if tail.first() == Some(&b'"') {
            unquote(tail)?.0
        } else {
            tail.to_vec()
        };
        return Ok((strip(&a, "a/")?, strip(&b, "b/")?));
    }
    let body = rest
        .strip_prefix(b"a/")
        .ok_or(NameError::MissingPrefix("a/"))?;
    // `NAME b/NAME`: the same name twice.
    if body.len() >= 4 && (body.len() - 3).is_multiple_of(2) {
        let n = (body.len() - 3) / 2;
        if &body[n..n + 3] == b" b/" && body[..n] == body[n + 3..] {
            return Ok((body[..n].to_vec(), body[..n].to_vec()));
        }
    }
    let at = find(body, b" b/")
        .or_else(|| find(body, b" \"b/"))
        .ok_or(NameError::NoSecondName)?;
    let b = &body[at + 1..];
    let b = if b.first() == Some(&b'"') {
        strip(&unquote(b)?.0, "b/")?
    } else {
        b[2..].to_vec()
    };
    Ok((body[..at].to_vec(), b))
}

/// The name of a `--- ` or `+++ ` line (the text after the marker): `None` for `/dev/null`,
/// else the name with `prefix` (`a/` or `b/`) removed where it has one. git ends an unquoted
/// name that holds a space with a tab.
pub fn side_name(rest: &[u8], prefix: &[u8]) -> Result<Option<Vec<u8>>, NameError> {
    let rest = rest.strip_suffix(b"\t").unwrap_or(rest);
    if rest == b"/dev/null" {
        return Ok(None);
    }
    let name = name(rest)?;
    Ok(Some(match name.strip_prefix(prefix) {
        Some(stripped) => stripped.to_vec(),
        None => name,
    }))
}

/// A name git may have quoted (`rename from`, `copy to` lines): its bytes. What follows the
/// closing quote of a quoted name is ignored.
pub fn name(raw: &[u8]) -> Result<Vec<u8>, NameError> {
    if raw.first() == Some(&b'"') {
        Ok(unquote(raw)?.0)
    } else {
        Ok(raw.to_vec())
    }
}

/// A name for display: decoded as [`name`] and made UTF-8 lossily; a name whose quoting is
/// malformed is shown as written.
pub fn display_name(raw: &[u8]) -> String {
    lossy(&name(raw).unwrap_or_else(|_| raw.to_vec()))
}

/// Bytes as UTF-8, invalid sequences replaced by U+FFFD.
pub fn lossy(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A C-quoted name at the start of `s`, as git writes it (`"a/caf\303\251 \"x\""`): the bytes
/// it stands for, and what follows the closing quote. Octal escapes are exactly three digits up
/// to `\377`; any other escaped byte stands for itself.
pub fn unquote(s: &[u8]) -> Result<(Vec<u8>, &[u8]), NameError> {
    if s.first() != Some(&b'"') {
        return Err(NameError::NotQuoted);
    }
    let mut out = Vec::new();
    let mut i = 1;
    while i < s.len() {
        match s[i] {
            b'"' => return Ok((out, &s[i + 1..])),
            b'\\' => {
                let c = *s.get(i + 1).ok_or(NameError::BadEscape)?;
                i += 2;
                match c {
                    b'0'..=b'3' => {
                        out.push(octal(s.get(i - 1..i + 2).ok_or(NameError::BadEscape)?)?);
                        i += 2;
                    }
                    other => out.push(escaped(other)),
                }
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    Err(NameError::Unterminated)
}

/// The byte three octal digits stand for.
fn octal(digits: &[u8]) -> Result<u8, NameError> {
    let mut value: u8 = 0;
    for d in digits {
        if !(b'0'..=b'7').contains(d) {
            return Err(NameError::BadEscape);
        }
        value = value
            .checked_mul(8)
            .and_then(|v| v.checked_add(d - b'0'))
            .ok_or(NameError::BadEscape)?;
    }
    Ok(value)
}

/// The byte a one-letter escape (`\t`, `\"`, `\\`) stands for.
fn escaped(c: u8) -> u8 {
    match c {
        b'a' => 7,
        b'b' => 8,
        b't' => b'\t',
        b'n' => b'\n',
        b'v' => 11,
        b'f' => 12,
        b'r' => b'\r',
        other => other,
    }
}

fn strip(name: &[u8], prefix: &'static str) -> Result<Vec<u8>, NameError> {
    name.strip_prefix(prefix.as_bytes())
        .map(<[u8]>::to_vec)
        .ok_or(NameError::MissingPrefix(prefix))
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
#[path = "git_patch_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "git_patch_props.rs"]
mod props;
