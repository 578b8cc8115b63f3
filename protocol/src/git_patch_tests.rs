//! Tables of the patch reader: sections, quoted names, header names.

use super::*;

#[test]
fn a_patch_splits_at_each_diff_git_line_and_keeps_every_byte() {
    let cases: &[(&str, &[&str])] = &[
        ("", &[]),
        (" \n\n", &[]),
        ("no header here\n", &[]),
        ("--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n", &[]),
        ("diff --git a/x b/x\n", &["diff --git a/x b/x\n"]),
        ("diff --git a/x b/x", &["diff --git a/x b/x"]),
        (
            "diff --git a/x b/x\nold mode 100644\nnew mode 100755\ndiff --git a/y b/y\n",
            &[
                "diff --git a/x b/x\nold mode 100644\nnew mode 100755\n",
                "diff --git a/y b/y\n",
            ],
        ),
        // Text before the first header belongs to no section.
        (
            "From abc\nSubject: x\n\ndiff --git a/x b/x\n",
            &["diff --git a/x b/x\n"],
        ),
        // A line that merely holds the header text is no header.
        (
            "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-diff --git a/y b/y\n+z\n \
             diff --git a/w b/w\n",
            &[
                "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-diff --git a/y b/y\n+z\n \
               diff --git a/w b/w\n",
            ],
        ),
        ("diff --git\n", &[]),
        (
            "diff --git a/x b/x\r\ndiff --git a/y b/y\r\n",
            &["diff --git a/x b/x\r\n", "diff --git a/y b/y\r\n"],
        ),
    ];
    for (patch, want) in cases {
        let got: Vec<&[u8]> = sections(patch.as_bytes());
        let want: Vec<&[u8]> = want.iter().map(|s| s.as_bytes()).collect();
        assert_eq!(got, want, "{patch:?}");
    }
}

