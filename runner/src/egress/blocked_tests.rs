use super::*;

fn attempt(host: &str, port: u16, attempts: u32) -> BlockedAttempt {
    BlockedAttempt {
        host: host.to_owned(),
        port,
        attempts,
    }
}

#[test]
fn records_distinct_pairs_in_first_seen_order_with_counts() {
    type Records = &'static [(&'static str, u16)];
    type Want = &'static [(&'static str, u16, u32)];
    let cases: &[(Records, Want)] = &[
        (&[], &[]),
        (&[("a.org", 443)], &[("a.org", 443, 1)]),
        (
            &[
                ("b.org", 443),
                ("a.org", 443),
                ("b.org", 443),
                ("b.org", 80),
            ],
            &[("b.org", 443, 2), ("a.org", 443, 1), ("b.org", 80, 1)],
        ),
    ];
    for (records, want) in cases {
        let mut log = BlockedLog::default();
        for (host, port) in *records {
            log.record(host, *port);
        }
        let want: Vec<_> = want.iter().map(|(h, p, n)| attempt(h, *p, *n)).collect();
        assert_eq!(log.entries(), want, "{records:?}");
        assert_eq!(log.overflow(), 0);
    }
}

#[test]
fn keeps_at_most_the_bound_and_counts_the_rest() {
    let mut log = BlockedLog::default();
    for port in 1..=(MAX_BLOCKED_DISTINCT as u16 + 3) {
        log.record("h", port);
    }
    log.record("h", MAX_BLOCKED_DISTINCT as u16 + 1);
    log.record("h", 1);
    let entries = log.entries();
    assert_eq!(entries.len(), MAX_BLOCKED_DISTINCT);
    assert_eq!(entries[0], attempt("h", 1, 2));
    assert_eq!(log.overflow(), 4);
}
