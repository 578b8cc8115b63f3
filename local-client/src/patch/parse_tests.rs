//! Tests of the patch parser.

use super::*;

const MODIFY: &str = "diff --git a/src/lib.rs b/src/lib.rs\n\
    index 1111111111111111111111111111111111111111..2222222222222222222222222222222222222222 100644\n\
    --- a/src/lib.rs\n\
    +++ b/src/lib.rs\n\
    @@ -1,3 +1,3 @@\n \
    keep\n\
    --- old line that starts with dashes\n\
    +new\n\
    +++ also new\n\
    \\ No newline at end of file\n";

const BINARY: &str = "diff --git a/logo.png b/logo.png\n\
    new file mode 100644\n\
    index 0000000000000000000000000000000000000000..88768efdf77ec78c9a995f94881793be6a41752b\n\
    GIT binary patch\n\
    literal 5\n\
    McmZQzOv=my00M6TI{*Lx\n\
    \n\
    literal 0\n\
    HcmV?d00001\n\
    \n";

#[test]
fn sections_paths_kinds_and_counts() {
    type Case<'a> = (
        &'a str,
        &'a str,
        Option<&'a str>,
        FileChange,
        u64,
        u64,
        bool,
    );
    let cases: &[Case<'_>] = &[
        (
            MODIFY,
            "src/lib.rs",
            None,
            FileChange::Modified,
            2,
            1,
            false,
        ),
        (BINARY, "logo.png", None, FileChange::Added, 0, 0, true),
        (
            "diff --git a/gone.txt b/gone.txt\ndeleted file mode 100644\nindex 1..0\n\
             --- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n",
            "gone.txt",
            None,
            FileChange::Deleted,
            0,
            1,
            false,
        ),
        (
            "diff --git a/new b/new\nnew file mode 100644\nindex 0..1\n--- /dev/null\n\
             +++ b/new\n@@ -0,0 +1,2 @@\n+a\n+b\n",
            "new",
            None,
            FileChange::Added,
            2,
            0,
            false,
        ),
        (
            "diff --git a/empty b/empty\nnew file mode 100644\nindex 0..e69\n",
            "empty",
            None,
            FileChange::Added,
            0,
            0,
            false,
        ),
        (
            "diff --git a/run.sh b/run.sh\nold mode 100644\nnew mode 100755\n",
            "run.sh",
            None,
            FileChange::TypeChanged,
            0,
            0,
            false,
        ),
        (
            "diff --git a/old name.txt b/new name.txt\nsimilarity index 90%\n\
             rename from old name.txt\nrename to new name.txt\nindex 1..2 100644\n\
             --- a/old name.txt\t\n+++ b/new name.txt\t\n@@ -1 +1 @@\n-x\n+y\n",
            "new name.txt",
            Some("old name.txt"),
            FileChange::Modified,
            1,
            1,
            false,
        ),
        (
            "diff --git a/a b/c.txt b/a b/c.txt\nindex 1..2 100644\n--- a/a b/c.txt\t\n\
             +++ b/a b/c.txt\t\n@@ -1 +1 @@\n-x\n+y\n",
            "a b/c.txt",
            None,
            FileChange::Modified,
            1,
            1,
            false,
        ),
        (
            "diff --git a/x b/x b/x b/x\nold mode 100644\nnew mode 100755\n",
            "x b/x",
            None,
            FileChange::TypeChanged,
            0,
            0,
            false,
        ),
        (
            "diff --git \"a/caf\\303\\251 \\\"q\\\".txt\" \"b/caf\\303\\251 \\\"q\\\".txt\"\n\
             new file mode 100644\nindex 0..e69\n",
            "café \"q\".txt",
            None,
            FileChange::Added,
            0,
            0,
            false,
        ),
        (
            "diff --git a/tab\\there b/tab\\there\nindex 1..2\n--- \"a/tab\\there\"\n\
             +++ \"b/tab\\there\"\n@@ -1 +1 @@\n-x\n+y\n",
            "tab\there",
            None,
            FileChange::Modified,
            1,
            1,
            false,
        ),
    ];
    for (text, path, from, change, additions, deletions, binary) in cases {
        let files = split(text.as_bytes()).unwrap();
        assert_eq!(files.len(), 1, "{text}");
        let f = &files[0];
        assert_eq!(f.path, *path, "{text}");
        assert_eq!(f.from.as_deref(), *from, "{text}");
        assert_eq!(f.change, *change, "{text}");
        assert_eq!(
            (f.additions, f.deletions),
            (*additions, *deletions),
            "{text}"
        );
        assert_eq!(f.binary, *binary, "{text}");
        assert_eq!(f.text, text.as_bytes(), "{text}");
        let mode_change = text.contains("new mode 100755");
        assert_eq!(
            f.new_mode.as_deref() == Some("100755"),
            mode_change,
            "{text}"
        );
    }
}