#[test]
fn quoted_names_decode_as_git_writes_them() {
    type Unquoted<'a> = Result<(&'a [u8], &'a [u8]), NameError>;
    let cases: &[(&[u8], Unquoted<'_>)] = &[
        (b"\"a b\" rest", Ok((b"a b", b" rest"))),
        (b"\"\"", Ok((b"", b""))),
        (b"\"\\\\\\\"\\t\\n\"", Ok((b"\\\"\t\n", b""))),
        (b"\"\\a\\b\\v\\f\\r\"", Ok((b"\x07\x08\x0b\x0c\r", b""))),
        (b"\"\\303\\251\"", Ok(("é".as_bytes(), b""))),
        (b"\"\\000\\377\"", Ok((b"\x00\xff", b""))),
        (b"\"a/x\" \"b/x\"", Ok((b"a/x", b" \"b/x\""))),
        // Any other escaped byte stands for itself.
        (b"\"\\q\\4\"", Ok((b"q4", b""))),
        (b"\"open", Err(NameError::Unterminated)),
        (b"\"", Err(NameError::Unterminated)),
        (b"\"\\\"", Err(NameError::Unterminated)),
        (b"\"ends\\", Err(NameError::BadEscape)),
        (b"\"\\39\"", Err(NameError::BadEscape)),
        (b"\"\\3\"", Err(NameError::BadEscape)),
        (b"\"\\0a7\"", Err(NameError::BadEscape)),
        (b"\"\\30", Err(NameError::BadEscape)),
        (b"plain", Err(NameError::NotQuoted)),
        (b"", Err(NameError::NotQuoted)),
    ];
    for (input, want) in cases {
        let got = unquote(input);
        assert_eq!(
            got.as_ref().map(|(a, b)| (a.as_slice(), *b)),
            want.as_ref().map(|(a, b)| (*a, *b)),
            "{}",
            String::from_utf8_lossy(input)
        );
    }
}

#[test]
fn diff_git_lines_name_both_sides() {
    type Names<'a> = Result<(&'a str, &'a str), NameError>;
    let cases: &[(&[u8], Names<'_>)] = &[
        (b"a/x.rs b/x.rs", Ok(("x.rs", "x.rs"))),
        (
            b"a/my file.txt b/my file.txt",
            Ok(("my file.txt", "my file.txt")),
        ),
        (b"a/my b/file b/my b/file", Ok(("my b/file", "my b/file"))),
        (b"a/x b/x b/x b/x", Ok(("x b/x", "x b/x"))),
        (b"a/a b/c.txt b/a b/c.txt", Ok(("a b/c.txt", "a b/c.txt"))),
        (b"a/old b/new", Ok(("old", "new"))),
        (b"a/old name b/new name", Ok(("old name", "new name"))),
        (b"a/ b/", Ok(("", ""))),
        (
            b"\"a/tab\\there\" \"b/tab\\there\"",
            Ok(("tab\there", "tab\there")),
        ),
        (
            b"\"a/caf\\303\\251 \\\"q\\\".txt\" \"b/caf\\303\\251 \\\"q\\\".txt\"",
            Ok(("café \"q\".txt", "café \"q\".txt")),
        ),
        (b"\"a/caf\\303\\251\" b/plain", Ok(("café", "plain"))),
        (b"a/plain \"b/caf\\303\\251\"", Ok(("plain", "café"))),
        (b"nonsense", Err(NameError::MissingPrefix("a/"))),
        (b"x b/x", Err(NameError::MissingPrefix("a/"))),
        (b"a/x c/x", Err(NameError::NoSecondName)),
        (b"a/x", Err(NameError::NoSecondName)),
        (b"\"a/x\"", Err(NameError::NoSecondName)),
        (b"\"a/x\"  \"b/x\"", Err(NameError::MissingPrefix("b/"))),
        (b"\"x\" \"b/x\"", Err(NameError::MissingPrefix("a/"))),
        (b"\"a/x\" \"x\"", Err(NameError::MissingPrefix("b/"))),
        (b"\"a/x \"b/x\"", Err(NameError::NoSecondName)),
        (b"a/x \"b/\\39\"", Err(NameError::BadEscape)),
        (b"a/x \"b/\\9\"", Ok(("x", "9"))),
        (b"", Err(NameError::MissingPrefix("a/"))),
    ];
    for (rest, want) in cases {
        let got = header_names(rest).map(|(a, b)| (lossy(&a), lossy(&b)));
        let want = want.map(|(a, b)| (a.to_owned(), b.to_owned()));
        assert_eq!(got, want, "{}", String::from_utf8_lossy(rest));
    }
}

#[test]
fn minus_and_plus_lines_name_one_side() {
    type Side<'a> = Result<Option<&'a str>, NameError>;
    let cases: &[(&[u8], &[u8], Side<'_>)] = &[
        (b"a/x.rs", b"a/", Ok(Some("x.rs"))),
        (b"b/x.rs", b"b/", Ok(Some("x.rs"))),
        (b"/dev/null", b"a/", Ok(None)),
        (b"/dev/null\t", b"b/", Ok(None)),
        (b"a/my file.txt\t", b"a/", Ok(Some("my file.txt"))),
        (b"x.rs", b"a/", Ok(Some("x.rs"))),
        (b"b/x.rs", b"a/", Ok(Some("b/x.rs"))),
        (b"\"a/tab\\there\"", b"a/", Ok(Some("tab\there"))),
        (b"\"b/caf\\303\\251\"", b"b/", Ok(Some("café"))),
        (b"\"/dev/null\"", b"a/", Ok(Some("/dev/null"))),
        (b"\"a/open", b"a/", Err(NameError::Unterminated)),
    ];
    for (rest, prefix, want) in cases {
        let got = side_name(rest, prefix).map(|n| n.as_deref().map(lossy));
        let want = want.map(|n| n.map(str::to_owned));
        assert_eq!(got, want, "{}", String::from_utf8_lossy(rest));
    }
}

#[test]
fn names_decode_and_display() {
    // (raw, name, display_name)
    type Decoded<'a> = Result<&'a [u8], NameError>;
    let cases: &[(&[u8], Decoded<'_>, &str)] = &[
        (b"old name.txt", Ok(b"old name.txt"), "old name.txt"),
        (b"\"caf\\303\\251\"", Ok("café".as_bytes()), "café"),
        (b"\"q\" trailing", Ok(b"q"), "q"),
        (b"\"\\377\"", Ok(b"\xff"), "\u{fffd}"),
        (b"caf\xc3\xa9", Ok("café".as_bytes()), "café"),
        (b"bad\xff", Ok(b"bad\xff"), "bad\u{fffd}"),
        (b"\"open", Err(NameError::Unterminated), "\"open"),
        (b"\"\\39\"", Err(NameError::BadEscape), "\"\\39\""),
        (b"", Ok(b""), ""),
    ];
    for (raw, want, shown) in cases {
        assert_eq!(
            name(raw).as_deref().map_err(|e| *e),
            *want,
            "{}",
            lossy(raw)
        );
        assert_eq!(display_name(raw), *shown, "{}", lossy(raw));
    }
}

#[test]
fn errors_say_what_is_wrong() {
    let cases = [
        (NameError::NotQuoted, "the name is not quoted"),
        (
            NameError::Unterminated,
            "a quoted name has no closing quote",
        ),
        (NameError::BadEscape, "a quoted name holds a bad escape"),
        (
            NameError::MissingPrefix("b/"),
            "a name lacks its `b/` prefix",
        ),
        (
            NameError::NoSecondName,
            "the header line does not name two files",
        ),
    ];
    for (error, text) in cases {
        assert_eq!(error.to_string(), text);
    }
}
