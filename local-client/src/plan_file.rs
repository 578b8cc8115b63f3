//! "Save to file": a plan goes to `.ultraplan/plans/<date>-<slug>.md` in the repository root.
//! A plan left unreviewed past the session's time limit goes to `.ultraplan/plans/<id>.md`
//! ([`save_unreviewed`]), written atomically and never through a symlink.

use std::path::{Path, PathBuf};

/// Longest slug kept.
const MAX_SLUG: usize = 48;

/// Lower-case ASCII words joined by dashes; `plan` when nothing is left.
pub fn slug(title: &str) -> String {
    let mut out = String::new();
    for word in title
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if out.len() + word.len() + 1 > MAX_SLUG {
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&word.to_ascii_lowercase());
    }
    if out.is_empty() {
        "plan".to_owned()
    } else {
        out
    }
}

/// Today's UTC date, `YYYY-MM-DD`.
pub fn today() -> String {
    let date = time::OffsetDateTime::now_utc().date();
    format!(
        "{:04}-{:02}-{:02}",
        date.year(),
        u8::from(date.month()),
        date.day()
    )
}

/// The folder plans are saved in.
pub fn plans_dir(repo_root: &Path) -> PathBuf {
    repo_root.join(".ultraplan").join("plans")
}

/// Writes `plan` as `<date>-<slug>.md` (then `-2`, `-3`, … if another plan has that name; the
/// same plan saved twice keeps one file). Returns the path.
pub fn save(repo_root: &Path, date: &str, title: &str, plan: &str) -> std::io::Result<PathBuf> {
    let dir = plans_dir(repo_root);
    std::fs::create_dir_all(&dir)?;
    let stem = format!("{date}-{}", slug(title));
    let mut text = plan.trim_end().to_owned();
    text.push('\n');
    for n in 1u32.. {
        let name = if n == 1 {
            format!("{stem}.md")
        } else {
            format!("{stem}-{n}.md")
        };
        let path = dir.join(name);
        match std::fs::read_to_string(&path) {
            Ok(existing) if existing == text => return Ok(path),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::write(&path, &text)?;
                return Ok(path);
            }
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("no free file name"))
}

/// Longest session id used as a file name.
const MAX_ID: usize = 128;

/// `<id>.md` for a session id made only of ASCII letters, digits, `-` and `_`; `None` for
/// anything else (a path, dots, an empty id).
pub fn session_file_name(session_id: &str) -> Option<String> {
    let safe = !session_id.is_empty()
        && session_id.len() <= MAX_ID
        && session_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    safe.then(|| format!("{session_id}.md"))
}

