//! Keeping refused symlinks out of an execution's patch: before git looks at the workspace,
//! every symlink the agent left (found with lstat, never followed) is judged by
//! [`links::classify`](super::links::classify); a refused one is removed from the tree and,
//! where the bundle had something at that path, the bundle's version is put back, so the
//! patch neither carries the link nor deletes what it replaced. A link the bundle already
//! had, unchanged, is the user's own and stays.

use std::collections::{HashMap, HashSet};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use ultraplan_protocol::patch::{FileChange, LeftOut, LeftOutReason, PatchSummary};

use super::WorkspaceError;
use super::git::Repo;
use super::links::{Links, classify};

/// The ref `Workspace::prepare` gives the bundle as uploaded.
const BASE_REF: &str = "refs/ultraplan/base";

/// Git's mode for a symlink.
const LINK_MODE: &str = "120000";

/// A symlink that may not be carried: path, target, why.
type Refused = (Vec<u8>, Vec<u8>, LeftOutReason);

/// Take every refused symlink out of the workspace under `root` (`<root>/tree` with its
/// private git dir `<root>/git`) and list them for the patch summary.
pub async fn refuse(root: &Path) -> Result<Vec<LeftOut>, WorkspaceError> {
    let tree = root.join("tree");
    let repo = Repo {
        git_dir: root.join("git"),
        work_tree: tree.clone(),
    };
    let walked = tree.clone();
    let found = blocking(move || {
        super::copy::scrub(&walked)?;
        let links = walk(&walked)?;
        Ok(judge(&links))
    })
    .await?;
    if found.is_empty() {
        return Ok(Vec::new());
    }
    let base = base_entries(&repo).await?;
    let unchanged = same_as_base(&repo, &base, &found).await?;
    let found: Vec<Refused> = found
        .into_iter()
        .filter(|(path, ..)| !unchanged.contains(path))
        .collect();
    let doomed: Vec<Vec<u8>> = found.iter().map(|(path, ..)| path.clone()).collect();
    blocking(move || remove(&tree, &doomed)).await?;
    let restore: Vec<u8> = found
        .iter()
        .filter(|(path, ..)| base.contains_key(path))
        .flat_map(|(path, ..)| path.iter().copied().chain([0]))
        .collect();
    if !restore.is_empty() {
        let args = [
            "--literal-pathspecs",
            "checkout",
            BASE_REF,
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
        ];
        repo.run_with_input(&args, restore).await?;
    }
    let left_out: Vec<LeftOut> = found.into_iter().map(left_out).collect();
    tracing::warn!(
        refused = left_out.len(),
        paths = ?left_out.iter().map(|l| &l.path).collect::<Vec<_>>(),
        "refused symlinks kept out of the patch"
    );
    Ok(left_out)
}

/// Refuse a patch that would write through a symlink: no added or changed path may have a
/// leading component that is a symlink in the tree. Git never produces one; this makes sure.
pub async fn check_no_path_through_links(
    tree: &Path,
    summary: &PatchSummary,
) -> Result<(), WorkspaceError> {
    let tree = tree.to_path_buf();
    let paths: Vec<String> = summary
        .files
        .iter()
        .filter(|f| f.change != FileChange::Deleted)
        .map(|f| f.path.clone())
        .collect();
    blocking(move || {
        for path in &paths {
            let mut prefix = tree.clone();
            let components: Vec<&str> = path.split('/').collect();
            for component in &components[..components.len().saturating_sub(1)] {
                prefix.push(component);
                if std::fs::symlink_metadata(&prefix).is_ok_and(|m| m.is_symlink()) {
                    return Err(WorkspaceError::Io(format!(
                        "the patch path {path} goes through the symlink {component}; refused"
                    )));
                }
            }
        }
        Ok(())
    })
    .await
}

fn judge(links: &Links) -> Vec<Refused> {
    let mut refused: Vec<Refused> = links
        .iter()
        .filter_map(|(path, target)| {
            classify(path, target, links).map(|why| (path.clone(), target.clone(), why))
        })
        .collect();
    refused.sort_by(|a, b| a.0.cmp(&b.0));
    refused
}

fn left_out((path, target, reason): Refused) -> LeftOut {
    LeftOut {
        path: String::from_utf8_lossy(&path).into_owned(),
        bytes: u64::try_from(target.len()).unwrap_or(u64::MAX),
        reason,
        target: Some(String::from_utf8_lossy(&target).into_owned()),
    }
}

