//! Tails: consecutive ids only, answered only when they end at the session's newest event and
//! hold everything the poller lacks, bounded per session and in total.

use ultraplan_protocol::events::{Event, EventBody};

use super::*;

fn event(id: i64, text: &str) -> Event {
    Event {
        id,
        session_id: "s".to_owned(),
        created_at: "2026-12-03T00:00:00.000Z".to_owned(),
        body: EventBody::user_text(text),
    }
}

fn events(ids: std::ops::RangeInclusive<i64>) -> Vec<Event> {
    ids.map(|id| event(id, "hi")).collect()
}

fn ids(answer: Option<Vec<Event>>) -> Option<Vec<i64>> {
    answer.map(|events| events.iter().map(|e| e.id).collect())
}

#[test]
fn answers_only_what_it_holds_up_to_the_newest_event() {
    // (pushed batches, after_id, newest id per the row, limit, answer)
    type Case = (&'static [(i64, i64)], i64, i64, u32, Option<&'static [i64]>);
    let cases: [Case; 10] = [
        (&[(5, 7)], 4, 7, 100, Some(&[5, 6, 7])),
        (&[(5, 7)], 6, 7, 100, Some(&[7])),
        // The poller lacks event 4, which the tail never held.
        (&[(5, 7)], 3, 7, 100, None),
        // Another process appended event 8: the tail does not end at the newest.
        (&[(5, 7)], 6, 8, 100, None),
        // Nothing is new: that answer is the row's, not the tail's.
        (&[(5, 7)], 7, 7, 100, None),
        // More than a page.
        (&[(5, 7)], 4, 7, 2, None),
        // Consecutive batches join.
        (&[(5, 7), (8, 9)], 4, 9, 100, Some(&[5, 6, 7, 8, 9])),
        // A gap (someone else's append between) starts the tail over.
        (&[(5, 7), (9, 9)], 7, 9, 100, None),
        (&[(5, 7), (9, 9)], 8, 9, 100, Some(&[9])),
        // An older batch arriving late starts over too, and no longer ends at the newest.
        (&[(8, 9), (5, 7)], 7, 9, 100, None),
    ];
    for (pushes, after_id, last_id, limit, want) in cases {
        let tails = Tails::default();
        for (from, to) in pushes {
            tails.push("s", &events(*from..=*to));
        }
        let got = ids(tails.after("s", after_id, last_id, limit));
        assert_eq!(
            got,
            want.map(<[i64]>::to_vec),
            "{pushes:?} after {after_id}"
        );
        assert_eq!(tails.after("other", after_id, last_id, limit), None);
    }
}

#[test]
fn a_tail_keeps_its_newest_events_within_its_bounds() {
    let tails = Tails::default();
    tails.push("s", &events(1..=(MAX_EVENTS as i64 + 10)));
    let last = MAX_EVENTS as i64 + 10;
    assert_eq!(
        tails.after("s", 10, last, 1000).map(|e| e.len()),
        Some(MAX_EVENTS)
    );
    assert_eq!(tails.after("s", 9, last, 1000), None);

    // Four such events fit, a fifth pushes the first out.
    let big = "x".repeat(MAX_BYTES / 4 - 200);
    let batch: Vec<Event> = (1..=5).map(|id| event(id, &big)).collect();
    tails.push("b", &batch);
    assert_eq!(ids(tails.after("b", 1, 5, 100)), Some(vec![2, 3, 4, 5]));
    assert_eq!(tails.after("b", 0, 5, 100), None);
    // One event larger than a tail may hold leaves nothing behind.
    tails.push("huge", &[event(1, &"y".repeat(MAX_BYTES + 1))]);
    assert_eq!(tails.after("huge", 0, 1, 100), None);
}

#[test]
fn all_tails_together_stay_within_the_total() {
    let tails = Tails::default();
    let big = "x".repeat(MAX_BYTES / 2 - 200);
    let sessions = 2 * MAX_TOTAL_BYTES / MAX_BYTES;
    for n in 0..sessions {
        tails.push(&format!("s{n}"), &[event(1, &big)]);
        assert!(
            tails.bytes() <= MAX_TOTAL_BYTES,
            "after {n}: {}",
            tails.bytes()
        );
    }
    // The newest push always stays.
    let newest = format!("s{}", sessions - 1);
    assert!(tails.after(&newest, 0, 1, 100).is_some());
    tails.forget(&newest);
    assert_eq!(tails.after(&newest, 0, 1, 100), None);
}

#[test]
fn events_are_held_as_the_database_gives_them_back() {
    let tails = Tails::default();
    let body: EventBody = serde_json::from_value(serde_json::json!({
        "type": "assistant",
        "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Grep", "input": {"pattern": "é", "n": 1.5e300}}
        ]}
    }))
    .unwrap();
    let stored = Event {
        body: body.clone(),
        ..event(1, "")
    };
    tails.push("s", std::slice::from_ref(&stored));
    let read: EventBody = serde_json::from_str(&serde_json::to_string(&body).unwrap()).unwrap();
    let held = tails.after("s", 0, 1, 10).unwrap();
    assert_eq!(held[0].body, read);
    assert_eq!(
        serde_json::to_value(&held[0]).unwrap(),
        serde_json::to_value(&stored).unwrap()
    );
}
