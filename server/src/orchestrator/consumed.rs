//! A session that dies says what it consumed: its terminal error `result` carries the
//! session's usage and how long it ran, in its fields and in its text.

use std::time::Duration;

use ultraplan_protocol::events::EventBody;
use ultraplan_protocol::model::Usage;
use ultraplan_protocol::usage::thousands;

/// Marks a result that already says what was consumed.
const SAID: &str = "It used ";

/// `event`, when it is a terminal error result that does not say yet what was consumed, told
/// the session's `usage` (the gateway's count, which replaces an agent's own count of its
/// run) and `elapsed`; any other event unchanged.
pub fn account(mut event: EventBody, usage: Usage, elapsed: Duration) -> EventBody {
    let EventBody::Result(result) = &mut event else {
        return event;
    };
    let said = result.result.as_deref().is_some_and(|t| t.contains(SAID));
    if !result.is_error || !result.is_terminal() || said {
        return event;
    }
    result.usage = Some(usage);
    result.duration_ms = Some(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
    let line = format!("{SAID}{} in {}.", tokens(usage), duration(elapsed));
    result.result = Some(match result.result.take() {
        Some(text) if !text.trim().is_empty() => format!("{} {line}", text.trim_end()),
        _ => line,
    });
    event
}

/// `12,345 tokens (10,000 in, 2,345 out, 3,000 read from cache)`; `no model tokens`.
fn tokens(usage: Usage) -> String {
    if usage.total() == 0 {
        return "no model tokens".to_owned();
    }
    let mut parts = vec![
        format!("{} in", thousands(usage.input_tokens)),
        format!("{} out", thousands(usage.output_tokens)),
    ];
    if usage.cache_read_input_tokens > 0 {
        parts.push(format!(
            "{} read from cache",
            thousands(usage.cache_read_input_tokens)
        ));
    }
    if usage.cache_creation_input_tokens > 0 {
        parts.push(format!(
            "{} written to cache",
            thousands(usage.cache_creation_input_tokens)
        ));
    }
    format!("{} tokens ({})", thousands(usage.total()), parts.join(", "))
}

/// `45 s`, `2 min 14 s`, `1 h 03 min`.
fn duration(elapsed: Duration) -> String {
    let secs = elapsed.as_secs();
    match secs {
        0..60 => format!("{secs} s"),
        60..3600 => format!("{} min {:02} s", secs / 60, secs % 60),
        _ => format!("{} h {:02} min", secs / 3600, (secs % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, output: u64, read: u64) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_input_tokens: read,
            ..Usage::default()
        }
    }

    #[test]
    fn a_dying_session_says_what_it_consumed() {
        let cases = [
            (
                EventBody::error_result(
                    "error_timeout",
                    "The session ran past its 1800-second limit.".into(),
                ),
                usage(10_000, 2_345, 3_000),
                134,
                Some(
                    "The session ran past its 1800-second limit. It used 15,345 tokens (10,000 in, 2,345 out, 3,000 read from cache) in 2 min 14 s.",
                ),
            ),
            (
                EventBody::error_result(
                    "error_during_execution",
                    "The agent stopped unexpectedly: it exited with signal 9.".into(),
                ),
                Usage::default(),
                5,
                Some(
                    "The agent stopped unexpectedly: it exited with signal 9. It used no model tokens in 5 s.",
                ),
            ),
            (
                EventBody::error_result("error_budget", String::new()),
                usage(999, 1, 0),
                3_780,
                Some("It used 1,000 tokens (999 in, 1 out) in 1 h 03 min."),
            ),
        ];
        for (event, used, secs, want) in cases {
            let got = account(event, used, Duration::from_secs(secs));
            let EventBody::Result(r) = got else {
                panic!("not a result");
            };
            assert_eq!(r.result.as_deref(), want);
            assert_eq!(r.usage, Some(used));
            assert_eq!(r.duration_ms, Some(secs * 1000));
        }
    }

    #[test]
    fn other_events_are_left_alone() {
        let mut success = EventBody::error_result("success", "done".into());
        if let EventBody::Result(r) = &mut success {
            r.is_error = false;
        }
        let already = account(
            EventBody::error_result("error_timeout", "x".into()),
            usage(1, 1, 0),
            Duration::from_secs(1),
        );
        for event in [EventBody::user_text("hi"), success, already] {
            assert_eq!(
                account(event.clone(), usage(5, 5, 0), Duration::from_secs(9)),
                event
            );
        }
    }
}
