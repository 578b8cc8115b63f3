//! Bundling into a file: a named one, or one named by its SHA-256 in a directory (the cache).

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use super::{Bundle, BundleError, Options, create};

const WRITE_BUFFER: usize = 1 << 20;

/// Bundles `path` into the file `out` (never bundling `out` itself); a partial file is removed
/// on failure.
pub fn write_file(path: &Path, out: &Path, options: &Options) -> Result<Bundle, BundleError> {
    let write_err = |e: std::io::Error| {
        BundleError::Write(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", out.display()),
        ))
    };
    let file = File::create(out).map_err(write_err)?;
    let exclude = out.canonicalize().map_err(write_err)?;
    let mut options = options.clone();
    options.exclude.push(exclude);
    let result = create(path, &options, BufWriter::with_capacity(WRITE_BUFFER, file));
    if result.is_err() {
        let _ = std::fs::remove_file(out);
    }
    result
}

/// Bundles `path` into `dir/<sha256>.tar.gz` (`.tar.zst` for zstd) and returns the bundle and its path.
pub fn write_to_dir(
    path: &Path,
    dir: &Path,
    options: &Options,
) -> Result<(Bundle, PathBuf), BundleError> {
    let io_err = |e: std::io::Error| {
        BundleError::Write(std::io::Error::new(
            e.kind(),
            format!("{}: {e}", dir.display()),
        ))
    };
    std::fs::create_dir_all(dir).map_err(io_err)?;
    let partial = dir.join(format!(".partial-{}", std::process::id()));
    let bundle = write_file(path, &partial, options)?;
    let out = dir.join(format!("{}.{}", bundle.sha256, bundle.encoding.extension()));
    if let Err(source) = std::fs::rename(&partial, &out) {
        let _ = std::fs::remove_file(&partial);
        return Err(io_err(source));
    }
    Ok((bundle, out))
}
