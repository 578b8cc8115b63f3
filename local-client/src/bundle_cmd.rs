//! `ultraplan bundle [--out FILE] [--level N] [PATH]`: bundle as teleport would and report.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::Serialize;
use ultraplan::bundle::{self, Bundle, Options};

const WRITE_BUFFER: usize = 1 << 20;

/// The JSON line printed: the bundle plus where it was written.
#[derive(Serialize)]
struct Report<'a> {
    out: &'a Path,
    #[serde(flatten)]
    bundle: &'a Bundle,
}

/// Bundles `path` into `out` (or the cache) and returns the JSON report.
pub fn run(path: &Path, out: Option<&Path>, level: u32) -> anyhow::Result<String> {
    let (bundle, out) = match out {
        Some(out) => (write_to(path, out, level)?, out.to_owned()),
        None => write_to_cache(path, level)?,
    };
    serde_json::to_string(&Report {
        out: &out,
        bundle: &bundle,
    })
    .context("encoding the report")
}

/// Writes the bundle to `out`, removing a partial file on failure.
fn write_to(path: &Path, out: &Path, level: u32) -> anyhow::Result<Bundle> {
    let file = File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let exclude = out
        .canonicalize()
        .with_context(|| format!("resolving {}", out.display()))?;
    let options = Options {
        level,
        exclude: vec![exclude],
        ..Options::default()
    };
    let result = bundle::create(path, &options, BufWriter::with_capacity(WRITE_BUFFER, file));
    if result.is_err() {
        let _ = std::fs::remove_file(out);
    }
    result.with_context(|| format!("bundling {}", path.display()))
}

/// Writes into `$XDG_CACHE_HOME/ultraplan/bundles/<sha256>.tar.gz`.
fn write_to_cache(path: &Path, level: u32) -> anyhow::Result<(Bundle, PathBuf)> {
    let dir = cache_dir()?.join("ultraplan").join("bundles");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let partial = dir.join(format!(".partial-{}", std::process::id()));
    let bundle = write_to(path, &partial, level)?;
    let out = dir.join(format!("{}.tar.gz", bundle.sha256));
    std::fs::rename(&partial, &out)
        .with_context(|| format!("moving the bundle to {}", out.display()))?;
    Ok((bundle, out))
}

fn cache_dir() -> anyhow::Result<PathBuf> {
    let from_env = |name| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    from_env("XDG_CACHE_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| from_env("HOME").map(|home| home.join(".cache")))
        .context("no cache directory: set HOME or XDG_CACHE_HOME, or pass --out")
}
