//! The warm-up decisions: when a warm-up pays, how children are grouped, how long entries live.

use super::warm_up::*;

fn shared(members: usize, new_tokens: usize, cached_tokens: usize) -> Shared {
    Shared {
        members,
        new_tokens,
        cached_tokens,
    }
}

#[test]
fn warming_pays_when_siblings_would_write_the_same_prefix() {
    let cases = [
        // (members, new, cached, warm?, why)
        (0, 5_000, 0, false, "nobody starts"),
        (1, 5_000, 0, false, "a single child: nothing changes"),
        (1, 0, 0, false, "a single child with nothing new"),
        (2, 1_200, 0, true, "two explorers with a cold prefix"),
        (3, 1_200, 0, true, "three explorers with a cold prefix"),
        (3, 0, 1_200, false, "the prefix is already cached"),
        (
            2,
            150,
            3_300,
            false,
            "two forks: the caller already wrote most of it",
        ),
        (
            3,
            150,
            3_500,
            false,
            "three forks with a short forking message",
        ),
        (
            4,
            600,
            3_300,
            true,
            "four forks after a long forking message",
        ),
        (2, 0, 0, false, "an empty prefix"),
        (
            usize::MAX,
            usize::MAX,
            usize::MAX,
            false,
            "saturates instead of overflowing",
        ),
    ];
    for (members, new, cached, want, why) in cases {
        assert_eq!(
            worth_warming(shared(members, new, cached)),
            want,
            "{why}: {members} members, {new} new, {cached} cached"
        );
    }
}

#[test]
fn children_are_grouped_by_equal_prefix_in_start_order() {
    let cases: [(&[&str], Vec<Vec<usize>>); 5] = [
        (&[], vec![]),
        (&["explore"], vec![vec![0]]),
        (&["explore", "explore", "explore"], vec![vec![0, 1, 2]]),
        (
            &["explore", "critique", "explore"],
            vec![vec![0, 2], vec![1]],
        ),
        (
            &["a", "b", "c", "b", "a"],
            vec![vec![0, 4], vec![1, 3], vec![2]],
        ),
    ];
    for (keys, want) in cases {
        assert_eq!(groups(keys), want, "{keys:?}");
    }
}

#[test]
fn entries_live_five_minutes_from_their_last_use() {
    let cases = [
        (0, 0, true),
        (1_000, 1_000 + CACHE_TTL_MS - 1, true),
        (1_000, 1_000 + CACHE_TTL_MS, false),
        (5_000, 1_000, true),
    ];
    for (at, now, want) in cases {
        assert_eq!(alive(at, now), want, "written at {at}, now {now}");
    }
}
