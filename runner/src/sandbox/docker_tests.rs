use std::path::PathBuf;

use super::*;
use crate::sandbox::SandboxLimits;

#[test]
fn containers_are_locked_down() {
    let req = SandboxRequest {
        session_id: "s1".into(),
        workspace: PathBuf::from("/data/bundles/abc"),
        writable: false,
        agent_binary: PathBuf::from("/opt/agent"),
        limits: SandboxLimits::default(),
        log_filter: "info".into(),
        environment: None,
        purpose: Default::default(),
        base_image: None,
        agent_egress: None,
    };
    let spec = container_spec(&req, "ultraplan-agent:abc", "inst1");
    let host = spec.host_config.clone().expect("host config");
    assert_eq!(host.network_mode.as_deref(), Some("none"));
    assert_eq!(host.readonly_rootfs, Some(true));
    assert_eq!(host.cap_drop, Some(vec!["ALL".to_owned()]));
    assert_eq!(
        host.security_opt,
        Some(vec!["no-new-privileges".to_owned()])
    );
    assert_eq!(
        host.binds,
        Some(vec!["/data/bundles/abc:/workspace:ro".to_owned()])
    );
    assert_eq!(host.memory, Some(2 * 1024 * 1024 * 1024));
    assert_eq!(host.memory_swap, host.memory);
    assert_eq!(host.nano_cpus, Some(1_000_000_000));
    // No `seccomp=unconfined`: the daemon's default profile applies.
    assert!(
        !host
            .security_opt
            .iter()
            .flatten()
            .any(|o| o.contains("seccomp"))
    );
    assert_eq!(host.pids_limit, Some(256));
    let fsize = host.ulimits.clone().unwrap_or_default();
    assert_eq!(fsize.first().and_then(|u| u.hard), Some(256 * 1024 * 1024));
    assert!(host.privileged.is_none());
    assert_eq!(spec.user.as_deref(), Some("65534:65534"));
    assert_eq!(spec.network_disabled, Some(true));
    let env = spec.env.clone().unwrap_or_default();
    assert!(env.iter().all(|e| !e.contains("KEY")), "{env:?}");
    let labels = spec.labels.clone().unwrap_or_default();
    assert_eq!(labels.get(SESSION_LABEL).map(String::as_str), Some("s1"));
    assert_eq!(
        labels.get(INSTANCE_LABEL).map(String::as_str),
        Some("inst1")
    );
    let writable = SandboxRequest {
        writable: true,
        ..req
    };
    let toolchain = vec!["/usr".to_owned(), "/etc/passwd".to_owned()];
    // (server uid, container user)
    for (server_uid, user) in [(0, "65534:65534"), (1000, "1000:1000")] {
        let spec = container_spec_with(&writable, "i", "inst1", &toolchain, server_uid);
        assert_eq!(spec.user.as_deref(), Some(user));
        let binds = spec.host_config.and_then(|h| h.binds).unwrap_or_default();
        assert_eq!(
            binds,
            vec![
                "/data/bundles/abc:/workspace:rw".to_owned(),
                "/usr:/usr:ro".to_owned(),
                "/etc/passwd:/etc/passwd:ro".to_owned(),
            ]
        );
    }
}

#[test]
fn the_build_context_holds_the_dockerfile_and_agent() {
    let context = build_context(b"\x7fELF").expect("tar");
    let mut archive = tar::Archive::new(context.as_slice());
    let names: Vec<String> = archive
        .entries()
        .expect("entries")
        .map(|e| {
            e.expect("entry")
                .path()
                .expect("path")
                .display()
                .to_string()
        })
        .collect();
    assert_eq!(names, vec!["Dockerfile", "ultraplan-agent"]);
    assert!(DOCKERFILE.starts_with("FROM scratch"));
}

#[test]
fn a_base_image_replaces_the_agent_image_and_the_host_toolchain() {
    let req = SandboxRequest {
        session_id: "s1".into(),
        workspace: PathBuf::from("/data/ws"),
        writable: true,
        agent_binary: PathBuf::from("/opt/agent"),
        limits: SandboxLimits::default(),
        log_filter: "info".into(),
        environment: Some(PathBuf::from("/data/env/k/tree")),
        purpose: Default::default(),
        base_image: Some("sha256:feed".into()),
        agent_egress: None,
    };
    let toolchain = ["/usr".to_owned()];
    let spec = container_spec_with(&req, "ultraplan-agent:abc", "inst1", &toolchain, 0);
    assert_eq!(spec.image.as_deref(), Some("sha256:feed"));
    assert_eq!(spec.entrypoint, Some(vec![AGENT_MOUNT.to_owned()]));
    assert_eq!(spec.cmd, Some(Vec::new()));
    let binds = spec.host_config.and_then(|h| h.binds).unwrap_or_default();
    assert_eq!(
        binds,
        [
            "/data/ws:/workspace:rw",
            "/opt/agent:/ultraplan-agent:ro",
            "/data/env/k/tree:/env:ro"
        ]
    );
    // Locked down as ever.
    let setup = SandboxRequest {
        purpose: crate::sandbox::spec::Purpose::Setup { egress: None },
        ..req
    };
    let spec = container_spec_with(&setup, "ultraplan-agent:abc", "inst1", &toolchain, 0);
    assert_eq!(spec.cmd, Some(vec!["setup".to_owned()]));
    assert_eq!(spec.network_disabled, Some(true));
    assert_eq!(spec.host_config.and_then(|h| h.readonly_rootfs), Some(true));
}
