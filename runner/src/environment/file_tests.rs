use super::*;

#[test]
fn the_documented_shape_parses() {
    let file = parse(
        r#"
[setup]
commands = ["python3 -m pip install --no-index --find-links http://127.0.0.1:8000/ tinypkg"]
network = ["127.0.0.1:8000"]   # host:port reachable during setup only
secrets = ["PIP_TOKEN"]
[agent]
network = []
"#,
    )
    .expect("parses");
    assert_eq!(file.setup.len(), 1);
    assert_eq!(file.setup_network, vec!["127.0.0.1:8000"]);
    assert_eq!(file.secrets, vec!["PIP_TOKEN"]);
    assert_eq!(file.timeout, None);
}

#[test]
fn network_spellings() {
    let cases = [
        (r#"network = "none""#, Ok(vec![])),
        (r#"network = "all""#, Ok(vec!["*"])),
        (r#"network = ["*"]"#, Ok(vec!["*"])),
        (
            r#"network = { allow = ["pypi.org", "*.pythonhosted.org:443"] }"#,
            Ok(vec!["pypi.org", "*.pythonhosted.org:443"]),
        ),
        (r#"network = "some""#, Err("is not a network policy")),
        ("", Ok(vec![])),
    ];
    for (line, want) in cases {
        let text = format!("[setup]\ncommands = [\"true\"]\n{line}\n");
        let got = parse(&text).map(|f| f.setup_network);
        match want {
            Ok(entries) => assert_eq!(
                got,
                Ok(entries.iter().map(|e| (*e).to_owned()).collect()),
                "{line}"
            ),
            Err(part) => assert!(got.unwrap_err().0.contains(part), "{line}"),
        }
    }
}

#[test]
fn refusals_say_what_to_change() {
    let cases = [
        ("[setup]\ncommand = [\"x\"]", "unknown field"),
        ("[setup]\ncommands = [\"\"]", "a command is empty"),
        (
            "[setup]\nsecrets = [\"pip_token\"]",
            "only upper-case letters",
        ),
        ("[setup]\nsecrets = [\"PATH\"]", "set by the sandbox itself"),
        ("[setup]\ntimeout_seconds = 0", "at least 1"),
        (
            "[setup]\nlock_files = [\"../x.lock\"]",
            "relative path inside",
        ),
        (
            "[setup]\nlock_files = [\"/etc/passwd\"]",
            "relative path inside",
        ),
        ("[agent]\nnetwork = \"some\"", "is not a network policy"),
        (
            "[base]\nimage = \"-v /:/host\"",
            "not a Docker image reference",
        ),
        ("[base]\nimage = \"\"", "not a Docker image reference"),
        ("[base]\nimage = \"a/../b\"", "not a Docker image reference"),
        ("[setup\n", "environment.toml"),
    ];
    for (text, want) in cases {
        let err = parse(text).expect_err(text);
        assert!(err.to_string().contains(want), "{text}: {err}");
        assert!(err.to_string().starts_with(ENVIRONMENT_FILE), "{err}");
    }
}

#[test]
fn every_section_is_read() {
    let file = parse(
        r#"
[base]
image = "host"
[setup]
commands = ["a", "b"]
secrets = ["B_TOKEN", "A_TOKEN", "A_TOKEN"]
timeout_seconds = 30
lock_files = ["requirements.txt", "poetry.lock"]
[maintenance]
commands = ["git pull"]
[verify]
commands = ["python3 -m pytest -q"]
"#,
    )
    .expect("parses");
    assert_eq!(file.setup, vec!["a", "b"]);
    assert_eq!(
        file.secrets,
        vec!["A_TOKEN", "B_TOKEN"],
        "sorted, once each"
    );
    assert_eq!(file.timeout, Some(Duration::from_secs(30)));
    assert_eq!(file.lock_files, vec!["poetry.lock", "requirements.txt"]);
    assert_eq!(file.maintenance, vec!["git pull"]);
    assert_eq!(file.verify, vec!["python3 -m pytest -q"]);
    assert_eq!(file.base_image, None, "host");
    assert!(
        file.agent_network.is_empty(),
        "the agent has no network by default"
    );
    let open = parse("[agent]\nnetwork = [\"pypi.org:443\"]").expect("agent allow-list");
    assert_eq!(open.agent_network, ["pypi.org:443"]);
    let image =
        parse("[base]\nimage = \"registry.local:5000/team/py@sha256:ab12\"").expect("image");
    assert_eq!(
        image.base_image.as_deref(),
        Some("registry.local:5000/team/py@sha256:ab12")
    );
}

#[test]
fn secret_names_and_relative_paths() {
    for (name, ok) in [
        ("PIP_TOKEN", true),
        ("_X", true),
        ("A1", true),
        ("1A", false),
        ("a", false),
        ("", false),
        ("A-B", false),
    ] {
        let file = format!("[setup]\nsecrets = [{name:?}]");
        assert_eq!(parse(&file).is_ok(), ok, "{name}");
    }
    for (path, ok) in [
        ("a/b.lock", true),
        ("a//b", false),
        ("./a", false),
        ("a/../b", false),
        ("", false),
        ("/a", false),
    ] {
        assert_eq!(plain_relative(path), ok, "{path}");
    }
}
