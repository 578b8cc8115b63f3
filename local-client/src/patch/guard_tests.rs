//! Tests of the patch guard's rules.

use super::*;
use ultraplan_protocol::patch::FileChange;

fn file(path: &str) -> FilePatch {
    FilePatch {
        path: path.into(),
        from: None,
        change: FileChange::Added,
        additions: 1,
        deletions: 0,
        binary: false,
        new_mode: None,
        symlink: false,
        link_target: None,
        text: Vec::new(),
    }
}

fn link(path: &str, target: &str) -> FilePatch {
    FilePatch {
        symlink: true,
        link_target: Some(target.into()),
        ..file(path)
    }
}

#[test]
fn dot_git_in_every_spelling() {
    let cases = [
        (".git", true),
        (".GIT", true),
        (".Git", true),
        (".git ", true),
        (".git.", true),
        (".git. . ", true),
        (".g\u{200c}it", true),
        ("\u{feff}.git", true),
        (".git:stream", true),
        ("GIT~1", true),
        (".gitignore", false),
        (".github", false),
        ("git", false),
        ("x.git", false),
    ];
    for (component, want) in cases {
        assert_eq!(is_dot_git(component), want, "{component:?}");
    }
}

#[test]
fn paths_that_may_not_be_written() {
    let cases = [
        ("src/lib.rs", None),
        ("docs/.gitignore", None),
        ("", Some("an empty path")),
        ("/etc/passwd", Some("an absolute path")),
        (".git/hooks/post-merge", Some("a path into .git")),
        (".GIT/config", Some("a path into .git")),
        ("sub/.git /hooks/x", Some("a path into .git")),
        (
            "./.git/hooks/x",
            Some("a path with a `.` or `..` component"),
        ),
        (
            "a/../.git/hooks/x",
            Some("a path with a `.` or `..` component"),
        ),
        ("../outside", Some("a path with a `.` or `..` component")),
        ("a//b", Some("a path with an empty component")),
        ("dir/", Some("a path with an empty component")),
    ];
    for (path, want) in cases {
        assert_eq!(path_problem(path), want, "{path:?}");
    }
}

#[test]
fn symlink_targets() {
    type Case<'a> = (&'a str, &'a str, Result<&'a [&'a str], &'a str>);
    let cases: &[Case<'_>] = &[
        ("link", "src", Ok(&["src"])),
        (
            "docs/logo",
            "../assets/logo.png",
            Ok(&["assets", "assets/logo.png"]),
        ),
        ("a/b/c", "./../d", Ok(&["a/d"])),
        ("top", ".", Ok(&[])),
        ("leak", "/etc/shadow", Err("absolute")),
        ("link", "../repo/.git/hooks", Err("leaves the repository")),
        ("docs/assets", "../.git", Err("is in .git")),
        ("docs/assets", "../.GIT/hooks", Err("is in .git")),
        ("a/b", "../../..", Err("leaves the repository")),
        ("a/b", "../../x/../../y", Err("leaves the repository")),
        ("x", "", Err("empty target")),
    ];
    for (link, target, want) in cases {
        let got = resolve_target(link, target);
        match (want, &got) {
            (Ok(visited), Ok(v)) => assert_eq!(v, visited, "{link} -> {target}"),
            (Err(needle), Err(e)) => assert!(e.contains(needle), "{link} -> {target}: {e}"),
            _ => panic!("{link} -> {target}: {got:?}"),
        }
    }
}

#[test]
fn the_patch_alone() {
    let unspelled = FilePatch {
        symlink: true,
        ..file("blob-link")
    };
    type Case<'a> = (Vec<FilePatch>, Vec<(&'a str, &'a str)>);
    let cases: Vec<Case<'_>> = vec![
        (
            vec![file("src/a.rs"), link("docs/logo", "../assets/logo.png")],
            vec![],
        ),
        (
            vec![link("link", "../repo/.git/hooks"), file("link/post-merge")],
            vec![
                ("link", "leaves the repository"),
                (
                    "link/post-merge",
                    "through the symlink link that this patch creates",
                ),
            ],
        ),
        (
            vec![link("leak", "/etc/shadow")],
            vec![("leak", "absolute target")],
        ),
        (
            vec![file(".git/hooks/pre-commit")],
            vec![(".git/hooks/pre-commit", "into .git")],
        ),
        (vec![unspelled], vec![("blob-link", "does not spell out")]),
        (
            vec![link("a", "b"), link("b", "src"), file("src/x")],
            vec![("a", "goes through the symlink b")],
        ),
        (
            vec![FilePatch {
                from: Some(".git/config".into()),
                change: FileChange::Modified,
                ..file("config")
            }],
            vec![(".git/config", "into .git")],
        ),
    ];
    for (files, want) in cases {
        let got = check_patch(&files);
        assert_eq!(got.len(), want.len(), "{got:?}");
        for (r, (path, needle)) in got.iter().zip(&want) {
            assert_eq!(r.path, *path, "{got:?}");
            assert!(r.reason.contains(needle), "{r:?} lacks {needle}");
        }
    }
}

#[test]
fn against_a_tree() {
    let symlinks: HashSet<String> = ["docs/assets", "vendor"].map(String::from).into();
    let is_symlink = |p: &str| symlinks.contains(p);
    let files = [
        file("docs/assets/hooks/pre-commit"),
        file("docs/readme.md"),
        file("vendor"),
        link("shortcut", "vendor/lib"),
        link("ok", "docs/readme.md"),
        FilePatch {
            from: Some("vendor".into()),
            change: FileChange::Modified,
            ..file("deep/moved")
        },
        FilePatch {
            change: FileChange::Modified,
            ..file("vendor")
        },
    ];
    let got = check_tree(&files, &is_symlink);
    let paths: Vec<&str> = got.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "deep/moved",
            "docs/assets/hooks/pre-commit",
            "shortcut",
            "vendor"
        ],
        "{got:?}"
    );
    assert!(got[0].reason.contains("moves or copies the symlink vendor"));
    assert!(got[1].reason.contains("existing symlink docs/assets"));
    let through = "goes through the existing symlink vendor";
    assert!(got[2].reason.contains(through));
    assert!(got[3].reason.contains("changes the existing symlink"));
}

#[test]
fn merged_listing_and_disk() {
    let merged = merge(vec![
        Refusal::new("b", "one"),
        Refusal::new("a", "x"),
        Refusal::new("b", "two"),
        Refusal::new("b", "one"),
    ]);
    assert_eq!(
        merged,
        [Refusal::new("a", "x"), Refusal::new("b", "one; two")]
    );
    let listing = b"100644 blob 1111\tsrc/a.rs\x00120000 blob 2222\tdocs/assets\x00\
                    040000 tree 3333\tdocs\x00120000 blob 4444\tsp ace\x00";
    let links = symlinks_in_listing(listing);
    assert_eq!(links.len(), 2);
    assert!(links.contains("docs/assets") && links.contains("sp ace"));

    let dir = tempfile::TempDir::new().unwrap();
    std::fs::create_dir(dir.path().join("real")).unwrap();
    std::os::unix::fs::symlink("/tmp", dir.path().join("real/link")).unwrap();
    let is_symlink = on_disk(dir.path());
    assert!(is_symlink("real/link"));
    assert!(!is_symlink("real"));
    assert!(!is_symlink("missing"));
    let got = check_tree(&[file("real/link/x")], &is_symlink);
    assert_eq!(
        got,
        [Refusal::new(
            "real/link/x",
            "written through the existing symlink real/link"
        )]
    );
}
