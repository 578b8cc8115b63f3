//! A manifest as a change to the one the server accepted last: what is new or different, and
//! what is gone.

use std::collections::BTreeMap;

use ultraplan_protocol::api::ManifestEntry;

/// The entries of `now` that `base` lacks or has otherwise, and the paths of `base` that
/// `now` lacks.
pub fn delta(
    base: &BTreeMap<String, ManifestEntry>,
    now: &BTreeMap<String, ManifestEntry>,
) -> (Vec<ManifestEntry>, Vec<String>) {
    let changed = now
        .iter()
        .filter(|(path, entry)| base.get(*path) != Some(entry))
        .map(|(_, entry)| entry.clone())
        .collect();
    let removed = base
        .keys()
        .filter(|path| !now.contains_key(*path))
        .cloned()
        .collect();
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
        ];
        for (name, base, now, changed, removed) in cases {
            let base = base.into_iter().map(|(p, h)| entry(p, h)).collect();
            let now = now.into_iter().map(|(p, h)| entry(p, h)).collect();
            let (got_changed, got_removed) = delta(&base, &now);
            let got_changed: Vec<_> = got_changed.iter().map(|e| e.path.as_str()).collect();
            assert_eq!(
                (got_changed, got_removed),
                (changed, removed.into_iter().map(String::from).collect()),
                "{name}"
            );
        }
    }
}
