//! Where the blob store is: the value of `ULTRAPLAN_BLOB_STORE` / `--blob-store`, parsed with
//! no IO so every way it can be wrong is a table row in the tests below.

use std::fmt;
use std::path::{Component, Path, PathBuf};
use std::str::FromStr;

/// A blob store location: a local directory, or a bucket (and key prefix) on an S3-compatible
/// service whose endpoint, region and keys come from the standard `AWS_*` variables.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum BlobLocation {
    /// `file:///absolute/dir`
    File(PathBuf),
    /// `s3://bucket/prefix`; the prefix has no leading or trailing `/` and may be empty.
    S3 { bucket: String, prefix: String },
}

/// Why a blob store location was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid blob store {value:?}: {reason} (expected file:///absolute/dir or s3://bucket/prefix)"
)]
pub struct LocationError {
    pub value: String,
    pub reason: String,
}

impl BlobLocation {
    /// The default: `blobs/` inside the data dir (made absolute against the current dir).
    pub fn in_data_dir(data_dir: &Path) -> Self {
        let dir = data_dir.join("blobs");
        BlobLocation::File(std::path::absolute(&dir).unwrap_or(dir))
    }

    /// `file` or `s3`, for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            BlobLocation::File(_) => "file",
            BlobLocation::S3 { .. } => "s3",
        }
    }

    /// Parse `file:///abs/dir` or `s3://bucket[/prefix]`.
    pub fn parse(value: &str) -> Result<Self, LocationError> {
        let refuse = |reason: &str| LocationError {
            value: value.to_owned(),
            reason: reason.to_owned(),
        };
        let text = value.trim();
        if text.is_empty() {
            return Err(refuse("it is empty"));
        }
        let Some((scheme, rest)) = text.split_once("://") else {
            return Err(refuse("it has no scheme"));
        };
        match scheme.to_ascii_lowercase().as_str() {
            "file" => parse_file(rest).map_err(|r| refuse(&r)),
            "s3" => parse_s3(rest).map_err(|r| refuse(&r)),
            other => Err(refuse(&format!("unknown scheme {other:?}"))),
        }
    }
}

fn parse_file(rest: &str) -> Result<BlobLocation, String> {
    if !rest.starts_with('/') {
        return Err(format!(
            "a file store needs an absolute path, and {rest:?} is relative or names a host \
             (write file:///absolute/dir)"
        ));
    }
    if rest.contains(['?', '#']) {
        return Err("a file path here takes no query or fragment".to_owned());
    }
    let path = Path::new(rest);
    if path.components().any(|c| c == Component::ParentDir) {
        return Err("the path must not contain `..`".to_owned());
    }
    if path.components().all(|c| c == Component::RootDir) {
        return Err("the file system root cannot be the blob store".to_owned());
    }
    Ok(BlobLocation::File(path.to_path_buf()))
}

fn parse_s3(rest: &str) -> Result<BlobLocation, String> {
    if rest.contains(['?', '#']) {
        return Err("an s3 location takes no query or fragment".to_owned());
    }
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    if bucket.is_empty() {
        return Err("the bucket is missing (write s3://bucket/prefix)".to_owned());
    }
    check_bucket(bucket)?;
    let prefix = prefix.trim_matches('/');
    for segment in prefix.split('/').filter(|_| !prefix.is_empty()) {
        match segment {
            "" => return Err("the prefix has an empty segment (`//`)".to_owned()),
            "." | ".." => return Err(format!("the prefix has a {segment:?} segment")),
            s if s.chars().any(char::is_control) => {
                return Err("the prefix has a control character".to_owned());
            }
            _ => {}
        }
    }
    Ok(BlobLocation::S3 {
        bucket: bucket.to_owned(),
        prefix: prefix.to_owned(),
    })
}

/// S3's bucket naming rules: 3 to 63 of lowercase letters, digits, `.` and `-`, starting
/// and ending with a letter or digit.
fn check_bucket(bucket: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-';
    let edge = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !(3..=63).contains(&bucket.len())
        || !bucket.chars().all(allowed)
        || !edge(bucket.chars().next())
        || !edge(bucket.chars().last())
    {
        return Err(format!(
            "{bucket:?} is not a bucket name (3 to 63 lowercase letters, digits, `.` or `-`, \
             starting and ending with a letter or digit)"
        ));
    }
    Ok(())
}

