//! `ultraplan bundle [--out FILE] [--encoding gzip|zstd] [--level N] [PATH]`: bundle as teleport
//! would and report.

use std::path::Path;

use anyhow::Context;
use serde::Serialize;
use ultraplan::bundle::{self, Bundle, Codec, Options};

/// The JSON line printed: the bundle plus where it was written.
#[derive(Serialize)]
struct Report<'a> {
    out: &'a Path,
    #[serde(flatten)]
    bundle: &'a Bundle,
}

/// Exits with a usage error (status 2) when `level` is outside `codec`'s levels.
pub fn check_level(codec: Codec, level: Option<u32>) {
    let levels = codec.levels();
    if let Some(level) = level.filter(|l| !levels.contains(l)) {
        use clap::CommandFactory;
        crate::cli::Cli::command()
            .error(
                clap::error::ErrorKind::ValueValidation,
                format!(
                    "--level {level}: {} levels are {} to {}",
                    codec.extension(),
                    levels.start(),
                    levels.end()
                ),
            )
            .exit();
    }
}

/// Bundles `path` into `out` (or the cache) and returns the JSON report.
pub fn run(
    path: &Path,
    out: Option<&Path>,
    codec: Codec,
    level: Option<u32>,
) -> anyhow::Result<String> {
    let options = Options {
        codec,
        level: level.unwrap_or(codec.default_level()),
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
