use super::*;

#[test]
fn names_are_portable_variable_names() {
    let long = format!("A{}", "B".repeat(63));
    let too_long = format!("A{}", "B".repeat(64));
    let cases: [(&str, Option<&str>); 16] = [
        ("PIP_TOKEN", None),
        ("_X", None),
        ("A", None),
        ("A1_2", None),
        (&long, None),
        (&too_long, Some("at most 64")),
        ("", Some("empty")),
        ("1PASSWORD", Some("start with a digit")),
        ("pip_token", Some("upper-case")),
        ("PIP-TOKEN", Some("upper-case")),
        ("PIP TOKEN", Some("upper-case")),
        ("PIP_TOKÉN", Some("upper-case")),
        ("A=B", Some("upper-case")),
        ("PATH", Some("set by the sandbox")),
        ("https_proxy", Some("set by the sandbox")),
        ("LD_PRELOAD", Some("set by the sandbox")),
    ];
    for (name, want) in cases {
        let got = name_problem(name);
        match want {
            None => assert_eq!(got, None, "{name:?}"),
            Some(want) => {
                let got = got.unwrap_or_default();
                assert!(got.contains(want), "{name:?}: {got}");
            }
        }
    }
    for name in RESERVED {
        assert!(name_problem(name).is_some(), "{name}");
    }
}

#[test]
fn values_are_bounded_text_without_nul() {
    let max = "x".repeat(MAX_SECRET_VALUE_BYTES);
    let over = "x".repeat(MAX_SECRET_VALUE_BYTES + 1);
    let cases: [(&str, Option<&str>); 6] = [
        ("", None),
        ("hunter2", None),
        ("line one\nline two", None),
        (&max, None),
        (&over, Some("at most 64 KiB")),
        ("a\0b", Some("NUL")),
    ];
    for (value, want) in cases {
        let got = value_problem(value);
        assert_eq!(got.is_some(), want.is_some(), "{}", value.len());
        if let (Some(got), Some(want)) = (got, want) {
            assert!(got.contains(want), "{got}");
        }
    }
}
