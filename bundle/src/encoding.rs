//! The compressions a bundle may arrive in: gzip (every client) and zstd (clients that saw it
//! advertised in `GET /v1/eligibility`). Which one an upload uses is declared by its
//! `Content-Type` and checked against the stream's magic bytes.

use std::io::{self, BufRead, BufReader, Read};

use flate2::bufread::MultiGzDecoder;

/// Magic bytes of a gzip member.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
/// Magic bytes of a zstd frame (0xFD2FB528 little-endian).
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// How a bundle archive is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BundleEncoding {
    Gzip,
    Zstd,
}

impl BundleEncoding {
    /// Every encoding this server accepts, preferred first (what eligibility advertises).
    pub const ALL: [Self; 2] = [Self::Zstd, Self::Gzip];

    /// The name advertised to clients.
    pub fn name(self) -> &'static str {
        match self {
            Self::Gzip => "gzip",
            Self::Zstd => "zstd",
        }
    }

    /// The archive's file extension (after the sha): `tar.gz` or `tar.zst`.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Gzip => "tar.gz",
            Self::Zstd => "tar.zst",
        }
    }

    /// The encoding a `Content-Type` declares: `Ok(None)` when it declares none
    /// (`application/octet-stream`: the magic bytes decide), `Err` for anything else.
    pub fn from_content_type(content_type: &str) -> Result<Option<Self>, String> {
        let essence = content_type.split(';').next().unwrap_or("").trim();
        match essence.to_ascii_lowercase().as_str() {
            "application/gzip" | "application/x-gzip" => Ok(Some(Self::Gzip)),
            "application/zstd" => Ok(Some(Self::Zstd)),
            "application/octet-stream" => Ok(None),
            _ => Err(essence.to_owned()),
        }
    }

    /// The encoding whose magic bytes `head` starts with, if any.
    pub fn sniff(head: &[u8]) -> Option<Self> {
        if head.starts_with(&ZSTD_MAGIC) {
            Some(Self::Zstd)
        } else if head.starts_with(&GZIP_MAGIC) {
            Some(Self::Gzip)
        } else {
            None
        }
    }
}

/// A decompressing reader over either encoding.
pub(crate) enum Decoder<R: BufRead> {
    Gzip(Box<MultiGzDecoder<R>>),
    Zstd(Box<zstd::stream::read::Decoder<'static, R>>),
}

impl<R: Read> Decoder<BufReader<R>> {
    /// Decode `reader` as `encoding`. zstd frames may be concatenated, like gzip members.
    pub fn new(encoding: BundleEncoding, reader: BufReader<R>) -> io::Result<Self> {
        Ok(match encoding {
            BundleEncoding::Gzip => Self::Gzip(Box::new(MultiGzDecoder::new(reader))),
            BundleEncoding::Zstd => {
                let mut decoder = zstd::stream::read::Decoder::with_buffer(reader)?;
                decoder.window_log_max(super::limits::MAX_ZSTD_WINDOW_LOG)?;
                Self::Zstd(Box::new(decoder))
            }
        })
    }

    /// The buffered raw reader, for draining what the decoder left unread.
    pub fn into_inner(self) -> BufReader<R> {
        match self {
            Self::Gzip(d) => d.into_inner(),
            Self::Zstd(d) => d.finish(),
        }
    }
}

impl<R: BufRead> Read for Decoder<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Gzip(d) => d.read(buf),
            Self::Zstd(d) => d.read(buf),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_and_magic_bytes() {
        let cases: [(&str, Result<Option<BundleEncoding>, &str>); 7] = [
            ("application/gzip", Ok(Some(BundleEncoding::Gzip))),
            ("application/x-gzip", Ok(Some(BundleEncoding::Gzip))),
            ("application/zstd", Ok(Some(BundleEncoding::Zstd))),
            (
                "Application/Zstd; charset=binary",
                Ok(Some(BundleEncoding::Zstd)),
            ),
            ("application/octet-stream", Ok(None)),
            ("text/plain", Err("text/plain")),
            ("", Err("")),
        ];
        for (ct, want) in cases {
            let got = BundleEncoding::from_content_type(ct);
            assert_eq!(got, want.map_err(str::to_owned), "{ct}");
        }
        let sniffs: [(&[u8], Option<BundleEncoding>); 5] = [
            (&[0x1f, 0x8b, 8, 0], Some(BundleEncoding::Gzip)),
            (&[0x28, 0xb5, 0x2f, 0xfd, 0], Some(BundleEncoding::Zstd)),
            (&[0x28, 0xb5, 0x2f], None),
            (b"hello", None),
            (b"", None),
        ];
        for (head, want) in sniffs {
            assert_eq!(BundleEncoding::sniff(head), want, "{head:?}");
        }
        assert_eq!(BundleEncoding::Zstd.extension(), "tar.zst");
        assert_eq!(
            BundleEncoding::ALL.map(BundleEncoding::name),
            ["zstd", "gzip"]
        );
    }
}
