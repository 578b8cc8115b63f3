//! `.ultraplanignore` at the repository's root: paths the user keeps out of bundles, in
//! `.gitignore` syntax. It wins over git: a tracked file it matches stays out too (a large
//! data file committed to the repository, say).

use std::path::Path;

use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The file's name, at the bundle root.
pub const FILE_NAME: &str = ".ultraplanignore";

/// The matcher of `root`'s `.ultraplanignore`; `None` when there is none (or it cannot be
/// read, which is logged: the bundle then holds what git would send).
pub fn load(root: &Path) -> Option<Gitignore> {
    let path = root.join(FILE_NAME);
    if !path.is_file() {
        return None;
    }
    let mut builder = GitignoreBuilder::new(root);
    if let Some(error) = builder.add(&path) {
        tracing::warn!(%error, "cannot read .ultraplanignore; it is not applied");
        return None;
    }
    match builder.build() {
        Ok(matcher) => Some(matcher),
        Err(error) => {
            tracing::warn!(%error, "cannot use .ultraplanignore; it is not applied");
            None
        }
    }
}

/// Whether `rel` (relative to the root) is kept out by `matcher`.
pub fn ignores(matcher: &Gitignore, rel: &Path) -> bool {
    matcher.matched_path_or_any_parents(rel, false).is_ignore()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_files_and_everything_under_directories() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(
            root.path().join(FILE_NAME),
            "# big things\n*.bin\n/data/\n!keep.bin\n",
        )
        .unwrap();
        let matcher = load(root.path()).expect("loaded");
        let cases = [
            ("a.bin", true),
            ("deep/b.bin", true),
            ("keep.bin", false),
            ("data/x.csv", true),
            ("data/sub/y.csv", true),
            ("src/data/z.csv", false),
            ("src/lib.rs", false),
        ];
        for (path, want) in cases {
            assert_eq!(ignores(&matcher, Path::new(path)), want, "{path}");
        }
    }

    #[test]
    fn no_file_no_matcher() {
        let root = tempfile::tempdir().unwrap();
        assert!(load(root.path()).is_none());
    }
}
