use super::*;

const MOUNTINFO: &str = "\
30 25 0:26 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw,nsdelegate
31 25 0:27 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory
32 25 0:28 / /sys/fs/cgroup/pids rw,nosuid - cgroup cgroup rw,pids
33 25 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid - cgroup cgroup rw,cpu,cpuacct
34 25 0:30 / /proc rw - proc proc rw
";

const PROC_CGROUP: &str = "\
9:name=systemd:/
8:pids:/
4:memory:/process_api/34b8
1:cpu,cpuacct:/
0::/
";

#[test]
fn mounts_are_read_from_mountinfo() {
    let mounts = parse_mounts(MOUNTINFO);
    let summary: Vec<(String, bool, Vec<String>)> = mounts
        .iter()
        .map(|m| (m.point.display().to_string(), m.v2, m.controllers.clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("/sys/fs/cgroup/unified".to_owned(), true, vec![]),
            (
                "/sys/fs/cgroup/memory".to_owned(),
                false,
                vec!["memory".to_owned()]
            ),
            (
                "/sys/fs/cgroup/pids".to_owned(),
                false,
                vec!["pids".to_owned()]
            ),
            (
                "/sys/fs/cgroup/cpu,cpuacct".to_owned(),
                false,
                vec!["cpu".to_owned()]
            ),
        ]
    );
}

#[test]
fn the_own_cgroup_is_found_per_controller() {
    let cases = [
        (None, Some("/")),
        (Some("memory"), Some("/process_api/34b8")),
        (Some("pids"), Some("/")),
        (Some("cpu"), Some("/")),
        (Some("cpuacct"), Some("/")),
        (Some("blkio"), None),
    ];
    for (controller, want) in cases {
        assert_eq!(
            own_path(PROC_CGROUP, controller).as_deref(),
            want,
            "{controller:?}"
        );
    }
    assert_eq!(
        own_path("0::/user.slice/x\n", None).as_deref(),
        Some("/user.slice/x")
    );
}

#[test]
fn limits_become_the_right_files() {
    let limits = SandboxLimits {
        memory_bytes: 1024,
        processes: 64,
        ..SandboxLimits::default()
    };
    let files = |v2, c| {
        limit_files(v2, c, &limits)
            .into_iter()
            .map(|(f, v)| format!("{f}={v}"))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        files(true, "all"),
        [
            "memory.max=1024",
            "memory.swap.max=0",
            "pids.max=64",
            "cpu.max=100000 100000"
        ]
    );
    assert_eq!(
        files(false, "memory"),
        [
            "memory.limit_in_bytes=1024",
            "memory.memsw.limit_in_bytes=1024"
        ]
    );
    assert_eq!(files(false, "pids"), ["pids.max=64"]);
    assert_eq!(
        files(false, "cpu"),
        ["cpu.cfs_period_us=100000", "cpu.cfs_quota_us=100000"]
    );
    assert!(files(false, "blkio").is_empty());
}

#[test]
fn modes_describe_themselves() {
    let v1 = CgroupMode::V1 {
        memory: "/m".into(),
        pids: "/p".into(),
        cpu: Some("/c".into()),
    };
    assert_eq!(v1.describe(), "cgroup v1 (memory, pids, cpu)");
    assert_eq!(v1.short(), "v1");
    let none = CgroupMode::None("no cgroup hierarchy".into());
    assert_eq!(none.describe(), "not enforced: no cgroup hierarchy");
    let v2 = CgroupMode::V2 {
        parent: "/sys/fs/cgroup/x".into(),
    };
    assert!(
        v2.describe()
            .starts_with("cgroup v2 (delegated subtree /sys/fs/cgroup/x")
    );
}
