//! Maintenance of a cached environment (docs/ARCHITECTURE.md §6.5): a reused snapshot is
//! copied, its `[maintenance]` commands run on the copy, and the copy becomes the snapshot's
//! next generation (`<key>/gen-N`). Agents that hold the older tree keep it until they end;
//! the sweep removes it once the snapshot is unused.

use std::path::Path;

use super::cache::{EnvironmentCache, Lease, SnapshotMeta, Staging, now_ms, remove_tree};

impl EnvironmentCache {
    /// A staging copy of `lease`'s tree (modes, links and owners kept), for maintenance to
    /// change. Blocking.
    pub fn copy_for_maintenance(
        &self,
        lease: &Lease,
        owner: Option<u32>,
    ) -> std::io::Result<Staging> {
        let staging = self.stage(owner)?;
        if let Err(error) = copy_tree(&lease.tree, &staging.tree) {
            remove_tree(&staging.dir);
            return Err(error);
        }
        Ok(staging)
    }

    /// Make a maintained copy of `base` the snapshot's current tree and lease it. Its expiry
    /// still counts from setup. Blocking.
    pub fn commit_generation(&self, staging: Staging, base: &Lease) -> std::io::Result<Lease> {
        let dir = self.root.join(&base.key);
        let current = Self::read_meta(&dir)
            .filter(|m| m.key == base.key)
            .ok_or_else(|| std::io::Error::other("the snapshot is gone"))?;
        let meta = SnapshotMeta {
            generation: current.generation + 1,
            maintained_at_ms: Some(now_ms()),
            ..current
        };
        let tree = dir.join(meta.tree_name());
        let placed = std::fs::rename(&staging.tree, &tree);
        remove_tree(&staging.dir);
        placed?;
        let bytes = serde_json::to_vec(&meta).map_err(std::io::Error::other)?;
        let next = dir.join(".meta.json.next");
        std::fs::write(&next, bytes)?;
        std::fs::rename(&next, dir.join("meta.json"))?;
        Ok(self.lease(&base.key, tree, meta))
    }
}

/// `cp -a SRC/. DST`: every kind of entry, modes, owners and times, as the system's own copy
/// does them.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg("--reflink=auto")
        .arg(from.join("."))
        .arg(to)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()?;
    if status.success() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "copying the environment for maintenance failed ({status})"
        )))
    }
}
