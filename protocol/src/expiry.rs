//! When a pending plan nears its session's time limit (`timeout_seconds`, counted from the
//! session's `created_at`), the terminal's pill and the review page both say how long is left:
//! in the limit's last fifth or its last five minutes, whichever is shorter.

use std::time::Duration;

/// Longest warning before a pending plan's time limit.
pub const WARN_AT_MOST: Duration = Duration::from_secs(5 * 60);

/// Whether a plan with `remaining` of a `timeout` left is near its limit, and not yet past it.
pub fn near_limit(timeout: Duration, remaining: Duration) -> bool {
    !remaining.is_zero() && remaining <= (timeout / 5).min(WARN_AT_MOST)
}

/// `4 min` (rounded up), or `45 s` under a minute.
pub fn time_left(remaining: Duration) -> String {
    let secs = remaining.as_secs() + u64::from(remaining.subsec_nanos() > 0);
    if secs < 60 {
        format!("{secs} s")
    } else {
        format!("{} min", secs.div_ceil(60))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(secs: u64) -> Duration {
        Duration::from_secs(secs)
    }

    #[test]
    fn the_warning_comes_in_the_last_fifth_or_five_minutes() {
        // (timeout, remaining, near)
        let cases = [
            (s(1800), s(301), false),
            (s(1800), s(300), true),
            (s(1800), s(1), true),
            (s(1800), Duration::ZERO, false),
            (s(100), s(21), false),
            (s(100), s(20), true),
        ];
        for (timeout, remaining, near) in cases {
            assert_eq!(
                near_limit(timeout, remaining),
                near,
                "{timeout:?} {remaining:?}"
            );
        }
    }

    #[test]
    fn time_left_rounds_up() {
        let cases = [
            (s(45), "45 s"),
            (Duration::from_millis(44_001), "45 s"),
            (s(60), "1 min"),
            (s(61), "2 min"),
            (s(240), "4 min"),
        ];
        for (remaining, want) in cases {
            assert_eq!(time_left(remaining), want, "{remaining:?}");
        }
    }
}
