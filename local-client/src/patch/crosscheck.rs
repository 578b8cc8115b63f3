//! The parser checked against git's own reading of the same bytes: `git apply --numstat
//! --summary -z` (which applies nothing) lists every file git would touch. A file git sees
//! that the parser does not — a plain `---`/`+++` section hidden after a hunk, text before the
//! first `diff --git` — or one it reads differently, is refused: what the report shows and
//! what git applies must be the same files.

use std::borrow::Borrow;
use std::collections::HashSet;

use super::git::{Git, GitError};
use super::guard::Refusal;
use super::parse::FilePatch;

/// One file as git reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Lines added and removed; `None` for a binary patch.
    pub counts: Option<(u64, u64)>,
    /// The path git writes (the new one; the old one for a deletion), as raw bytes.
    pub name: Vec<u8>,
}

/// What git reads in a patch.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GitReading {
    pub files: Vec<Seen>,
    /// Paths git would leave as symlinks (`create mode 120000`, `mode change … => 120000`).
    pub symlinks: Vec<Vec<u8>>,
}

/// Parses `git apply --numstat --summary -z` output: NUL-terminated numstat records
/// (`ADDED\tDELETED\tNAME`), then newline-terminated summary lines.
pub fn parse_reading(out: &[u8]) -> Option<GitReading> {
    let mut reading = GitReading::default();
    let mut rest = out;
    while rest
        .first()
        .is_some_and(|b| b.is_ascii_digit() || *b == b'-')
    {
        let end = rest.iter().position(|&b| b == 0)?;
        let record = &rest[..end];
        rest = &rest[end + 1..];
        let mut fields = record.splitn(3, |&b| b == b'\t');
        let (added, deleted, name) = (fields.next()?, fields.next()?, fields.next()?);
        let count = |f: &[u8]| std::str::from_utf8(f).ok()?.parse::<u64>().ok();
        let counts = match (added, deleted) {
            (b"-", b"-") => None,
            (a, d) => Some((count(a)?, count(d)?)),
        };
        reading.files.push(Seen {
            counts,
            name: name.to_vec(),
        });
    }
    for line in rest.split(|&b| b == b'\n') {
        let name = line.strip_prefix(b" create mode 120000 ").or_else(|| {
            let at = line.windows(10).position(|w| w == b"=> 120000 ")?;
            line.starts_with(b" mode change ").then(|| &line[at + 10..])
        });
        if let Some(name) = name {
            reading.symlinks.push(name.to_vec());
        }
    }
    Some(reading)
}

/// The files git reads that the parser does not, or reads differently. Empty when they agree.
pub fn compare<F: Borrow<FilePatch>>(files: &[F], reading: &GitReading) -> Vec<Refusal> {
    let files: Vec<&FilePatch> = files.iter().map(Borrow::borrow).collect();
    let mut refusals = Vec::new();
    let ours: HashSet<&str> = files.iter().map(|f| f.path.as_str()).collect();
    for (i, seen) in reading.files.iter().enumerate() {
        let Ok(name) = std::str::from_utf8(&seen.name) else {
            refusals.push(Refusal::new(
                &String::from_utf8_lossy(&seen.name),
                "a file name that is not UTF-8",
            ));
            continue;
        };
        let Some(file) = files.get(i).filter(|f| f.path == name) else {
            let why = if ours.contains(name) {
                "git reads the patch's files in another order or number than ultraplan does"
            } else {
                "hidden in the patch: git would write it, but it is not a `diff --git` section"
            };
            refusals.push(Refusal::new(name, why));
            continue;
        };
        let agrees = match seen.counts {
            None => file.binary,
            Some((added, deleted)) => {
                !file.binary && added == file.additions && deleted == file.deletions
            }
        };
        if !agrees {
            refusals.push(Refusal::new(
                name,
                "git reads this file's patch differently than ultraplan does (text hidden after a hunk?)",
            ));
        }
    }
    for file in files.iter().skip(reading.files.len()) {
        refusals.push(Refusal::new(
            &file.path,
            "git does not read this section as a file's patch",
        ));
    }
    let links: HashSet<&str> = files
        .iter()
        .filter(|f| f.symlink)
        .map(|f| f.path.as_str())
        .collect();
    for name in &reading.symlinks {
        let name = String::from_utf8_lossy(name);
        if !links.contains(name.as_ref()) {
            refusals.push(Refusal::new(
                &name,
                "git reads a symlink here that ultraplan does not",
            ));
        }
    }
    super::guard::merge(refusals)
}

