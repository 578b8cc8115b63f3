//! What an append does to its session's row, applied to the remembered row the way the store
//! applied it to the stored one (`store/sql/events.rs`), so the poll after an append needs no
//! read (docs/ARCHITECTURE.md §5).

use ultraplan_protocol::activity::Activity;
use ultraplan_protocol::events::{Event, EventBody};

use crate::store::{AppendEffects, SessionRow, parse_ms};

/// Bring `row` up to date with the append of `events` (stored as `stored`): the newest id, the
/// times and the folded activity. False, and `row` untouched, when the append did more than
/// that (plans, `requires_action`) or does not directly follow the row (someone else appended
/// in between), so the row must be read again.
pub fn apply(
    row: &mut SessionRow,
    events: &[EventBody],
    stored: &[Event],
    effects: &AppendEffects,
) -> bool {
    let (Some(first), Some(last)) = (stored.first(), stored.last()) else {
        return false;
    };
    if !effects.plans.is_empty() || effects.requires_action || row.last_event_id != first.id - 1 {
        return false;
    }
    let Some(at) = parse_ms(&last.created_at) else {
        return false;
    };
    if events.iter().any(Activity::touches) {
        let mut activity = row.activity.clone();
        for body in events {
            activity.apply(body);
        }
        // As the store keeps it: through JSON.
        let Some(read_back) = serde_json::to_string(&activity)
            .ok()
            .and_then(|json| serde_json::from_str(&json).ok())
        else {
            return false;
        };
        row.activity = read_back;
    }
    row.last_event_id = last.id;
    row.updated_at = at;
    row.last_activity_at = at;
    true
}

#[cfg(test)]
mod tests {
    use ultraplan_protocol::events::ContentBlock;

    use super::*;
    use crate::store::cache::memo::tests::row;
    use crate::store::{NewPlan, format_ms};

    fn stored(ids: std::ops::RangeInclusive<i64>, at: i64) -> Vec<Event> {
        ids.map(|id| Event {
            id,
            session_id: "a".to_owned(),
            created_at: format_ms(at),
            body: EventBody::user_text("hi"),
        })
        .collect()
    }

    #[test]
    fn a_plain_append_that_follows_the_row_updates_it() {
        let plan = NewPlan {
            event: 0,
            tool_use_id: "p".to_owned(),
            plan: "do it".to_owned(),
            addressed_comment_ids: None,
        };
        let with_plan = AppendEffects {
            plans: vec![plan],
            ..AppendEffects::default()
        };
        let needs_action = AppendEffects {
            requires_action: true,
            ..AppendEffects::default()
        };
        let plain = AppendEffects::default();
        // (row's newest id, stored ids, effects, updated)
        let cases: [(i64, Vec<Event>, &AppendEffects, bool); 6] = [
            (4, stored(5..=7, 1_000), &plain, true),
            (4, stored(5..=5, 1_000), &plain, true),
            // Someone else appended event 5.
            (4, stored(6..=7, 1_000), &plain, false),
            (4, stored(5..=5, 1_000), &with_plan, false),
            (4, stored(5..=5, 1_000), &needs_action, false),
            (4, Vec::new(), &plain, false),
        ];
        for (last, stored, effects, want) in cases {
            let mut r = row("a", last);
            let bodies: Vec<EventBody> = stored.iter().map(|e| e.body.clone()).collect();
            assert_eq!(apply(&mut r, &bodies, &stored, effects), want, "{stored:?}");
            if want {
                let newest = stored.last().map(|e| e.id);
                assert_eq!(Some(r.last_event_id), newest);
                assert_eq!((r.updated_at, r.last_activity_at), (1_000, 1_000));
            } else {
                assert_eq!(r, row("a", last), "untouched");
            }
        }
    }

    #[test]
    fn tool_calls_fold_into_the_activity() {
        let call = EventBody::assistant(vec![ContentBlock::tool_use(
            "t1",
            "Grep",
            serde_json::json!({"pattern": "x"}),
        )]);
        let mut want = Activity::default();
        want.apply(&call);
        let mut r = row("a", 1);
        let stored = vec![Event {
            id: 2,
            session_id: "a".to_owned(),
            created_at: format_ms(5),
            body: call.clone(),
        }];
        assert!(apply(&mut r, &[call], &stored, &AppendEffects::default()));
        assert_eq!(r.activity, want);
        assert_ne!(r.activity, Activity::default());
    }
}
