//! The pages' reading of file names in `git diff` headers, over the protocol's strict
//! [`git_patch`] reader. The pages only display a patch, so a name that reader refuses (quoting
//! git never writes) is shown as written instead of failing the page.

use ultraplan_protocol::git_patch::{self, lossy};

/// The names of a `diff --git` line (the text after `diff --git `), prefixes removed; for a
/// line the reader refuses, no old name and the whole text as the new one.
pub fn header_paths(rest: &[u8]) -> (Option<String>, Option<String>) {
    match git_patch::header_names(rest) {
        Ok((a, b)) => (Some(lossy(&a)), Some(lossy(&b))),
        Err(_) => (None, Some(lossy(rest))),
    }
}

/// The name of a `--- ` or `+++ ` line (the text after the marker): `None` for `/dev/null`,
/// else the name with `prefix` removed where it has one.
pub fn side_path(rest: &[u8], prefix: &[u8]) -> Option<String> {
    match git_patch::side_name(rest, prefix) {
        Ok(name) => name.map(|n| lossy(&n)),
        Err(_) => Some(lossy(rest.strip_suffix(b"\t").unwrap_or(rest))),
    }
}
