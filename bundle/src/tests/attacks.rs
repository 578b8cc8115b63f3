//! Hostile archives: each is refused with its exact code, a message naming the offending entry,
//! and leaves nothing behind, inside or outside the store.

use tar::EntryType;

use super::support::{CODECS, Env, Tar};

struct Attack {
    name: &'static str,
    tar: Vec<u8>,
    code: &'static str,
    /// Text the error message must contain (the offending entry).
    mentions: String,
}

fn attack(name: &'static str, tar: Tar, code: &'static str, mentions: &str) -> Attack {
    Attack {
        name,
        tar: tar.finish(),
        code,
        mentions: mentions.to_owned(),
    }
}

/// Every attack, aimed at `env` (absolute paths point into its temp dir).
fn attacks(env: &Env) -> Vec<Attack> {
    let abs = env.tmp.path().join("abs_escape.txt").display().to_string();
    let canary = env
        .tmp
        .path()
        .join("outside/canary.txt")
        .display()
        .to_string();
    let long_traversal = format!("../../../../{}", "x".repeat(120));
    let mut v = vec![
        // Paths.
        attack(
            "absolute path",
            Tar::new().file(&abs, b"pwned"),
            "absolute_path",
            &abs,
        ),
        attack(
            "nested repository",
            Tar::new().file("vendor/x/.git/config", b"[core]\n\tfsmonitor = /tmp/pwn\n"),
            "invalid_path",
            "vendor/x/.git/config",
        ),
        // Found by the property test (props.rs): `a/.` became a file `a`, where GNU tar refuses.
        attack(
            "file named like a directory",
            Tar::new().file("a/.", b"x"),
            "invalid_path",
            "a/.",
        ),
        attack(
            "symlink named like a directory",
            Tar::new().dir("d/").symlink("d/l/", "../d"),
            "invalid_path",
            "d/l/",
        ),
        attack(
            "traversal",
            Tar::new().file("../../../../escaped.txt", b"x"),
            "path_traversal",
            "../../../../escaped.txt",
        ),
        attack(
            "nested traversal",
            Tar::new()
                .dir("a/")
                .file("a/../../../../../escaped.txt", b"x"),
            "path_traversal",
            "a/../../../../../escaped.txt",
        ),
        attack(
            "traversal in a GNU long name",
            Tar::new().file(&long_traversal, b"x"),
            "path_traversal",
            "../../../../xxxx",
        ),
        attack(
            "traversal in a pax path",
            Tar::new()
                .pax(false, &[("path", b"../../../../pax_escaped.txt")])
                .file("innocent", b"x"),
            "path_traversal",
            "../../../../pax_escaped.txt",
        ),
        attack(
            "backslash traversal",
            Tar::new().file("a\\..\\..\\evil.txt", b"x"),
            "path_traversal",
            "evil.txt",
        ),
        attack(
            "windows drive",
            Tar::new().file("C:\\evil.txt", b"x"),
            "absolute_path",
            "evil.txt",
        ),
        attack(
            "windows UNC",
            Tar::new().file("\\\\server\\share\\evil.txt", b"x"),
            "absolute_path",
            "evil.txt",
        ),
        attack(
            "the root as a file",
            Tar::new().file(".", b"x"),
            "invalid_path",
            "\".\"",
        ),
        // Writing through symlinks.
        attack(
            "write through an extracted symlink",
            Tar::new()
                .dir("sub/")
                .symlink("d", "sub")
                .file("d/evil.txt", b"x"),
            "symlink_in_path",
            "d/evil.txt",
        ),
        attack(
            "write through a self-referencing symlink",
            Tar::new()
                .dir("a/")
                .symlink("a/l", ".")
                .file("a/l/l/x", b"x"),
            "symlink_in_path",
            "a/l/l/x",
        ),
        attack(
            "file replaced by a symlink",
            Tar::new().file("x", b"x").symlink("x", "y"),
            "path_conflict",
            "\"x\"",
        ),
        attack(
            "directory over a symlink",
            Tar::new().dir("sub/").symlink("x", "sub").dir("x/"),
            "path_conflict",
            "x/",
        ),
        attack(
            "file under a file",
            Tar::new().file("f", b"x").file("f/g", b"x"),
            "path_conflict",
            "f/g",
        ),
        attack(
            "file over a directory",
            Tar::new().dir("d/").file("d", b"x"),
            "path_conflict",
            "\"d\"",
        ),
        // Symlinks.
        attack(
            "absolute symlink",
            Tar::new().symlink("etc", "/etc"),
            "link_escape",
            "/etc",
        ),
        attack(
            "symlink climbing out",
            Tar::new().dir("a/").symlink("a/up", "../../../../.."),
            "link_escape",
            "a/up",
        ),
        attack(
            "symlink to the parent of the root",
            Tar::new().symlink("up", ".."),
            "link_escape",
            "\"up\"",
        ),
        attack(
            "absolute symlink in a pax linkpath",
            Tar::new()
                .pax(false, &[("linkpath", b"/etc/passwd")])
                .symlink("innocent", "ok"),
            "link_escape",
            "/etc/passwd",
        ),
        attack(
            "symlink chain, escaping link last",
            Tar::new()
                .dir("a/")
                .dir("a/b/")
                .symlink("a/b/c", "../..")
                .symlink("d", "a/b/c/.."),
            "link_escape",
            "a/b/c/..",
        ),
        attack(
            "symlink chain, escaping link first (caught after extraction)",
            Tar::new()
                .dir("a/")
                .dir("a/b/")
                .symlink("d", "a/b/c/..")
                .symlink("a/b/c", "../.."),
            "link_escape",
            "a/b/c/..",
        ),
        attack(
            "symlink with an empty target",
            Tar::new().symlink("empty", ""),
            "invalid_link",
            "empty",
        ),
        // Hard links.
        attack(
            "absolute hard link",
            Tar::new().hardlink("h", &canary),
            "link_escape",
            &canary,
        ),
        attack(
            "hard link climbing out",
            Tar::new().hardlink("h", "../../../../outside/canary.txt"),
            "link_escape",
            "../../../../outside/canary.txt",
        ),
        attack(
            "hard link through a symlink",
            Tar::new()
                .dir("sub/")
                .file("sub/f", b"x")
                .symlink("s", "sub")
                .hardlink("h", "s/f"),
            "link_escape",
            "s/f",
        ),
        attack(
            "hard link to a missing file",
            Tar::new().hardlink("h", "missing"),
            "invalid_link",
            "missing",
        ),
        attack(
            "hard link to a directory",
            Tar::new().dir("d/").hardlink("h", "d"),
            "invalid_link",
            "\"h\"",
        ),
        attack(
            "hard link to a symlink",
            Tar::new()
                .file("f", b"x")
                .symlink("s", "f")
                .hardlink("h", "s"),
            "invalid_link",
            "\"h\"",
        ),
        // Special files.
        attack(
            "character device",
            Tar::new().special("dev/null", EntryType::Char),
            "special_file",
            "dev/null",
        ),
        attack(
            "block device",
            Tar::new().special("dev/sda", EntryType::Block),
            "special_file",
            "dev/sda",
        ),
        attack(
            "fifo",
            Tar::new().special("pipe", EntryType::Fifo),
            "special_file",
            "pipe",
        ),
        attack(
            "unknown entry type",
            Tar::new().special("volume", EntryType::new(b'V')),
            "special_file",
            "volume",
        ),
        // Malformed tar inside valid gzip.
        attack(
            "data after the end-of-archive marker",
            Tar::new()
                .file("a", b"x")
                .bytes(&[0; 1024])
                .bytes(&[7; 512]),
            "malformed_archive",
            "end of the tar archive",
        ),
        attack(
            "oversized GNU long name (buffered by the tar crate)",
            Tar::new()
                .raw(
                    EntryType::GNULongName,
                    b"././@LongLink",
                    b"",
                    0o644,
                    &vec![b'a'; 2 << 20],
                )
                .file("x", b"x"),
            "malformed_archive",
            "exceed",
        ),
    ];
    let mut bad_checksum = Tar::new().file("a", b"x").unterminated();
    bad_checksum[0] = b'b';
    v.push(Attack {
        name: "header checksum mismatch",
        tar: Tar::new().bytes(&bad_checksum).finish(),
        code: "malformed_archive",
        mentions: "checksum".to_owned(),
    });
    v.push(Attack {
        name: "entry data cut short",
        tar: Tar::new()
            .header_only(EntryType::Regular, "short", 1000)
            .bytes(b"0123456789")
            .unterminated(),
        code: "malformed_archive",
        mentions: String::new(),
    });
    v
}

#[test]
fn hostile_archives_are_refused_and_leave_nothing() {
    let probe = Env::new();
    let count = attacks(&probe).len();
    for (i, codec) in (0..count).flat_map(|i| CODECS.map(|codec| (i, codec))) {
        let env = Env::new();
        let Attack {
            name,
            tar,
            code,
            mentions,
        } = attacks(&env).swap_remove(i);
        let name = &codec.case(name);
        let err = match env.ingest(&codec.compress(&tar)) {
            Ok(stats) => panic!("{name}: accepted ({stats:?})"),
            Err(err) => err,
        };
        assert_eq!(err.code(), code, "{name}: wrong refusal: {err}");
        assert!(err.is_client_error(), "{name}: not a client error: {err}");
        assert!(
            err.to_string().contains(&mentions),
            "{name}: {err:?} doesn't mention {mentions:?}"
        );
        env.assert_untouched(name);
    }
}