impl FromStr for BlobLocation {
    type Err = LocationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl fmt::Display for BlobLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BlobLocation::File(path) => write!(f, "file://{}", path.display()),
            BlobLocation::S3 { bucket, prefix } if prefix.is_empty() => write!(f, "s3://{bucket}"),
            BlobLocation::S3 { bucket, prefix } => write!(f, "s3://{bucket}/{prefix}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s3(bucket: &str, prefix: &str) -> BlobLocation {
        BlobLocation::S3 {
            bucket: bucket.to_owned(),
            prefix: prefix.to_owned(),
        }
    }

    #[test]
    fn locations_parse_or_say_why_not() {
        let file = |p: &str| Ok(BlobLocation::File(PathBuf::from(p)));
        let cases: Vec<(&str, Result<BlobLocation, &str>)> = vec![
            (
                "file:///var/lib/ultraplan/blobs",
                file("/var/lib/ultraplan/blobs"),
            ),
            ("file:///srv/blobs/", file("/srv/blobs/")),
            ("  file:///srv/b  ", file("/srv/b")),
            ("FILE:///srv/b", file("/srv/b")),
            ("s3://team-bucket", Ok(s3("team-bucket", ""))),
            ("s3://team-bucket/", Ok(s3("team-bucket", ""))),
            (
                "s3://team-bucket/ultraplan/prod/",
                Ok(s3("team-bucket", "ultraplan/prod")),
            ),
            ("s3://my.bucket.1/p", Ok(s3("my.bucket.1", "p"))),
            ("", Err("it is empty")),
            ("   ", Err("it is empty")),
            ("/var/lib/blobs", Err("no scheme")),
            ("blobs", Err("no scheme")),
            ("gs://bucket/x", Err("unknown scheme \"gs\"")),
            ("http://minio:9000/bucket", Err("unknown scheme \"http\"")),
            ("file://relative/dir", Err("absolute path")),
            ("file://", Err("absolute path")),
            ("file:///", Err("root")),
            ("file:///srv/../etc", Err("`..`")),
            ("file:///srv/b?x=1", Err("no query")),
            ("s3://", Err("bucket is missing")),
            ("s3:///prefix", Err("bucket is missing")),
            ("s3://Team/x", Err("not a bucket name")),
            ("s3://ab", Err("not a bucket name")),
            ("s3://-bucket", Err("not a bucket name")),
            ("s3://bucket_x", Err("not a bucket name")),
            ("s3://bucket/a//b", Err("empty segment")),
            ("s3://bucket/a/../b", Err("\"..\" segment")),
            ("s3://bucket/a\tb", Err("control character")),
            ("s3://bucket/x?versionId=1", Err("no query")),
        ];
        for (value, want) in cases {
            let got = BlobLocation::parse(value);
            match (&got, &want) {
                (Ok(loc), Ok(want)) => assert_eq!(loc, want, "{value:?}"),
                (Err(e), Err(fragment)) => {
                    let text = e.to_string();
                    assert!(text.contains(*fragment), "{value:?}: {text}");
                    assert!(text.contains("s3://bucket/prefix"), "{value:?}: {text}");
                }
                _ => panic!("{value:?}: got {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn locations_print_as_they_are_written() {
        for text in [
            "file:///srv/blobs",
            "s3://team-bucket",
            "s3://team-bucket/a/b",
        ] {
            let parsed = BlobLocation::parse(text).expect("valid");
            assert_eq!(parsed.to_string(), text);
            assert_eq!(parsed.to_string().parse::<BlobLocation>(), Ok(parsed));
        }
        assert_eq!(
            BlobLocation::parse("s3://b-1/x").expect("valid").kind(),
            "s3"
        );
        let default = BlobLocation::in_data_dir(Path::new("/data"));
        assert_eq!(default, BlobLocation::File(PathBuf::from("/data/blobs")));
        assert_eq!(default.kind(), "file");
    }
}
