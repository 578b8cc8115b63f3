//! A manifest as a change to the one the server accepted last: what is new or different, and
//! what is gone.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use ultraplan_protocol::api::ManifestEntry;

/// The entries of `now` that `base` lacks or has otherwise, and the paths of `base` that
/// `now` lacks. `base` is read in one pass alongside `now` when it is in path order (as it is
/// saved), and looked up by path otherwise.
pub fn delta(
    base: &[ManifestEntry],
    now: &BTreeMap<String, ManifestEntry>,
) -> (Vec<ManifestEntry>, Vec<String>) {
    if !base.is_sorted_by(|a, b| a.path < b.path) {
        let by_path: BTreeMap<String, ManifestEntry> =
            base.iter().map(|e| (e.path.clone(), e.clone())).collect();
        let sorted: Vec<ManifestEntry> = by_path.into_values().collect();
        return delta(&sorted, now);
    }
    let (mut changed, mut removed) = (Vec::new(), Vec::new());
    let mut old = base.iter().peekable();
    for (path, entry) in now {
        loop {
            match old.peek().map(|o| o.path.as_str().cmp(path)) {
                Some(Ordering::Less) => {
                    removed.extend(old.next().map(|o| o.path.clone()));
                }
                Some(Ordering::Equal) => {
                    if old.next() != Some(entry) {
                        changed.push(entry.clone());
                    }
                    break;
                }
                Some(Ordering::Greater) | None => {
                    changed.push(entry.clone());
                    break;
                }
            }
        }
    }
    removed.extend(old.map(|o| o.path.clone()));
    (changed, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(path: &str, hash: u8) -> (String, ManifestEntry) {
        let entry = ManifestEntry {
            path: path.to_owned(),
            mode: Some(0o644),
            size: Some(1),
            blake3: Some(hex::encode([hash; 32])),
            target: None,
        };
        (path.to_owned(), entry)
    }

    #[test]
    fn deltas_name_exactly_what_changed() {
        type Case = (
            &'static str,
            Vec<(&'static str, u8)>,
            Vec<(&'static str, u8)>,
            Vec<&'static str>,
            Vec<&'static str>,
        );
        let cases: Vec<Case> = vec![
            ("same", vec![("a", 1)], vec![("a", 1)], vec![], vec![]),
            (
                "edited",
                vec![("a", 1), ("b", 1)],
                vec![("a", 2), ("b", 1)],
                vec!["a"],
                vec![],
            ),
            (
                "added",
                vec![("a", 1)],
                vec![("a", 1), ("b", 1)],
                vec!["b"],
                vec![],
            ),
            (
                "removed",
                vec![("a", 1), ("b", 1)],
                vec![("b", 1)],
                vec![],
                vec!["a"],
            ),
            (
                "renamed",
                vec![("a", 1)],
                vec![("c", 1)],
                vec!["c"],
                vec!["a"],
            ),
            ("no base", vec![], vec![("a", 1)], vec!["a"], vec![]),
            (
                "all gone",
                vec![("a", 1), ("b", 1)],
                vec![],
                vec![],
                vec!["a", "b"],
            ),
            (
                "interleaved",
                vec![("a", 1), ("c", 1), ("e", 1), ("g", 1)],
                vec![("b", 1), ("c", 2), ("e", 1), ("f", 1), ("h", 1)],
                vec!["b", "c", "f", "h"],
                vec!["a", "g"],
            ),
        ];
        for (name, base, now, changed, removed) in cases {
            let base: Vec<ManifestEntry> = base.into_iter().map(|(p, h)| entry(p, h).1).collect();
            let now = now.into_iter().map(|(p, h)| entry(p, h)).collect();
            let mut reversed = base.clone();
            reversed.reverse();
            // In path order (as saved) or not, the change is the same.
            for base in [base, reversed] {
                let (got_changed, got_removed) = delta(&base, &now);
                let got_changed: Vec<_> = got_changed.iter().map(|e| e.path.as_str()).collect();
                assert_eq!(
                    (got_changed, got_removed),
                    (
                        changed.clone(),
                        removed.iter().copied().map(String::from).collect()
                    ),
                    "{name}"
                );
            }
        }
    }
}
