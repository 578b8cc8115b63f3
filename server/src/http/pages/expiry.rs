//! When a pending plan nears the session's time limit (the flag `timeout_seconds`, counted from
//! the session's `created_at`), the page says how long is left: in the limit's last fifth or
//! last five minutes, whichever is shorter — the rule the client's pill follows too
//! (`ultraplan_protocol::expiry`).

use std::time::Duration;

use ultraplan_protocol::expiry;

/// `4 min` (rounded up), `45 s` under a minute: what is left of the limit of a session created
/// at `created_at_ms` when it is near, else `None` (also once it is past).
pub fn expires_in(created_at_ms: i64, now_ms: i64, timeout_seconds: u64) -> Option<String> {
    let limit_ms = i64::try_from(timeout_seconds).ok()?.checked_mul(1000)?;
    let remaining_ms = created_at_ms.checked_add(limit_ms)?.checked_sub(now_ms)?;
    let remaining = Duration::from_millis(u64::try_from(remaining_ms).ok()?);
    let timeout = Duration::from_secs(timeout_seconds);
    expiry::near_limit(timeout, remaining).then(|| expiry::time_left(remaining))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_warning_comes_in_the_last_fifth_or_five_minutes() {
        // (timeout s, ms since creation, shown)
        let table = [
            (1800, 0, None),
            (1800, 1_499_999, None),
            (1800, 1_500_000, Some("5 min")),
            (1800, 1_619_000, Some("4 min")),
            (1800, 1_799_000, Some("1 s")),
            (1800, 1_799_999, Some("1 s")),
            (1800, 1_800_000, None),
            (1800, 9_000_000, None),
            (600, 479_999, None),
            (600, 480_000, Some("2 min")),
            (20, 15_999, None),
            (20, 16_000, Some("4 s")),
            (86_400, 86_400_000 - 3_600_000, None),
        ];
        for (timeout, since, want) in table {
            let created = 1_700_000_000_000;
            assert_eq!(
                expires_in(created, created + since, timeout).as_deref(),
                want,
                "{timeout} {since}"
            );
        }
        assert_eq!(expires_in(i64::MAX, 0, u64::MAX), None);
    }
}
