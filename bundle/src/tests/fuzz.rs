//! Randomised symlink sets checked against the kernel: whatever is accepted, every symlink in
//! the published tree either fails to resolve or resolves inside it (realpath is the oracle).

use std::fs;

use super::super::bundle_dir;
use super::support::{Env, Tar, gz, walk};

/// A tiny deterministic generator (no rand dependency needed for this).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.next(items.len())]
    }
}

#[test]
fn accepted_symlinks_never_resolve_outside() {
    let dirs = ["", "a/", "a/b/"];
    let names = ["x", "y", "z", "c"];
    let parts = ["a", "b", "c", "x", "y", "z", "f", "..", "..", ".", ""];
    let mut rng = Lcg(0x5eed);
    let (mut accepted, mut refused) = (0, 0);
    for trial in 0..200 {
        let mut tar = Tar::new().dir("a/").dir("a/b/").file("a/f", b"f");
        let mut described = Vec::new();
        for _ in 0..1 + rng.next(5) {
            let path = format!("{}{}", rng.pick(&dirs), rng.pick(&names));
            let target: Vec<&str> = (0..1 + rng.next(5)).map(|_| rng.pick(&parts)).collect();
            let target = target.join("/");
            if target.is_empty() {
                continue;
            }
            described.push(format!("{path} -> {target}"));
            tar = tar.symlink(&path, &target);
        }
        let env = Env::new();
        let upload = gz(&tar.finish());
        let Ok(stats) = env.ingest(&upload) else {
            refused += 1;
            env.assert_untouched(&format!("trial {trial}"));
            continue;
        };
        accepted += 1;
        let root = fs::canonicalize(bundle_dir(&env.store, &stats.sha256)).unwrap();
        for path in walk(&root) {
            if !fs::symlink_metadata(&path)
                .unwrap()
                .file_type()
                .is_symlink()
            {
                continue;
            }
            if let Ok(resolved) = fs::canonicalize(&path) {
                assert!(
                    resolved.starts_with(&root),
                    "trial {trial}: {} resolves to {} with links {described:?}",
                    path.display(),
                    resolved.display()
                );
            }
        }
    }
    // The generator must exercise both outcomes for the check to mean anything.
    assert!(
        accepted > 30 && refused > 30,
        "accepted {accepted}, refused {refused}"
    );
}