/// Runs git's reading of `patch` in `git`'s directory and compares it with `files`. A patch
/// git cannot read at all is refused as a whole.
pub fn check<F: Borrow<FilePatch>>(
    git: &Git,
    patch: &[u8],
    files: &[F],
) -> Result<Vec<Refusal>, GitError> {
    let out = git.run_with_input(
        &[
            "apply",
            "--numstat",
            "--summary",
            "-z",
            "--whitespace=nowarn",
        ],
        patch,
    )?;
    if !out.success {
        let why = out.stderr.lines().next().unwrap_or("no message").to_owned();
        return Ok(vec![Refusal::new(
            "(the whole patch)",
            format!("git cannot read it: {why}"),
        )]);
    }
    match parse_reading(&out.stdout) {
        Some(reading) => Ok(compare(files, &reading)),
        None => Ok(vec![Refusal::new(
            "(the whole patch)",
            "git's reading of it cannot be understood",
        )]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readings() {
        let out = b"1\t0\tevil\x1b]0;X\x001\t0\tlink\x00-\t-\tlogo.png\x000\t0\tsrc/a\x00 \
                    create mode 100644 evil\x1b]0;X\n create mode 120000 link\n \
                    mode change 100644 => 120000 was file\n rename old => new (100%)\n";
        let reading = parse_reading(out).unwrap();
        let names: Vec<&[u8]> = reading.files.iter().map(|s| s.name.as_slice()).collect();
        assert_eq!(
            names,
            [&b"evil\x1b]0;X"[..], b"link", b"logo.png", b"src/a"]
        );
        assert_eq!(reading.files[0].counts, Some((1, 0)));
        assert_eq!(reading.files[2].counts, None);
        assert_eq!(reading.symlinks, [b"link".to_vec(), b"was file".to_vec()]);
        assert_eq!(parse_reading(b""), Some(GitReading::default()));
        assert_eq!(parse_reading(b"1\t0\tunterminated"), None);
    }

    fn file(path: &str, additions: u64, symlink: bool) -> FilePatch {
        FilePatch {
            path: path.into(),
            from: None,
            change: ultraplan_protocol::patch::FileChange::Added,
            additions,
            deletions: 0,
            binary: false,
            new_mode: None,
            symlink,
            link_target: None,
            text: Vec::new(),
        }
    }

    fn seen(name: &str, added: u64) -> Seen {
        Seen {
            counts: Some((added, 0)),
            name: name.as_bytes().to_vec(),
        }
    }

    #[test]
    fn agreement_and_every_kind_of_disagreement() {
        let ours = [file("a", 1, false), file("link", 1, true)];
        let agree = GitReading {
            files: vec![seen("a", 1), seen("link", 1)],
            symlinks: vec![b"link".to_vec()],
        };
        assert_eq!(compare(&ours, &agree), []);
        // (git's reading, refused path, reason contains)
        let cases = [
            (
                GitReading {
                    files: vec![seen("a", 1), seen("link", 1), seen("link/post-merge", 2)],
                    symlinks: vec![b"link".to_vec()],
                },
                "link/post-merge",
                "hidden",
            ),
            (
                GitReading {
                    files: vec![seen("a", 3), seen("link", 1)],
                    symlinks: vec![b"link".to_vec()],
                },
                "a",
                "differently",
            ),
            (
                GitReading {
                    files: vec![seen("a", 1), seen("link", 1)],
                    symlinks: vec![b"link".to_vec(), b"a".to_vec()],
                },
                "a",
                "symlink",
            ),
            (
                GitReading {
                    files: vec![seen("a", 1)],
                    symlinks: vec![],
                },
                "link",
                "does not read",
            ),
            (
                GitReading {
                    files: vec![
                        Seen {
                            counts: Some((1, 0)),
                            name: b"caf\xe9".to_vec(),
                        },
                        seen("link", 1),
                    ],
                    symlinks: vec![b"link".to_vec()],
                },
                "caf\u{fffd}",
                "not UTF-8",
            ),
        ];
        for (reading, path, needle) in cases {
            let got = compare(&ours, &reading);
            let hit = got.iter().find(|r| r.path == path);
            assert!(
                hit.is_some_and(|r| r.reason.contains(needle)),
                "{path} {needle}: {got:?}"
            );
        }
    }
}
