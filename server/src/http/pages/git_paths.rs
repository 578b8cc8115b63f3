//! Paths in `git diff` headers: C-quoted names (`"a/caf\\303\\251.txt"`), and the `a/P b/P`
//! header line of a file whose `---`/`+++` lines are missing (mode changes, binary files).

/// `a/x b/x` (same path twice, as `--no-renames` gives) or `"a/q" "b/q"` (quoted).
pub fn header_paths(rest: &[u8]) -> (Option<String>, Option<String>) {
    let rest = String::from_utf8_lossy(rest).into_owned();
    if rest.starts_with('"') {
        let (a, after) = quoted(&rest);
        let b = after.trim_start();
        let b = if b.starts_with('"') {
            quoted(b).0
        } else {
            b.to_owned()
        };
        return (strip(&a, "a/"), strip(&b, "b/"));
    }
    // Unquoted: `a/P b/P` when both sides are the same path, which holds without renames.
    let n = rest.len();
    if n >= 5 && (n - 5).is_multiple_of(2) {
        let p = (n - 5) / 2;
        if let (Some(a), Some(b)) = (rest.get(2..2 + p), rest.get(2 + p + 3..))
            && rest.starts_with("a/")
            && rest.get(2 + p..2 + p + 3) == Some(" b/")
            && a == b
        {
            return (Some(a.to_owned()), Some(b.to_owned()));
        }
    }
    match rest.split_once(" b/") {
        Some((a, b)) => (strip(a, "a/"), Some(b.to_owned())),
        None => (None, Some(rest)),
    }
}

fn strip(name: &str, prefix: &str) -> Option<String> {
    Some(name.strip_prefix(prefix).unwrap_or(name).to_owned())
}

/// A C-quoted name (as git writes unusual paths) at the start of `s`, and what follows it.
fn quoted(s: &str) -> (String, &str) {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return (String::from_utf8_lossy(&out).into_owned(), &s[i + 1..]),
            b'\\' if i + 1 < bytes.len() => {
                let c = bytes[i + 1];
                let octal = bytes
                    .get(i + 1..i + 4)
                    .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
                if let Some(digits) = octal {
                    let value = digits
                        .iter()
                        .fold(0_u32, |v, d| v * 8 + u32::from(d - b'0'));
                    out.push(u8::try_from(value).unwrap_or(b'?'));
                    i += 4;
                    continue;
                }
                out.push(match c {
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'r' => b'\r',
                    b'a' => 0x07,
                    b'b' => 0x08,
                    b'f' => 0x0c,
                    b'v' => 0x0b,
                    other => other,
                });
                i += 2;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    (String::from_utf8_lossy(&out).into_owned(), "")
}

/// A name that may be C-quoted.
pub fn unquote(name: &str) -> String {
    if name.starts_with('"') {
        quoted(name).0
    } else {
        name.to_owned()
    }
}
