//! Pure parsing of `git diff --numstat -z` and `--name-status -z` into per-file stats.

use std::collections::BTreeMap;

use ultraplan_protocol::patch::{FileChange, PatchFile, PatchSummary};

/// `(additions, deletions)` per path; `None` for binary files (`-\t-`).
fn numstat(raw: &[u8]) -> BTreeMap<String, Option<(u64, u64)>> {
    let mut out = BTreeMap::new();
    for record in raw.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let text = String::from_utf8_lossy(record);
        let mut parts = text.splitn(3, '\t');
        let (Some(add), Some(del), Some(path)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let stats = add.parse().ok().zip(del.parse().ok());
        out.insert(path.to_owned(), stats);
    }
    out
}

/// `(change, path)` pairs: records alternate status and path.
fn name_status(raw: &[u8]) -> Vec<(FileChange, String)> {
    let fields: Vec<String> = raw
        .split(|b| *b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    fields
        .chunks(2)
        .filter_map(|pair| {
            let [status, path] = pair else { return None };
            let change = match status.chars().next()? {
                'A' => FileChange::Added,
                'D' => FileChange::Deleted,
                'T' => FileChange::TypeChanged,
                _ => FileChange::Modified,
            };
            Some((change, path.clone()))
        })
        .collect()
}

/// The summary of a diff from its `--name-status -z` and `--numstat -z` outputs.
pub fn summarize(name_status_raw: &[u8], numstat_raw: &[u8], diff_bytes: usize) -> PatchSummary {
    let stats = numstat(numstat_raw);
    let files: Vec<PatchFile> = name_status(name_status_raw)
        .into_iter()
        .map(|(change, path)| {
            let counts = stats.get(&path).copied().flatten();
            PatchFile {
                binary: stats.contains_key(&path) && counts.is_none(),
                additions: counts.map_or(0, |c| c.0),
                deletions: counts.map_or(0, |c| c.1),
                change,
                path,
            }
        })
        .collect();
    PatchSummary {
        additions: files.iter().map(|f| f.additions).sum(),
        deletions: files.iter().map(|f| f.deletions).sum(),
        files,
        bytes: u64::try_from(diff_bytes).unwrap_or(u64::MAX),
        base_commit: None,
        left_out: Vec::new(),
        verdict: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(path, change, additions, deletions, binary)`
    type Row<'a> = (&'a str, FileChange, u64, u64, bool);

    #[test]
    fn parses_git_outputs() {
        let cases: [(&[u8], &[u8], Vec<Row>); 4] = [
            (b"", b"", vec![]),
            (
                b"M\0src/a.rs\0A\0new file.txt\0",
                b"3\t1\tsrc/a.rs\x002\t0\tnew file.txt\0",
                vec![
                    ("src/a.rs", FileChange::Modified, 3, 1, false),
                    ("new file.txt", FileChange::Added, 2, 0, false),
                ],
            ),
            (
                b"A\0logo.png\0D\0old.txt\0",
                b"-\t-\tlogo.png\x000\t4\told.txt\0",
                vec![
                    ("logo.png", FileChange::Added, 0, 0, true),
                    ("old.txt", FileChange::Deleted, 0, 4, false),
                ],
            ),
            (
                b"T\0run.sh\0M\0tab\there\0",
                b"0\t0\trun.sh\x001\t1\ttab\there\0",
                vec![
                    ("run.sh", FileChange::TypeChanged, 0, 0, false),
                    ("tab\there", FileChange::Modified, 1, 1, false),
                ],
            ),
        ];
        for (names, stats, want) in cases {
            let summary = summarize(names, stats, 10);
            let got: Vec<_> = summary
                .files
                .iter()
                .map(|f| {
                    (
                        f.path.as_str(),
                        f.change,
                        f.additions,
                        f.deletions,
                        f.binary,
                    )
                })
                .collect();
            assert_eq!(got, want);
            assert_eq!(summary.additions, want.iter().map(|w| w.2).sum::<u64>());
            assert_eq!(summary.deletions, want.iter().map(|w| w.3).sum::<u64>());
            assert_eq!(summary.bytes, 10);
        }
    }
}
