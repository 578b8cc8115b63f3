//! A manifest as a change to an earlier one: the paths taken out and the entries added or
//! replaced.

use ultraplan_protocol::api::ManifestEntry;

use super::manifest::{TreeManifest, node_of};
use crate::error::{BundleError, display_path};

/// `base` with `removed` taken out, then `entries` added or replaced. A removed path the base
/// lacks, or an entry given twice, is refused: the client's idea of the base is not the
/// server's. The result still has to pass [`TreeManifest::check`].
pub fn apply(
    base: TreeManifest,
    removed: &[String],
    entries: Vec<ManifestEntry>,
) -> Result<TreeManifest, BundleError> {
    let mut tree = base;
    for path in removed {
        if tree.entries.remove(path).is_none() {
            return Err(BundleError::InvalidManifest(format!(
                "{:?} is removed but the base does not have it",
                display_path(path.as_bytes())
            )));
        }
    }
    let mut changed = TreeManifest::default();
    for entry in entries {
        let (path, node) = node_of(entry)?;
        changed.insert(path, node)?;
    }
    tree.entries.append(&mut changed.entries);
    Ok(tree)
}

#[cfg(test)]
#[path = "delta_tests.rs"]
mod tests;
