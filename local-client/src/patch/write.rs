//! Writing a patch into a work tree: ONE `git apply` per tree (git checks every file before it
//! writes any, so it is all or nothing), never one per file. The exact bytes given to git are
//! read by git first and must be the files chosen; a 3-way merge is only ever asked for files
//! that exist in the tree (a new file is never merged over something already there).

use std::collections::HashSet;

use super::crosscheck;
use super::git::{Git, GitError};
use super::parse::FilePatch;
use super::preflight::{APPLY, MERGE_CONFLICT, Verdict};
use ultraplan_protocol::patch::FileChange;

/// Applies the files whose verdict says they apply (the others are left alone), in one
/// `git apply`. A 3-way merge needs the index; the merged paths are reset in it afterwards
/// so the result is, like a plain apply, only in the work tree.
pub fn apply(git: &Git, files: &[FilePatch], verdicts: &[Verdict]) -> Result<(), GitError> {
    let chosen: Vec<&FilePatch> = pick(files, verdicts, |v| v.applies());
    if chosen.is_empty() {
        return Ok(());
    }
    let merge = verdicts.contains(&Verdict::Merge);
    run_apply(git, &chosen, merge)?;
    if merge {
        unstage(git, chosen.iter().flat_map(|f| f.paths()))?;
    }
    Ok(())
}

/// In a fresh worktree: applies what applies AND leaves conflict markers in the files whose
/// 3-way merge conflicts, in the same single `git apply --3way`. Only files that exist in the
/// worktree's index are merged. Per file: whether conflict markers were left. When git will
/// not merge them, only what applies is applied (git wrote nothing on the failed attempt).
pub fn apply_leaving_conflicts(
    git: &Git,
    files: &[FilePatch],
    verdicts: &[Verdict],
) -> Result<Vec<bool>, GitError> {
    let indexed = index_paths(git)?;
    let mergeable = |f: &FilePatch, v: &Verdict| {
        matches!(v, Verdict::Conflict { reason } if reason == MERGE_CONFLICT)
            && f.change != FileChange::Added
            && f.paths().all(|p| indexed.contains(p))
    };
    if !files.iter().zip(verdicts).any(|(f, v)| mergeable(f, v)) {
        apply(git, files, verdicts)?;
        return Ok(vec![false; files.len()]);
    }
    let applies = pick(files, verdicts, |v| v.applies());
    let chosen: Vec<&FilePatch> = files
        .iter()
        .zip(verdicts)
        .filter(|(f, v)| v.applies() || mergeable(f, v))
        .map(|(f, _)| f)
        .collect();
    if let Err(e) = run_apply(git, &chosen, true) {
        tracing::info!("the 3-way merge of the conflicting files failed: {e}");
        apply(git, files, verdicts)?;
        return Ok(vec![false; files.len()]);
    }
    let unmerged = unmerged_paths(git)?;
    let clean: Vec<&str> = applies
        .iter()
        .flat_map(|f| f.paths())
        .filter(|p| !unmerged.contains(*p))
        .collect();
    if !clean.is_empty() {
        unstage(git, clean.into_iter())?;
    }
    Ok(files
        .iter()
        .zip(verdicts)
        .map(|(f, v)| v.is_conflict() && unmerged.contains(&f.path))
        .collect())
}

fn pick<'a>(
    files: &'a [FilePatch],
    verdicts: &[Verdict],
    keep: impl Fn(&Verdict) -> bool,
) -> Vec<&'a FilePatch> {
    files
        .iter()
        .zip(verdicts)
        .filter(|(_, v)| keep(v))
        .map(|(f, _)| f)
        .collect()
}

/// The one `git apply` (with `--3way` when asked): git's reading of the exact bytes must be
/// these files, and a 3-way apply may not create a file that already exists. A 3-way apply
/// that left conflict markers exits non-zero but did apply (git only says "with conflicts"
/// once it writes); any other failure wrote nothing.
fn run_apply(git: &Git, chosen: &[&FilePatch], three_way: bool) -> Result<(), GitError> {
    let patch: Vec<u8> = chosen.iter().flat_map(|f| f.text.iter().copied()).collect();
    let disagreements = crosscheck::check(git, &patch, chosen)?;
    if let Some(r) = disagreements.first() {
        return Err(GitError::Refused(format!("{}: {}", r.path, r.reason)));
    }
    let mut args = APPLY.to_vec();
    if three_way {
        let indexed = index_paths(git)?;
        let created = chosen
            .iter()
            .filter(|f| f.change == FileChange::Added || f.from.is_some())
            .map(|f| f.path.as_str());
        for path in created {
            let on_disk = git.dir().join(path).symlink_metadata().is_ok();
            if on_disk || indexed.contains(path) {
                return Err(GitError::Refused(format!(
                    "{path}: a 3-way merge would write over an existing file the patch creates"
                )));
            }
        }
        args.push("--3way");
    }
    let out = git.run_with_input(&args, &patch)?;
    if out.success || (three_way && out.stderr.contains("with conflicts")) {
        return Ok(());
    }
    Err(GitError::Failed {
        command: args.join(" "),
        stderr: out.stderr,
    })
}

/// Every path in the index.
fn index_paths(git: &Git) -> Result<HashSet<String>, GitError> {
    let out = git.ok_bytes(&["ls-files", "-z", "--cached"])?;
    Ok(nul_split(&out))
}

/// Paths left unmerged (with conflict markers).
fn unmerged_paths(git: &Git) -> Result<HashSet<String>, GitError> {
    let out = git.ok_bytes(&["diff", "--no-color", "--name-only", "-z", "--diff-filter=U"])?;
    Ok(nul_split(&out))
}

fn nul_split(out: &[u8]) -> HashSet<String> {
    out.split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

/// Puts these paths back in the index as `HEAD` has them.
pub fn unstage<'a>(git: &Git, paths: impl Iterator<Item = &'a str>) -> Result<(), GitError> {
    let list = nul_list(paths);
    git.ok_with_input(
        &[
            "--literal-pathspecs",
            "reset",
            "-q",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
        ],
        &list,
    )
    .map(drop)
}

pub fn nul_list<'a>(paths: impl Iterator<Item = &'a str>) -> Vec<u8> {
    let mut list = Vec::new();
    for path in paths {
        list.extend_from_slice(path.as_bytes());
        list.push(0);
    }
    list
}
