//! `/healthz` says which sandbox runs agents and which of its limits this host enforces (the
//! runner crate's sandbox tests prove they hold).

use serde_json::Value;
use ultraplan_runner::sandbox::{SandboxKind, select};

use crate::agents::agent_binary;

/// `/healthz` keeps answering 200 with its fields, and says which limits the selected
/// runner enforces on this host.
#[tokio::test]
async fn sandbox_limits_are_reported_by_healthz() {
    select(SandboxKind::Bwrap, &agent_binary(), "healthz-test")
        .await
        .unwrap_or_else(|e| panic!("bubblewrap must work here (.ci/run installs it): {e}"));
    let server = crate::support::TestServer::start(crate::support::Backend::Sqlite).await;
    let response = server
        .http
        .get(server.url("/healthz"))
        .send()
        .await
        .expect("healthz");
    assert_eq!(response.status().as_u16(), 200);
    let health: Value = response.json().await.expect("json");
    assert_eq!(health["status"], "ok", "{health}");
    assert!(health["version"].is_string(), "{health}");
    let sandbox = &health["sandbox"];
    assert_eq!(sandbox["runner"], "bwrap", "{health}");
    assert!(
        sandbox["cgroup"] == "v1" || sandbox["cgroup"] == "v2",
        "this host has cgroups for sandboxes: {health}"
    );
    assert_eq!(sandbox["seccomp"], true, "{health}");
    assert_eq!(sandbox["unprivileged_uid"], true, "{health}");
    assert_eq!(sandbox["workspace_quota"], "tmpfs", "{health}");
    assert!(sandbox.get("not_enforced").is_none(), "{health}");
}
