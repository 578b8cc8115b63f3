use super::*;

fn entries(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

fn exact(host: &str, port: Option<u16>) -> HostRule {
    HostRule {
        host: HostPattern::Exact(host.to_owned()),
        port,
    }
}

#[test]
fn parse_accepts_each_entry_form() {
    let subdomains = |s: &str, port| HostRule {
        host: HostPattern::Subdomains(s.to_owned()),
        port,
    };
    let cases: Vec<(&[&str], NetworkPolicy)> = vec![
        (&[], NetworkPolicy::None),
        (&["*"], NetworkPolicy::All),
        (
            &["pypi.org"],
            NetworkPolicy::Allow(vec![exact("pypi.org", None)]),
        ),
        (
            &["PyPI.org."],
            NetworkPolicy::Allow(vec![exact("pypi.org", None)]),
        ),
        (
            &["pypi.org:8080"],
            NetworkPolicy::Allow(vec![exact("pypi.org", Some(8080))]),
        ),
        (
            &["10.0.0.1:65535"],
            NetworkPolicy::Allow(vec![exact("10.0.0.1", Some(65535))]),
        ),
        (
            &["*.example.com"],
            NetworkPolicy::Allow(vec![subdomains("example.com", None)]),
        ),
        (
            &["*.Example.com:8443"],
            NetworkPolicy::Allow(vec![subdomains("example.com", Some(8443))]),
        ),
        (
            &["[::1]:8000"],
            NetworkPolicy::Allow(vec![exact("::1", Some(8000))]),
        ),
        (
            &["[0:0::1]"],
            NetworkPolicy::Allow(vec![exact("::1", None)]),
        ),
        (
            &["fe80::1"],
            NetworkPolicy::Allow(vec![exact("fe80::1", None)]),
        ),
        (
            &["my_host", "a.b:1"],
            NetworkPolicy::Allow(vec![exact("my_host", None), exact("a.b", Some(1))]),
        ),
    ];
    for (input, want) in cases {
        assert_eq!(NetworkPolicy::parse(&entries(input)), Ok(want), "{input:?}");
    }
}

#[test]
fn parse_rejects_bad_entries_with_a_reason() {
    let cases: &[(&str, &str)] = &[
        ("", "empty"),
        ("pypi .org", "whitespace"),
        (" pypi.org", "whitespace"),
        ("http://pypi.org", "drop the scheme"),
        ("https://pypi.org:443", "drop the scheme"),
        ("pypi.org/simple", "drop the path"),
        ("pypi.org:0", "1 to 65535"),
        ("pypi.org:65536", "1 to 65535"),
        ("pypi.org:", "1 to 65535"),
        ("pypi.org:+80", "1 to 65535"),
        ("pypi.org:http", "1 to 65535"),
        ("py$pi.org", "only letters"),
        ("pypi..org", "empty label"),
        (".pypi.org", "empty label"),
        ("*.", "`*`"),
        ("*pypi.org", "`*`"),
        ("a.*.org", "`*`"),
        ("*:80", "`*`"),
        ("::1:80:x", "brackets"),
        ("[::1", "closing"),
        ("[::1]8000", "`[address]:port`"),
        ("[pypi.org]:80", "only an IPv6"),
    ];
    for (entry, reason) in cases {
        let err = NetworkPolicy::parse(&entries(&[entry])).expect_err(entry);
        let text = err.to_string();
        assert!(text.contains(reason), "{entry:?}: {text}");
        assert!(text.contains(&format!("{entry:?}")), "{entry:?}: {text}");
    }
}

#[test]
fn a_star_mixed_with_other_entries_is_an_error() {
    for list in [&["*", "pypi.org"][..], &["pypi.org", "*"], &["*", "*"]] {
        assert_eq!(
            NetworkPolicy::parse(&entries(list)),
            Err(PolicyError::MixedWildcard),
            "{list:?}"
        );
    }
}

#[test]
fn allows_matches_hosts_and_ports() {
    let policy = NetworkPolicy::parse(&entries(&[
        "pypi.org",
        "*.pythonhosted.org",
        "registry.local:5000",
        "[::1]:8000",
        "127.0.0.1:9000",
    ]))
    .expect("policy");
    let cases: &[(&str, u16, bool)] = &[
        ("pypi.org", 443, true),
        ("pypi.org", 80, true),
        ("PYPI.ORG.", 443, true),
        ("pypi.org", 8080, false),
        ("www.pypi.org", 443, false),
        ("files.pythonhosted.org", 443, true),
        ("a.b.pythonhosted.org", 80, true),
        ("pythonhosted.org", 443, false),
        ("evilpythonhosted.org", 443, false),
        ("registry.local", 5000, true),
        ("registry.local", 443, false),
        ("::1", 8000, true),
        ("[::1]", 8000, true),
        ("0:0:0:0:0:0:0:1", 8000, true),
        ("::1", 443, false),
        ("127.0.0.1", 9000, true),
        ("127.0.0.1", 9001, false),
        ("example.com", 443, false),
    ];
    for (host, port, want) in cases {
        assert_eq!(policy.allows(host, *port), *want, "{host}:{port}");
    }
}

#[test]
fn none_refuses_and_all_allows() {
    for (host, port) in [("pypi.org", 443), ("127.0.0.1", 1)] {
        assert!(!NetworkPolicy::None.allows(host, port));
        assert!(NetworkPolicy::All.allows(host, port));
    }
}

#[test]
fn display_describes_the_policy() {
    let cases: &[(&[&str], &str)] = &[
        (&[], "no network access"),
        (&["*"], "any host"),
        (
            &["PyPI.org", "*.example.com:8443", "[::1]:8000", "10.0.0.1"],
            "pypi.org, *.example.com:8443, [::1]:8000, 10.0.0.1",
        ),
    ];
    for (input, want) in cases {
        let policy = NetworkPolicy::parse(&entries(input)).expect("policy");
        assert_eq!(policy.to_string(), *want);
    }
}
