use std::collections::BTreeMap;

use super::*;

fn paths() -> SetupPaths {
    SetupPaths {
        env_root: PathBuf::from("/env"),
        workspace: PathBuf::from("/workspace"),
        egress_socket: PathBuf::from("/run/ultraplan/egress.sock"),
        relay_port: 3128,
    }
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

const PATH: &str = "/env/venv/bin:/env/bin:/usr/local/bin:/usr/bin:/bin";
const FIXED: [(&str, &str); 6] = [
    ("LANG", "C.UTF-8"),
    ("TMPDIR", "/tmp"),
    ("PIP_DISABLE_PIP_VERSION_CHECK", "1"),
    ("PIP_NO_INPUT", "1"),
    ("DEBIAN_FRONTEND", "noninteractive"),
    ("CI", "true"),
];
const PROXY: [(&str, &str); 6] = [
    ("HTTP_PROXY", "http://127.0.0.1:3128"),
    ("HTTPS_PROXY", "http://127.0.0.1:3128"),
    ("http_proxy", "http://127.0.0.1:3128"),
    ("https_proxy", "http://127.0.0.1:3128"),
    ("NO_PROXY", ""),
    ("no_proxy", ""),
];

fn expected(venv: bool, egress: bool, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut want = vec![
        ("PATH", PATH),
        ("HOME", "/env/home"),
        ("ULTRAPLAN_ENV", "/env"),
    ];
    if venv {
        want.push(("VIRTUAL_ENV", "/env/venv"));
    }
    want.extend(FIXED);
    if egress {
        want.extend(PROXY);
    }
    want.extend(extra);
    pairs(&want)
}

#[test]
fn command_env_builds_the_base_and_puts_the_input_on_top() {
    let input = |egress: bool, env: &[(&str, &str)]| SetupInput {
        commands: vec![],
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
        egress,
    };
    let cases = [
        (false, input(false, &[]), expected(false, false, &[])),
        (true, input(false, &[]), expected(true, false, &[])),
        (false, input(true, &[]), expected(false, true, &[])),
        (
            true,
            input(true, &[("TOKEN", "s3cret"), ("A", "1")]),
            expected(true, true, &[("A", "1"), ("TOKEN", "s3cret")]),
        ),
    ];
    for (venv, input, want) in cases {
        assert_eq!(command_env(&paths(), venv, &input), want, "{input:?}");
    }
}

#[test]
fn an_input_variable_replaces_a_base_one_in_place() {
    let input = SetupInput {
        commands: vec![],
        env: BTreeMap::from([("CI".to_owned(), "false".to_owned())]),
        egress: false,
    };
    let env = command_env(&paths(), false, &input);
    let ci: Vec<_> = env.iter().filter(|(k, _)| k == "CI").collect();
    assert_eq!(ci, vec![&("CI".to_owned(), "false".to_owned())]);
    assert_eq!(env.len(), expected(false, false, &[]).len());
}

#[test]
fn from_vars_reads_overrides_and_defaults() {
    let vars = |list: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            list.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    assert_eq!(SetupPaths::from_vars(vars(&[])).ok(), Some(paths()));
    let custom = SetupPaths::from_vars(vars(&[
        ("ULTRAPLAN_ENV", "/tmp/e"),
        ("ULTRAPLAN_WORKSPACE", "/tmp/w"),
        ("ULTRAPLAN_EGRESS_SOCKET", "/tmp/s.sock"),
        ("ULTRAPLAN_EGRESS_PORT", "4000"),
    ]))
    .ok();
    let want = SetupPaths {
        env_root: PathBuf::from("/tmp/e"),
        workspace: PathBuf::from("/tmp/w"),
        egress_socket: PathBuf::from("/tmp/s.sock"),
        relay_port: 4000,
    };
    assert_eq!(custom, Some(want));
    for bad in [
        &[("ULTRAPLAN_EGRESS_PORT", "0")][..],
        &[("ULTRAPLAN_EGRESS_PORT", "x")],
    ] {
        let err = SetupPaths::from_vars(vars(bad))
            .err()
            .map(|e| e.to_string());
        assert!(
            err.is_some_and(|e| e.contains("ULTRAPLAN_EGRESS_PORT")),
            "{bad:?}"
        );
    }
}

#[test]
fn find_program_takes_the_first_executable_on_the_path() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().expect("tempdir");
    let (first, second) = (dir.path().join("a"), dir.path().join("b"));
    for d in [&first, &second] {
        std::fs::create_dir(d).expect("mkdir");
    }
    std::fs::write(first.join("tool"), "not executable").expect("write");
    std::fs::write(second.join("tool"), "#!/bin/sh\n").expect("write");
    let exec = std::fs::Permissions::from_mode(0o755);
    std::fs::set_permissions(second.join("tool"), exec).expect("chmod");
    let search = format!("{}::{}", first.display(), second.display());
    let cases = [("tool", Some(second.join("tool"))), ("missing", None)];
    for (name, want) in cases {
        assert_eq!(find_program(&search, name), want, "{name}");
    }
}
