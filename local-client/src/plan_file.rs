//! "Save to file": a plan goes to `.ultraplan/plans/<date>-<slug>.md` in the repository root.

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

#[cfg(test)]
mod tests {
    use super::*;

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
