//! `ultraplan bundle [--out FILE] [--level N] [PATH]`: bundle as teleport would and report.

use std::path::Path;

use anyhow::Context;
use serde::Serialize;
use ultraplan::bundle::{self, Bundle, Options};

/// The JSON line printed: the bundle plus where it was written.
#[derive(Serialize)]
struct Report<'a> {
    out: &'a Path,
    #[serde(flatten)]
    bundle: &'a Bundle,
}

/// Bundles `path` into `out` (or the cache) and returns the JSON report.
pub fn run(path: &Path, out: Option<&Path>, level: u32) -> anyhow::Result<String> {
    let options = Options {
        level,
        ..Options::default()
    };
    let (bundle, out) = match out {
        Some(out) => (
            bundle::write_file(path, out, &options)
                .with_context(|| format!("bundling {}", path.display()))?,
            out.to_owned(),
        ),
        None => {
            let dir = ultraplan::paths::cache_dir()
                .context("pass --out")?
                .join("bundles");
            bundle::write_to_dir(path, &dir, &options)
                .with_context(|| format!("bundling {}", path.display()))?
        }
    };
    serde_json::to_string(&Report {
        out: &out,
        bundle: &bundle,
    })
    .context("encoding the report")
}
