//! Property tests of the patch reader:
//! - any name, quoted as git's `quote_c_style` quotes it, decodes to itself, and what follows
//!   the closing quote is left as it was;
//! - `diff --git` lines as git writes them for a file that was not renamed (names holding
//!   spaces, ` b/`, quotes, tabs, non-ASCII) name that file twice;
//! - sections start at each header line and together hold every byte from the first header on;
//! - random bytes never panic any reader.
//!
//! `PROPTEST_CASES=N` runs more cases (see fuzz/README.md).

use proptest::prelude::*;
use proptest::test_runner::Config;

use super::{DIFF_HEADER, header_names, name, sections, side_name, unquote};

/// Whether git (with `core.quotePath` on, its default) quotes a name holding `b`.
fn needs_quoting(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\' || b >= 0x7f
}

/// A name as git's `quote_c_style` writes it: unchanged when no byte needs quoting, else in
/// double quotes with `\a \b \t \n \v \f \r \" \\` and three-digit octal escapes.
fn git_quote(name: &[u8]) -> Vec<u8> {
    if !name.iter().copied().any(needs_quoting) {
        return name.to_vec();
    }
    let mut out = vec![b'"'];
    for &b in name {
        let letter = match b {
            7 => Some(b'a'),
            8 => Some(b'b'),
            b'\t' => Some(b't'),
            b'\n' => Some(b'n'),
            11 => Some(b'v'),
            12 => Some(b'f'),
            b'\r' => Some(b'r'),
            b'"' | b'\\' => Some(b),
            _ => None,
        };
        match letter {
            Some(l) => out.extend([b'\\', l]),
            None if needs_quoting(b) => out.extend(format!("\\{b:03o}").bytes()),
            None => out.push(b),
        }
    }
    out.push(b'"');
    out
}

/// File names as git may meet them: any bytes but NUL and `/`-free components joined by `/`,
/// with spaces, ` b/`, quotes and non-ASCII likely.
fn file_name() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b" b".to_vec()),
        Just(b" ".to_vec()),
        Just(b"\"".to_vec()),
        Just(b"\\".to_vec()),
        Just(b"\t".to_vec()),
        Just("é".as_bytes().to_vec()),
        Just(b"\xff".to_vec()),
        "[a-z.]{1,4}".prop_map(String::into_bytes),
        (1_u8..=255)
            .prop_filter("no separator", |b| *b != b'/')
            .prop_map(|b| vec![b]),
    ];
    let component = prop::collection::vec(piece, 1..4).prop_map(|p| p.concat());
    prop::collection::vec(component, 1..4).prop_map(|c| c.join(&b'/'))
}

proptest! {
    // proptest's default: 256 cases, or `PROPTEST_CASES`; no regression files in the tree.
    #![proptest_config(Config { failure_persistence: None, ..Config::default() })]

    #[test]
    fn git_quoting_decodes_to_the_name(n in file_name(), tail in "[ a-z\"\t]{0,6}") {
        let quoted = [git_quote(&n).as_slice(), tail.as_bytes()].concat();
        if quoted.first() == Some(&b'"') {
            let (got, rest) = unquote(&quoted).expect("git's quoting decodes");
            prop_assert_eq!(&got, &n);
            prop_assert_eq!(rest, tail.as_bytes());
        }
        prop_assert_eq!(name(&git_quote(&n)).expect("decodes"), n.clone());
        let minus = [git_quote(&[b"a/", n.as_slice()].concat()).as_slice(), b"\t"].concat();
        prop_assert_eq!(side_name(&minus, b"a/").expect("decodes"), Some(n));
    }

    #[test]
    fn a_file_that_was_not_renamed_is_named_twice(n in file_name()) {
        let a = git_quote(&[b"a/", n.as_slice()].concat());
        let b = git_quote(&[b"b/", n.as_slice()].concat());
        let line = [a.as_slice(), b" ", b.as_slice()].concat();
        prop_assert_eq!(header_names(&line).expect("reads"), (n.clone(), n));
    }

    #[test]
    fn sections_cover_the_patch_from_its_first_header(
        lines in prop::collection::vec(
            prop_oneof![
                Just(b"diff --git a/x b/x".to_vec()),
                Just(b"diff --git".to_vec()),
                Just(b" diff --git a/y b/y".to_vec()),
                Just(b"+diff --git a/z b/z".to_vec()),
                prop::collection::vec(any::<u8>(), 0..12),
            ],
            0..12,
        ),
        end in any::<bool>(),
    ) {
        let mut patch = lines.join(&b'\n');
        if end {
            patch.push(b'\n');
        }
        let got = sections(&patch);
        let first = patch
            .split_inclusive(|&b| b == b'\n')
            .scan(0, |at, line| {
                let start = *at;
                *at += line.len();
                Some((start, line))
            })
            .find(|(_, line)| line.starts_with(DIFF_HEADER))
            .map(|(start, _)| start);
        prop_assert_eq!(got.concat(), first.map_or(&[][..], |f| &patch[f..]));
        for section in &got {
            prop_assert!(section.starts_with(DIFF_HEADER));
            let inner = section.split_inclusive(|&b| b == b'\n').skip(1);
            prop_assert!(inner.clone().all(|l| !l.starts_with(DIFF_HEADER)));
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        let _ = unquote(&bytes);
        let _ = header_names(&bytes);
        let _ = side_name(&bytes, b"a/");
        let _ = name(&bytes);
        let _ = sections(&bytes);
        let quoted = [b"\"".as_slice(), &bytes].concat();
        let _ = unquote(&quoted);
        let _ = header_names(&quoted);
    }
}
