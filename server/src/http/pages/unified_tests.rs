use super::*;

const INDEX: &str = "index 4cb29ea38f70d7c61b2a3a25b02e3bdf44905402..047ece5a1a9528405383f9b570697bef4a035387 100644\n";

fn modified() -> String {
    format!(
        "diff --git a/a.txt b/a.txt\n{INDEX}--- a/a.txt\n+++ b/a.txt\n\
         @@ -1,3 +1,4 @@\n one\n-two\n+2\n three\n+four\n\\ No newline at end of file\n"
    )
}

const NEW_FILE: &str = "diff --git a/new.txt b/new.txt\nnew file mode 100644\n\
    index 0000000000000000000000000000000000000000..3e757656cf36eca53338e520d134963a44f793f8\n\
    --- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+new\n";

const DELETED: &str = "diff --git a/old.txt b/old.txt\ndeleted file mode 100644\n\
    index b023018cabc396e7692c70bbf5784a93d3f738ab..0000000000000000000000000000000000000000\n\
    --- a/old.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n";

const MODE: &str = "diff --git a/my file.txt b/my file.txt\nold mode 100644\nnew mode 100755\n";

const SPACES: &str = "diff --git a/my file.txt b/my file.txt\n\
    index 587be6b4c3f93f93c489c0111bba5596147a26cb..975fbec8256d3e8a3797e7a3611380f27c49f4ac 100644\n\
    --- a/my file.txt\t\n+++ b/my file.txt\t\n@@ -1 +1 @@\n-x\n+y\n";

const BINARY: &str = "diff --git a/logo.png b/logo.png\n\
    index a0b1c4c95450f1ec529190b056efb82861871a60..36b8a989add8f2e5760a47e1812edec388eef91e 100644\n\
    GIT binary patch\nliteral 6\nNcmZQzWD4+e2LJ))0O<e#\n\nliteral 20\n\
    ccmazu`yF!X=Jx$xnv&v}lnxja=6s$60CUO;sQ>@~\n\n";

const NEW_BINARY: &str = "diff --git a/new bin.dat b/new bin.dat\nnew file mode 100644\n\
    index 0000000000000000000000000000000000000000..4227ca4e8736af63036e7457e2db376ddf7e5795\n\
    GIT binary patch\nliteral 3\nKcmZQzU;qFB0{{U4\n\nliteral 0\nHcmV?d00001\n\n";

const DELETED_BINARY: &str = "diff --git a/blob.bin b/blob.bin\ndeleted file mode 100644\n\
    index afcf5ff7b1f879cf3f261ec4b76bc565d4d0d153..0000000000000000000000000000000000000000\n\
    GIT binary patch\nliteral 0\nHcmV?d00001\n\nliteral 1234\nNcmZQzWD4+e2LJ))0O<e#\n\n";

const WITHOUT_DATA: &str = "diff --git a/img.gif b/img.gif\nindex 1111111..2222222 100644\nBinary files a/img.gif and b/img.gif differ\n";

/// `(path, change letter, +, −, binary text, notes, shown lines as "sign|old|new|text")`.
type Want<'a> = (
    &'a str,
    char,
    u64,
    u64,
    Option<&'a str>,
    Vec<&'a str>,
    Vec<&'a str>,
);

fn render(file: &FileDiff) -> Vec<String> {
    file.lines
        .iter()
        .map(|l| format!("{}{}|{}|{}|{}", l.class, l.sign, l.old, l.new, l.text))
        .collect()
}

/// Parse every file of a patch, showing lines while `budget` lasts.
fn files(diff: &[u8], budget: &mut Budget) -> Vec<FileDiff> {
    split(diff)
        .into_iter()
        .map(|chunk| parse(chunk, budget))
        .collect()
}

fn parse_all(diff: &[u8]) -> Vec<FileDiff> {
    files(diff, &mut Budget::new(Limits::PAGE))
}

