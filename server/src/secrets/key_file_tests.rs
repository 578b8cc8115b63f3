use std::os::unix::fs::PermissionsExt as _;

use super::*;

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).expect("meta").permissions().mode() & 0o777
}

#[test]
fn an_absent_key_is_made_private_and_then_reused() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("nested/secrets.key");
    let first = load_or_create(&path).expect("create");
    assert_eq!(std::fs::read(&path).expect("read").len(), KEY_LEN);
    assert_eq!(mode(&path), 0o600);
    let sealed = first.seal("u", "A", b"v").expect("seal");
    let again = load_or_create(&path).expect("load");
    assert_eq!(again.open("u", "A", &sealed).expect("open"), b"v");
    let names: Vec<_> = std::fs::read_dir(path.parent().expect("dir"))
        .expect("list")
        .map(|e| e.expect("entry").file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("secrets.key")]);
}

#[test]
fn unusable_key_files_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().expect("dir");
    let cases: [(&str, usize, u32, &str); 5] = [
        ("short", 16, 0o600, "holds 16 bytes"),
        ("long", 33, 0o600, "holds 33 bytes"),
        ("empty", 0, 0o400, "holds 0 bytes"),
        ("group", 32, 0o640, "chmod 600"),
        ("world", 32, 0o604, "chmod 600"),
    ];
    for (name, len, file_mode, want) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, vec![1u8; len]).expect("write");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(file_mode)).expect("chmod");
        let error = load_or_create(&path).expect_err(name).to_string();
        assert!(error.contains(want), "{name}: {error}");
        assert_eq!(
            std::fs::read(&path).expect("kept").len(),
            len,
            "{name} untouched"
        );
    }
    let error = load_or_create(dir.path())
        .expect_err("a directory")
        .to_string();
    assert!(error.contains("not a regular file"), "{error}");
}

#[test]
fn the_key_file_loads_once_and_shares_its_cipher() {
    let dir = tempfile::tempdir().expect("dir");
    let file = KeyFile::new(dir.path().join("secrets.key"));
    let a = file.cipher().expect("cipher");
    let b = file.cipher().expect("cipher");
    assert!(Arc::ptr_eq(&a, &b));
    assert_eq!(file.path(), dir.path().join("secrets.key"));
}
