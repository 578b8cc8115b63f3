//! Per-user storage quota on bundles: an upload that would take its user over the quota is
//! refused with 413 `quota_exceeded`, before its body is read when the numbers already tell,
//! else once it is unpacked (then its files are removed unless someone else holds them).

use crate::core::Core;
use crate::store::{Admission, BundleRow, StoreError};
use ultraplan_bundle::registry::Uploading;

/// Why an upload is refused for the quota.
#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    /// Holding the bundle would take the user over the quota; the message says where they
    /// stand and how to get room.
    #[error("{0}")]
    Exceeded(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One upload's place in the quota: registered as in flight (retention leaves its bundle's
/// files alone) from [`Quota::check`] until dropped.
#[derive(Debug)]
pub struct Quota {
    uploading: Uploading,
    limit: u64,
}

impl Quota {
    /// Before the body is read: refuse when the user is already at the quota, or when the
    /// declared body length alone would pass it. Re-uploading a bundle the user holds
    /// costs nothing.
    pub async fn check(
        state: &Core,
        user_id: &str,
        sha: &str,
        declared: Option<u64>,
    ) -> Result<Self, QuotaError> {
        let limit = state.config.retention.bundle_quota_bytes;
        let uploading = Uploading::begin(&state.config.bundles_dir(), sha).await;
        let quota = Quota { uploading, limit };
        if limit == 0 || state.store.owned_bundle(user_id, sha).await?.is_some() {
            return Ok(quota);
        }
        let used = state.store.bundle_bytes_used(user_id).await?;
        let declared = declared.unwrap_or(1);
        if used.saturating_add(declared) > limit {
            return Err(exceeded(used, declared, limit, state));
        }
        Ok(quota)
    }

    /// After the bundle is unpacked: record that the user holds it if it fits, else remove
    /// what this upload stored (unless another user holds the bundle or uploads it now) and
    /// refuse.
    pub async fn record(
        &self,
        state: &Core,
        user_id: &str,
        row: &BundleRow,
    ) -> Result<(), QuotaError> {
        let admission = state
            .store
            .put_bundle_within_quota(user_id, row, self.limit)
            .await?;
        let Admission::OverQuota { used, needed } = admission else {
            return Ok(());
        };
        if !state.store.bundle_known(&row.sha256).await?
            && let Some(deleting) = self.uploading.claim_deletion()
        {
            super::remove_files(&state.config.bundles_dir(), &row.sha256).await;
            drop(deleting);
        }
        tracing::info!(user_id, sha256 = %row.sha256, used, needed, limit = self.limit,
            "bundle refused: storage quota");
        Err(exceeded(used, needed, self.limit, state))
    }
}

fn exceeded(used: u64, needed: u64, limit: u64, state: &Core) -> QuotaError {
    QuotaError::Exceeded(quota_message(
        used,
        needed,
        limit,
        state.config.retention.bundle_grace.as_secs(),
    ))
}

/// The refusal's words: where the user stands and how to get room.
pub fn quota_message(used: u64, needed: u64, limit: u64, grace_secs: u64) -> String {
    format!(
        "bundle storage quota exceeded: you store {} of your {} quota and this bundle needs {} \
         more. Bundles that no session uses are deleted {} after their upload, which frees \
         their space; the server's administrator can raise the quota (ULTRAPLAN_BUNDLE_QUOTA)",
        human_bytes(used),
        human_bytes(limit),
        human_bytes(needed),
        human_duration(grace_secs)
    )
}

/// `1.5 GiB`, `12.0 MiB`, `512 B`.
pub fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = UNITS[0];
    for next in &UNITS[1..] {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = next;
    }
    format!("{value:.1} {unit}")
}

fn human_duration(secs: u64) -> String {
    match secs {
        s if s >= 3600 && s % 3600 == 0 => format!("{} h", s / 3600),
        s if s >= 60 && s % 60 == 0 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}

/// Parse a size: plain bytes, or a number with `K`/`M`/`G`/`T` (powers of 1024; `KiB`,
/// `KB` and lower case accepted too).
pub fn parse_size(text: &str) -> Result<u64, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size (e.g. 10GiB, 512M, 1048576)"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        other => return Err(format!("unknown size unit {other:?} in {text:?}")),
    };
    number
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{text:?} is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse() {
        let cases: &[(&str, Result<u64, ()>)] = &[
            ("0", Ok(0)),
            ("1048576", Ok(1 << 20)),
            ("10GiB", Ok(10 << 30)),
            ("10G", Ok(10 << 30)),
            ("512 mb", Ok(512 << 20)),
            ("3k", Ok(3 << 10)),
            ("1T", Ok(1 << 40)),
            ("", Err(())),
            ("ten", Err(())),
            ("5 parsecs", Err(())),
            ("99999999999999999999T", Err(())),
            ("18446744073709551615T", Err(())),
        ];
        for (text, want) in cases {
            assert_eq!(parse_size(text).map_err(|_| ()), *want, "{text}");
        }
    }

    #[test]
    fn messages_say_where_the_user_stands() {
        let cases = [
            (512, "512 B"),
            (1536, "1.5 KiB"),
            (10 << 30, "10.0 GiB"),
            (3 << 40, "3.0 TiB"),
        ];
        for (bytes, want) in cases {
            assert_eq!(human_bytes(bytes), want);
        }
        let text = quota_message(9 << 30, 2 << 30, 10 << 30, 86_400);
        assert!(
            text.starts_with(
                "bundle storage quota exceeded: you store 9.0 GiB of your 10.0 GiB quota and this \
                 bundle needs 2.0 GiB more."
            ),
            "{text}"
        );
        assert!(text.contains("deleted 24 h after their upload"), "{text}");
        assert!(text.contains("ULTRAPLAN_BUNDLE_QUOTA"), "{text}");
        assert_eq!(human_duration(90), "90 s");
        assert_eq!(human_duration(600), "10 min");
    }
}
