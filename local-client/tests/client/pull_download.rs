//! `ultraplan pull` reads a patch download with a cap: a body streamed past it, or a
//! `Content-Length` above it (even one that lies), is refused with the cap named, and nothing
//! is touched.

use serde_json::json;

use crate::pull::{Repo, git_in, pull, server_with};
use crate::pull_safety::everything;
use crate::support::Home;
use crate::support::server::{Config, Server, finished, plan};

#[test]
fn an_oversized_download_is_refused_with_the_cap_named() {
    let home = Home::new();
    let repo = Repo::new(home.path());
    let big = repo.patch(|dir| {
        let lines: String = (0..2000).map(|i| format!("line {i}\n")).collect();
        std::fs::write(dir.join("big.txt"), lines).unwrap();
    });
    assert!(big.len() > 8192);
    // (streamed without a length, a Content-Length that lies above the cap)
    for (streamed, claimed) in [(true, None), (false, Some(1u64 << 40))] {
        let server = Server::start(
            Config {
                plans: vec![plan("t1", 1, "approved")],
                session_context: json!({"base": {"commit": repo.base}}),
                executions: vec![finished()],
                patch: big.clone(),
                patch_streamed: streamed,
                patch_claimed_length: claimed,
                ..Config::default()
            },
            vec![],
        );
        let before = everything(&repo);
        let out = home
            .cmd(&repo.path)
            .env("ULTRAPLAN_MAX_PATCH_BYTES", "4096")
            .args(["--server", &server.url, "pull", "sess-1"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("cap of 4096 bytes"), "{stderr}");
        assert!(stderr.contains("ULTRAPLAN_MAX_PATCH_BYTES"), "{stderr}");
        assert_eq!(everything(&repo), before);
    }
    // Under the cap it applies.
    let server = server_with(&repo, big);
    let run = pull(&home, &server, &repo.path, &[]);
    assert_eq!(run.code, 0, "{run}");
    assert_eq!(
        git_in(&repo.path, &["status", "--porcelain"])
            .lines()
            .count(),
        2
    );
}
