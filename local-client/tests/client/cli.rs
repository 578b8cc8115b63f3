//! The `ultraplan` binary, driven as a user would, with a throwaway HOME.

use assert_cmd::Command;
use assert_cmd::cargo::cargo_bin_cmd;
use tempfile::TempDir;

fn ultraplan(home: &TempDir) -> Command {
    let mut cmd = cargo_bin_cmd!("ultraplan");
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("XDG_CACHE_HOME", home.path().join(".cache"))
        .env("XDG_DATA_HOME", home.path().join(".local/share"))
        .current_dir(home.path());
    cmd
}

fn stdout_of(args: &[&str]) -> String {
    let home = TempDir::new().unwrap();
    let out = ultraplan(&home).args(args).assert().success();
    String::from_utf8(out.get_output().stdout.clone()).unwrap()
}

#[test]
fn keyword_prints_triggers_and_rewrite() {
    assert_eq!(
        stdout_of(&["keyword", "please ultraplan this"]),
        "{\"triggers\":[{\"start\":7,\"end\":16}],\"rewritten\":\"please plan this\"}\n"
    );
    assert_eq!(
        stdout_of(&["keyword", "x ultraplan y ultraplan z"]),
        "{\"triggers\":[{\"start\":2,\"end\":11},{\"start\":14,\"end\":23}],\"rewritten\":\"x plan y ultraplan z\"}\n"
    );
}

#[test]
fn keyword_alone_rewrites_to_the_empty_prompt() {
    assert_eq!(
        stdout_of(&["keyword", "ultraplan"]),
        "{\"triggers\":[{\"start\":0,\"end\":9}],\"rewritten\":\"\"}\n"
    );
    assert_eq!(
        stdout_of(&["keyword", "  ULTRAPLAN "]),
        "{\"triggers\":[{\"start\":2,\"end\":11}],\"rewritten\":\"\"}\n"
    );
}

#[test]
fn keyword_without_trigger_echoes_the_text() {
    assert_eq!(
        stdout_of(&["keyword", "open ultraplan.tsx"]),
        "{\"triggers\":[],\"rewritten\":\"open ultraplan.tsx\"}\n"
    );
    assert_eq!(
        stdout_of(&["keyword", "--ultraplan-mode"]),
        "{\"triggers\":[],\"rewritten\":\"--ultraplan-mode\"}\n"
    );
}

#[test]
fn keyword_handles_unicode() {
    assert_eq!(
        stdout_of(&["keyword", "é ULTRAPLAN “x”"]),
        "{\"triggers\":[{\"start\":3,\"end\":12}],\"rewritten\":\"é PLAN “x”\"}\n"
    );
}

#[test]
fn help_works_everywhere() {
    let home = TempDir::new().unwrap();
    for args in [
        &["--help"][..],
        &["help"],
        &["launch", "--help"],
        &["keyword", "--help"],
        &["reject", "--help"],
        &["hook", "claude-code", "--help"],
    ] {
        let out = ultraplan(&home).args(args).assert().success();
        let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        assert!(text.contains("Usage:"), "{args:?}: {text}");
    }
}

#[test]
fn commands_without_a_server_say_how_to_log_in() {
    let home = TempDir::new().unwrap();
    for args in [
        &["list"][..],
        &["approve", "s1"],
        &["reject", "s1", "-m", "no"],
        &["launch", "--yes", "fix auth"],
        &["fix auth"],
    ] {
        let out = ultraplan(&home).args(args).assert().code(1);
        let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
        assert!(
            stderr.contains("ultraplan login --server URL --token TOKEN"),
            "{args:?}: {stderr}"
        );
        assert!(out.get_output().stdout.is_empty());
    }
}

#[test]
fn status_without_sessions_says_how_to_start() {
    let out = stdout_of(&["status"]);
    assert!(out.contains("No ultraplan session yet"), "{out}");
    assert_eq!(stdout_of(&["status", "--json"]), "null\n");
}

#[test]
fn usage_errors_exit_2() {
    let home = TempDir::new().unwrap();
    ultraplan(&home).args(["reject", "s1"]).assert().code(2);
    ultraplan(&home).args(["keyword"]).assert().code(2);
    let out = ultraplan(&home)
        .args(["--server", "http://127.0.0.1:9", "ultraplan"])
        .assert()
        .code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("say what to plan"), "{stderr}");
}

#[test]
fn bare_ultraplan_without_a_terminal_explains_itself() {
    let home = TempDir::new().unwrap();
    let out = ultraplan(&home).assert().code(2);
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        stderr.contains("the interactive prompt needs a terminal"),
        "{stderr}"
    );
}

fn json_stdout(output: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).unwrap()
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(bytes))
}

#[test]
fn bundle_prints_the_manifest_and_the_sha_of_the_file() {
    let home = TempDir::new().unwrap();
    let tree = home.path().join("tree");
    std::fs::create_dir_all(tree.join("src")).unwrap();
    std::fs::write(tree.join("src/main.rs"), "fn main() {}").unwrap();
    std::fs::write(tree.join(".env"), "TOKEN=x").unwrap();
    let file = home.path().join("b.tar.gz");
    let out = ultraplan(&home)
        .arg("bundle")
        .arg("--out")
        .arg(&file)
        .arg(&tree)
        .assert()
        .success();
    let report = json_stdout(out.get_output());
    let written = std::fs::read(&file).unwrap();
    assert_eq!(report["sha256"], sha256_hex(&written));
    assert_eq!(report["manifest"]["files"], 1);
    assert_eq!(report["manifest"]["bytes"], written.len());
    assert_eq!(report["manifest"]["base_commit"], serde_json::Value::Null);
    assert_eq!(report["skipped"][0]["path"], ".env");
    assert_eq!(report["skipped"][0]["reason"], "secret");
}

#[test]
fn bundle_defaults_to_the_cache_named_by_sha() {
    let home = TempDir::new().unwrap();
    let tree = home.path().join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("a.txt"), "a").unwrap();
    let out = ultraplan(&home).arg("bundle").arg(&tree).assert().success();
    let report = json_stdout(out.get_output());
    let sha = report["sha256"].as_str().unwrap();
    let expected = home
        .path()
        .join(format!(".cache/ultraplan/bundles/{sha}.tar.gz"));
    assert_eq!(report["out"], expected.to_str().unwrap());
    assert_eq!(sha256_hex(&std::fs::read(&expected).unwrap()), sha);
}

#[test]
fn bundle_rejects_bad_levels_and_missing_paths() {
    let home = TempDir::new().unwrap();
    ultraplan(&home)
        .args(["bundle", "--level", "9"])
        .assert()
        .code(2);
    let out = ultraplan(&home)
        .args(["bundle", "--out", "x.tgz", "/nonexistent/dir"])
        .assert()
        .code(1);
    assert!(
        !home.path().join("x.tgz").exists(),
        "partial output left behind"
    );
    let stderr = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(stderr.contains("/nonexistent/dir"), "{stderr}");
}