#[test]
fn files_are_split_and_described() {
    let quoted: &[u8] = b"diff --git \"a/caf\\303\\251.txt\" \"b/caf\\303\\251.txt\"\n\
        index a9074c7..6f83395 100644\n--- \"a/caf\\303\\251.txt\"\n+++ \"b/caf\\303\\251.txt\"\n\
        @@ -1 +1 @@\n-caf\n+caf\xe9\n";
    let cases: Vec<(Vec<u8>, Vec<Want>)> = vec![
        (Vec::new(), vec![]),
        (
            modified().into_bytes(),
            vec![(
                "a.txt",
                'M',
                2,
                1,
                None,
                vec![],
                vec![
                    "hunk|||@@ -1,3 +1,4 @@",
                    "same |1|1|one",
                    "del-|2||two",
                    "add+||2|2",
                    "same |3|3|three",
                    "add+||4|four",
                    "note|||No newline at end of file",
                ],
            )],
        ),
        (
            NEW_FILE.into(),
            vec![(
                "new.txt",
                'A',
                1,
                0,
                None,
                vec!["new file, mode 100644"],
                vec!["hunk|||@@ -0,0 +1 @@", "add+||1|new"],
            )],
        ),
        (
            DELETED.into(),
            vec![(
                "old.txt",
                'D',
                0,
                1,
                None,
                vec!["deleted file, mode 100644"],
                vec!["hunk|||@@ -1 +0,0 @@", "del-|1||bye"],
            )],
        ),
        (
            MODE.into(),
            vec![(
                "my file.txt",
                'M',
                0,
                0,
                None,
                vec!["mode 100644 → 100755"],
                vec![],
            )],
        ),
        (
            SPACES.into(),
            vec![(
                "my file.txt",
                'M',
                1,
                1,
                None,
                vec![],
                vec!["hunk|||@@ -1 +1 @@", "del-|1||x", "add+||1|y"],
            )],
        ),
        (
            BINARY.into(),
            vec![(
                "logo.png",
                'M',
                0,
                0,
                Some("Binary file changed (now 6 bytes)"),
                vec![],
                vec![],
            )],
        ),
        (
            NEW_BINARY.into(),
            vec![(
                "new bin.dat",
                'A',
                0,
                0,
                Some("Binary file added (3 bytes)"),
                vec!["new file, mode 100644"],
                vec![],
            )],
        ),
        (
            DELETED_BINARY.into(),
            vec![(
                "blob.bin",
                'D',
                0,
                0,
                Some("Binary file deleted (1,234 bytes)"),
                vec!["deleted file, mode 100644"],
                vec![],
            )],
        ),
        (
            WITHOUT_DATA.into(),
            vec![(
                "img.gif",
                'M',
                0,
                0,
                Some("Binary file changed"),
                vec![],
                vec![],
            )],
        ),
        (
            quoted.to_vec(),
            vec![(
                "café.txt",
                'M',
                1,
                1,
                None,
                vec![],
                vec!["hunk|||@@ -1 +1 @@", "del-|1||caf", "add+||1|caf\u{fffd}"],
            )],
        ),
    ];
    for (diff, want) in cases {
        let got = parse_all(&diff);
        let got: Vec<_> = got
            .iter()
            .map(|f| {
                (
                    f.path.clone(),
                    f.change.letter(),
                    f.additions,
                    f.deletions,
                    f.binary.clone(),
                    f.notes.clone(),
                    render(f),
                )
            })
            .collect();
        let want: Vec<_> = want
            .into_iter()
            .map(|(p, c, a, d, b, n, l)| {
                (
                    p.to_owned(),
                    c,
                    a,
                    d,
                    b.map(str::to_owned),
                    n.into_iter().map(str::to_owned).collect::<Vec<_>>(),
                    l.into_iter().map(str::to_owned).collect::<Vec<_>>(),
                )
            })
            .collect();
        assert_eq!(got, want, "{}", String::from_utf8_lossy(&diff));
    }
}

