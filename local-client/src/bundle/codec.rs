//! The compressions a bundle can be written in, and the choice between them: zstd when the
//! server advertises it (`accepts_bundle_encodings` in `GET /v1/eligibility`), else gzip, which
//! every server accepts.

use serde::Serialize;

/// How the bundle's tar stream is compressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Codec {
    #[default]
    Gzip,
    Zstd,
}

impl Codec {
    /// The best codec among those a server advertises: zstd when listed, else gzip (what
    /// servers that advertise nothing accept).
    pub fn negotiate(advertised: &[String]) -> Self {
        if advertised
            .iter()
            .any(|name| name.eq_ignore_ascii_case("zstd"))
        {
            Self::Zstd
        } else {
            Self::Gzip
        }
    }

    /// The `Content-Type` of the upload.
    pub fn content_type(self) -> &'static str {
        match self {
            Self::Gzip => "application/gzip",
            Self::Zstd => "application/zstd",
        }
    }

    /// The file extension, after the SHA-256.
    pub fn extension(self) -> &'static str {
        match self {
            Self::Gzip => "tar.gz",
            Self::Zstd => "tar.zst",
        }
    }

    /// Levels accepted: gzip's fast end (speed matters more than size), zstd's standard range.
    pub fn levels(self) -> std::ops::RangeInclusive<u32> {
        match self {
            Self::Gzip => 1..=6,
            Self::Zstd => 1..=19,
        }
    }

    /// The default level. gzip: 1. zstd: 3, measured against 1 on a 313 MB copy of the cargo
    /// registry on 2 cores (bench/bundle.sh, bench/README.md): bundling is bound by reading
    /// the files there, so level 3 costs about 5 % more time for a 9 % smaller archive, and
    /// only it comes out smaller than `tar | zstd -1` despite the independent 1 MiB frames.
    pub fn default_level(self) -> u32 {
        match self {
            Self::Gzip => 1,
            Self::Zstd => 3,
        }
    }
}

impl std::str::FromStr for Codec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "gzip" => Ok(Self::Gzip),
            "zstd" => Ok(Self::Zstd),
            other => Err(format!("unknown encoding {other:?}: gzip or zstd")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zstd_only_when_advertised() {
        let cases: [(&[&str], Codec); 6] = [
            (&[], Codec::Gzip),
            (&["gzip"], Codec::Gzip),
            (&["zstd", "gzip"], Codec::Zstd),
            (&["gzip", "zstd"], Codec::Zstd),
            (&["ZSTD"], Codec::Zstd),
            (&["brotli", "gzip"], Codec::Gzip),
        ];
        for (advertised, want) in cases {
            let advertised: Vec<String> = advertised.iter().map(|s| (*s).to_owned()).collect();
            assert_eq!(Codec::negotiate(&advertised), want, "{advertised:?}");
        }
    }

    #[test]
    fn names_round_trip() {
        for codec in [Codec::Gzip, Codec::Zstd] {
            let name = serde_json::to_value(codec).unwrap();
            assert_eq!(name.as_str().unwrap().parse::<Codec>(), Ok(codec));
            assert!(codec.levels().contains(&codec.default_level()));
        }
        assert!("brotli".parse::<Codec>().is_err());
        assert_eq!(Codec::Zstd.content_type(), "application/zstd");
        assert_eq!(Codec::Zstd.extension(), "tar.zst");
    }
}