#[test]
fn a_patch_splits_at_each_diff_git_line_and_keeps_every_byte() {
    let patch = format!("{BINARY}{MODIFY}");
    let files = split(patch.as_bytes()).unwrap();
    let paths: Vec<_> = files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, ["logo.png", "src/lib.rs"]);
    let joined: Vec<u8> = files.iter().flat_map(|f| f.text.clone()).collect();
    assert_eq!(joined, patch.as_bytes());
    let summary = summary(&files, patch.len());
    assert_eq!(summary.headline(), "2 files changed, +2 −1");
    assert_eq!(summary.bytes, patch.len() as u64);
}

#[test]
fn empty_garbage_and_bad_headers() {
    assert_eq!(split(b""), Ok(Vec::new()));
    assert_eq!(split(b" \n\n"), Ok(Vec::new()));
    assert_eq!(
        split(b"--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+b\n"),
        Err(ParseError::NotAGitPatch)
    );
    assert!(matches!(
        split(b"diff --git nonsense\n"),
        Err(ParseError::BadHeader { .. })
    ));
}

#[test]
fn symlinks_and_their_targets() {
    // (section, symlink, target)
    let cases: &[(&str, bool, Option<&str>)] = &[
        (
            "diff --git a/link b/link\nnew file mode 120000\nindex 0..1\n--- /dev/null\n\
             +++ b/link\n@@ -0,0 +1 @@\n+../.git\n\\ No newline at end of file\n",
            true,
            Some("../.git"),
        ),
        (
            "diff --git a/link b/link\nindex 1..2 120000\n--- a/link\n+++ b/link\n\
             @@ -1 +1 @@\n-old\n\\ No newline at end of file\n+/etc/shadow\n\
             \\ No newline at end of file\n",
            true,
            Some("/etc/shadow"),
        ),
        (
            "diff --git a/f b/f\nold mode 100644\nnew mode 120000\n",
            true,
            None,
        ),
        (
            "diff --git a/two b/two\nnew file mode 120000\nindex 0..1\n--- /dev/null\n\
             +++ b/two\n@@ -0,0 +1,2 @@\n+a\n+b\n",
            true,
            None,
        ),
        (
            "diff --git a/link b/link\ndeleted file mode 120000\nindex 1..0\n--- a/link\n\
             +++ /dev/null\n@@ -1 +0,0 @@\n-x\n\\ No newline at end of file\n",
            false,
            None,
        ),
        // Not what git writes (a type change is a deletion and an addition): judged a symlink
        // whose target is not spelled out, so it is refused.
        (
            "diff --git a/link b/link\nold mode 120000\nnew mode 100644\n",
            true,
            None,
        ),
        (MODIFY, false, None),
        // git reads modes as octal numbers: these are symlinks too.
        (
            "diff --git a/l b/l\nindex 1..2 0120000\n--- a/l\n+++ b/l\n@@ -1 +1 @@\n-a\n+/etc\n",
            true,
            Some("/etc"),
        ),
        (
            "diff --git a/l b/l\nnew file mode 0127777\nindex 0..1\n--- /dev/null\n+++ b/l\n\
             @@ -0,0 +1 @@\n+/etc\n",
            true,
            Some("/etc"),
        ),
    ];
    for (text, symlink, target) in cases {
        let files = split(text.as_bytes()).unwrap();
        assert_eq!(files[0].symlink, *symlink, "{text}");
        assert_eq!(files[0].link_target.as_deref(), *target, "{text}");
    }
}