/// Every symlink under `root`, links never followed.
fn walk(root: &Path) -> Result<Links, WorkspaceError> {
    let mut links = Links::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).map_err(|e| io(&dir, e))? {
            let entry = entry.map_err(|e| io(&dir, e))?;
            let path = entry.path();
            let kind = entry.file_type().map_err(|e| io(&path, e))?;
            if kind.is_dir() {
                dirs.push(path);
            } else if kind.is_symlink() {
                let target = std::fs::read_link(&path).map_err(|e| io(&path, e))?;
                let relative = path.strip_prefix(root).unwrap_or(&path);
                links.insert(
                    relative.as_os_str().as_bytes().to_vec(),
                    target.as_os_str().as_bytes().to_vec(),
                );
            }
        }
    }
    Ok(links)
}

fn remove(tree: &Path, paths: &[Vec<u8>]) -> Result<(), WorkspaceError> {
    for path in paths {
        let full = tree.join(std::ffi::OsStr::from_bytes(path));
        std::fs::remove_file(&full).map_err(|e| io(&full, e))?;
    }
    Ok(())
}

/// Every path of the base commit (trees included) with its mode and object id.
async fn base_entries(repo: &Repo) -> Result<HashMap<Vec<u8>, (String, String)>, WorkspaceError> {
    let raw = repo
        .run(&["ls-tree", "-r", "-t", "-z", "--full-tree", BASE_REF])
        .await?;
    Ok(raw
        .split(|b| *b == 0)
        .filter_map(|record| {
            let tab = record.iter().position(|b| *b == b'\t')?;
            let meta = String::from_utf8_lossy(&record[..tab]);
            let mut fields = meta.split(' ');
            let (mode, _kind, oid) = (fields.next()?, fields.next()?, fields.next()?);
            Some((
                record[tab + 1..].to_vec(),
                (mode.to_owned(), oid.to_owned()),
            ))
        })
        .collect())
}

/// The refused links that the base has at the same path with the same target.
async fn same_as_base(
    repo: &Repo,
    base: &HashMap<Vec<u8>, (String, String)>,
    found: &[Refused],
) -> Result<HashSet<Vec<u8>>, WorkspaceError> {
    let in_base: Vec<(&Refused, &str)> = found
        .iter()
        .filter_map(|refused| match base.get(&refused.0) {
            Some((mode, oid)) if mode == LINK_MODE => Some((refused, oid.as_str())),
            _ => None,
        })
        .collect();
    if in_base.is_empty() {
        return Ok(HashSet::new());
    }
    let input: String = in_base.iter().map(|(_, oid)| format!("{oid}\n")).collect();
    let out = repo
        .run_with_input(&["cat-file", "--batch"], input.into_bytes())
        .await?;
    let targets = batch_contents(&out);
    Ok(in_base
        .iter()
        .zip(targets)
        .filter(|((refused, _), target)| refused.1 == *target)
        .map(|((refused, _), _)| refused.0.clone())
        .collect())
}

/// The objects' contents from `git cat-file --batch` output, in order.
fn batch_contents(mut out: &[u8]) -> Vec<Vec<u8>> {
    let mut contents = Vec::new();
    while let Some(newline) = out.iter().position(|b| *b == b'\n') {
        let header = String::from_utf8_lossy(&out[..newline]);
        let size: Option<usize> = header.split(' ').nth(2).and_then(|s| s.parse().ok());
        let Some(size) = size.filter(|s| newline + 1 + s <= out.len()) else {
            break;
        };
        contents.push(out[newline + 1..newline + 1 + size].to_vec());
        out = out.get(newline + 2 + size..).unwrap_or_default();
    }
    contents
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, WorkspaceError> + Send + 'static,
) -> Result<T, WorkspaceError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| WorkspaceError::Io(format!("checking the workspace's symlinks failed: {e}")))?
}

fn io(path: &Path, e: std::io::Error) -> WorkspaceError {
    WorkspaceError::Io(format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_output_is_split_by_size() {
        let out = b"aaa blob 3\nx/y\nbbb blob 0\n\nccc blob 5\na\nb c\n";
        assert_eq!(
            batch_contents(out),
            vec![b"x/y".to_vec(), Vec::new(), b"a\nb c".to_vec()]
        );
        assert!(batch_contents(b"ddd missing\n").is_empty());
    }
}