#[test]
fn a_whole_patch_keeps_its_order_and_every_byte_lands_in_one_chunk() {
    let diff = [
        modified().as_str(),
        BINARY,
        NEW_FILE,
        DELETED,
        MODE,
        SPACES,
        NEW_BINARY,
    ]
    .concat();
    let chunks = split(diff.as_bytes());
    assert_eq!(chunks.concat(), diff.as_bytes());
    let paths: Vec<String> = parse_all(diff.as_bytes())
        .into_iter()
        .map(|f| f.path)
        .collect();
    assert_eq!(
        paths,
        [
            "a.txt",
            "logo.png",
            "new.txt",
            "old.txt",
            "my file.txt",
            "my file.txt",
            "new bin.dat"
        ]
    );
    // A line that merely contains the header text is no header.
    let inner = "diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-diff --git a/y b/y\n+z\n";
    assert_eq!(split(inner.as_bytes()).len(), 1);
    assert_eq!(split(b"no header here\n").len(), 0);
}

#[test]
fn header_paths_cover_quoting_and_spaces() {
    let cases = [
        ("a/x.rs b/x.rs", Some("x.rs"), Some("x.rs")),
        (
            "a/my b/file b/my b/file",
            Some("my b/file"),
            Some("my b/file"),
        ),
        (
            "\"a/tab\\there\" \"b/tab\\there\"",
            Some("tab\there"),
            Some("tab\there"),
        ),
        ("a/old b/new", Some("old"), Some("new")),
        // What the strict reader refuses is shown as written.
        ("x y", None, Some("x y")),
        ("\"a/open b/open", None, Some("\"a/open b/open")),
    ];
    for (rest, a, b) in cases {
        let (got_a, got_b) = header_paths(rest.as_bytes());
        assert_eq!((got_a.as_deref(), got_b.as_deref()), (a, b), "{rest}");
    }
}

#[test]
fn minus_and_plus_paths_tolerate_quoting_git_never_writes() {
    let cases: [(&[u8], &[u8], Option<&str>); 6] = [
        (b"a/x.rs", b"a/", Some("x.rs")),
        (b"/dev/null", b"b/", None),
        (b"b/my file.txt\t", b"b/", Some("my file.txt")),
        (b"\"b/caf\\303\\251\"", b"b/", Some("caf\u{e9}")),
        (b"\"a/open\t", b"a/", Some("\"a/open")),
        (b"\"a/\\39\"", b"a/", Some("\"a/\\39\"")),
    ];
    for (rest, prefix, want) in cases {
        assert_eq!(side_path(rest, prefix).as_deref(), want, "{rest:?}");
    }
}

#[test]
fn limits_cut_files_and_the_whole_patch() {
    let body: String = (1..=50).map(|i| format!("+line {i}\n")).collect();
    let file = |name: &str| {
        format!(
            "diff --git a/{name} b/{name}\n--- a/{name}\n+++ b/{name}\n@@ -0,0 +1,50 @@\n{body}"
        )
    };
    let diff = [file("a"), file("b"), file("c")].concat();
    let limits = Limits {
        file_lines: 11,
        total_lines: 20,
        total_bytes: 1 << 20,
        line_chars: 100,
    };
    let got = files(diff.as_bytes(), &mut Budget::new(limits));
    let shown: Vec<(usize, usize, u64)> = got
        .iter()
        .map(|f| (f.lines.len(), f.hidden, f.additions))
        .collect();
    // 11 of 51 lines (hunk header included), then 9 until the total runs out, then none.
    assert_eq!(shown, [(11, 40, 50), (9, 42, 50), (0, 51, 50)]);

    let bytes = Limits {
        total_bytes: 30,
        ..limits
    };
    let got = files(file("a").as_bytes(), &mut Budget::new(bytes));
    assert_eq!((got[0].lines.len(), got[0].hidden), (2, 49));
}

#[test]
fn lines_are_shown_readably() {
    assert_eq!(shown(b"abc\r", 10), "abc␍");
    assert_eq!(
        shown("héllo wörld".as_bytes(), 5),
        "héllo … (6 more characters)"
    );
    assert_eq!(shown(b"\xff\xfeok", 10), "\u{fffd}\u{fffd}ok");
    assert_eq!(hunk_start("@@ -12,3 +14,5 @@ fn main()"), (12, 14));
    assert_eq!(hunk_start("@@ -1 +1 @@"), (1, 1));
    assert_eq!(hunk_start("@@ garbage"), (0, 0));
}