/// Makes `dir` a real directory (not a symlink), creating it when missing.
fn real_dir(dir: &Path) -> std::io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(std::io::Error::other(format!(
            "{} is not a directory (or is a symlink); not writing through it",
            dir.display()
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(dir),
        Err(e) => Err(e),
    }
}

/// Writes the plan of session `session_id` that timed out unreviewed to
/// `<repo_root>/.ultraplan/plans/<id>.md`: a temporary file in the same folder renamed into
/// place, refusing symlinked folders (so it never lands outside the repository), replacing a
/// symlink at the file's name rather than writing through it. Returns the path.
pub fn save_unreviewed(repo_root: &Path, session_id: &str, plan: &str) -> std::io::Result<PathBuf> {
    use std::io::Write;
    let name = session_file_name(session_id).ok_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("session id {session_id:?} cannot name a file"),
        )
    })?;
    if !std::fs::metadata(repo_root)?.is_dir() {
        return Err(std::io::Error::other(format!(
            "{} is not a directory",
            repo_root.display()
        )));
    }
    let dot = repo_root.join(".ultraplan");
    real_dir(&dot)?;
    let dir = plans_dir(repo_root);
    real_dir(&dir)?;
    let path = dir.join(&name);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let temp = dir.join(format!(".{name}.{}-{nanos}.tmp", std::process::id()));
    let written = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)?;
        file.write_all(plan.trim_end().as_bytes())?;
        file.write_all(b"\n")?;
        file.sync_all()?;
        std::fs::rename(&temp, &path)
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written.map(|()| path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_session_ids_name_a_file() {
        let table = [
            ("sess_01HX-abc", Some("sess_01HX-abc.md")),
            ("", None),
            ("..", None),
            ("../evil", None),
            ("a/b", None),
            ("a.b", None),
            ("a\0b", None),
            ("é", None),
        ];
        for (id, want) in table {
            assert_eq!(session_file_name(id).as_deref(), want, "{id:?}");
        }
        assert_eq!(session_file_name(&"a".repeat(MAX_ID + 1)), None);
    }

    #[test]
    fn an_unreviewed_plan_is_saved_by_session_id_and_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = save_unreviewed(dir.path(), "s1", "# Plan\n\n").unwrap();
        assert_eq!(path, dir.path().join(".ultraplan/plans/s1.md"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "# Plan\n");
        save_unreviewed(dir.path(), "s1", "# Newer").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "# Newer\n");
        // No temporary file is left behind.
        let names: Vec<_> = std::fs::read_dir(plans_dir(dir.path()))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["s1.md"]);
        assert!(save_unreviewed(dir.path(), "../s1", "x").is_err());
    }

    #[test]
    fn an_unreviewed_plan_never_goes_through_a_symlink() {
        use std::os::unix::fs::symlink;
        let outside = tempfile::tempdir().unwrap();
        // A symlinked `.ultraplan` folder is refused.
        let repo = tempfile::tempdir().unwrap();
        symlink(outside.path(), repo.path().join(".ultraplan")).unwrap();
        assert!(save_unreviewed(repo.path(), "s1", "# Plan").is_err());
        // So is a symlinked `plans` folder.
        let repo = tempfile::tempdir().unwrap();
        std::fs::create_dir(repo.path().join(".ultraplan")).unwrap();
        symlink(outside.path(), plans_dir(repo.path())).unwrap();
        assert!(save_unreviewed(repo.path(), "s1", "# Plan").is_err());
        // A symlink at the file's name is replaced, its target untouched.
        let repo = tempfile::tempdir().unwrap();
        let target = outside.path().join("victim");
        std::fs::write(&target, "keep").unwrap();
        std::fs::create_dir_all(plans_dir(repo.path())).unwrap();
        let link = plans_dir(repo.path()).join("s1.md");
        symlink(&target, &link).unwrap();
        save_unreviewed(repo.path(), "s1", "# Plan").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
        assert!(!std::fs::symlink_metadata(&link).unwrap().is_symlink());
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "# Plan\n");
        assert!(std::fs::read_dir(outside.path()).unwrap().count() == 1);
    }

    #[test]
    fn slugs_are_short_and_safe() {
        assert_eq!(slug("Fix the auth flow!"), "fix-the-auth-flow");
        assert_eq!(slug("../../etc/passwd"), "etc-passwd");
        assert_eq!(slug("日本語"), "plan");
        assert!(slug(&"word ".repeat(40)).len() <= MAX_SLUG);
    }

    #[test]
    fn saving_twice_keeps_one_file_and_clashes_get_a_number() {
        let dir = tempfile::tempdir().unwrap();
        let a = save(dir.path(), "2026-01-02", "Fix auth", "# Plan\n").unwrap();
        assert!(a.ends_with(".ultraplan/plans/2026-01-02-fix-auth.md"));
        assert_eq!(
            save(dir.path(), "2026-01-02", "Fix auth", "# Plan").unwrap(),
            a
        );
        let b = save(dir.path(), "2026-01-02", "Fix auth", "# Other").unwrap();
        assert!(b.ends_with("2026-01-02-fix-auth-2.md"));
        assert_eq!(std::fs::read_to_string(b).unwrap(), "# Other\n");
        assert_eq!(today().len(), 10);
    }
}
