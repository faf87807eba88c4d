//! NUMA-local placement with real containers on this host (issue 5). The placement
//! rules themselves are unit-tested against fixture hosts (src/numa.rs); here: what a
//! one-node host does with `auto`, and that `node:N` reaches the cgroup's cpuset.
//! Needs root; skips loudly without it.

use crate::common;

use std::path::PathBuf;

use common::{Container, TestEnv};
use siloc::numa::topology::{CpuList, Topology};

/// The container's cgroup v1 directory for `controller` (or its v2 directory), from
/// /proc/PID/cgroup of its init.
fn cgroup_dir(env: &TestEnv, id: &str, controller: &str) -> PathBuf {
    let pid = env.state(id)["pid"].as_i64().expect("pid");
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).expect("cgroup file");
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (_, ctrls, path) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or(""));
        if ctrls.split(',').any(|c| c == controller) {
            return PathBuf::from("/sys/fs/cgroup")
                .join(controller)
                .join(path.trim_start_matches('/'));
        }
        if ctrls.is_empty() && !PathBuf::from("/sys/fs/cgroup").join(controller).exists() {
            return PathBuf::from("/sys/fs/cgroup").join(path.trim_start_matches('/'));
        }
    }
    panic!("no {controller} cgroup for {id}: {text}");
}

fn read(p: PathBuf) -> String {
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .trim()
        .to_string()
}

fn cpuset_file(env: &TestEnv, id: &str, name: &str) -> String {
    let dir = cgroup_dir(env, id, "cpuset");
    // v1 names the file cpuset.cpus; v2 shows the effective set in cpuset.cpus.effective
    let p = dir.join(name);
    read(if p.exists() {
        p
    } else {
        dir.join(format!("{name}.effective"))
    })
}

/// No cgroup of this id is left in any hierarchy.
fn no_cgroups(id: &str) -> bool {
    let name = format!("siloc-{id}");
    ["cpuset", "blkio", "memory", "pids", "unified", ""]
        .iter()
        .all(|c| !PathBuf::from("/sys/fs/cgroup").join(c).join(&name).exists())
}

#[test]
fn auto_on_a_one_node_host_runs_unplaced_and_says_why() {
    needs_root!();
    let topo = Topology::read("/sys".as_ref()).expect("topology");
    if topo.is_multi_node() {
        eprintln!("SKIPPED: this host has {} NUMA nodes", topo.nodes.len());
        return;
    }
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["sleep", "1000"]);
    b.annotate("io.siloc.numa", "auto");
    let id = env.id("auto");
    let (ok, _, err) = env.detached(&["--debug", "create", "--bundle", b.path(), &id]);
    assert!(ok, "create: {err}");
    let _c = Container {
        env: &env,
        id: id.clone(),
    };
    env.ok(&["start", &id]);
    let decision = env.state(&id)["annotations"]["io.siloc.numa.decision"]
        .as_str()
        .expect("decision annotation")
        .to_string();
    assert!(
        decision.starts_with("mode=auto nodes=- cpus=- mems=- devices=")
            && decision.contains("reason=one NUMA node on this host"),
        "{decision}"
    );
    assert!(
        err.contains("NUMA placement: mode=auto"),
        "the decision is logged: {err}"
    );
    // unplaced: the container's cpuset is its parent's, and the final spec sets none
    let dir = cgroup_dir(&env, &id, "cpuset");
    let parent = dir.parent().expect("parent cgroup").to_path_buf();
    let name = if dir.join("cpuset.cpus").exists() {
        "cpuset.cpus"
    } else {
        "cpuset.cpus.effective"
    };
    assert_eq!(read(dir.join(name)), read(parent.join(name)));
    let spec: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(
            env.root
                .join(".siloc/containers")
                .join(&id)
                .join("config.json"),
        )
        .expect("final spec"),
    )
    .expect("JSON");
    assert!(
        spec["linux"]["resources"]["cpu"].is_null(),
        "{}",
        spec["linux"]["resources"]
    );
}

#[test]
fn node_0_puts_the_nodes_cpus_in_the_cgroup() {
    needs_root!();
    let topo = Topology::read("/sys".as_ref()).expect("topology");
    let want = topo.usable_cpus(0);
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["sleep", "1000"]);
    b.annotate("io.siloc.numa", "node:0");
    let id = env.id("n0");
    let c = Container::start(&env, &b, &id);
    assert_eq!(
        CpuList::parse(&cpuset_file(&env, &id, "cpuset.cpus")).unwrap(),
        want
    );
    assert_eq!(cpuset_file(&env, &id, "cpuset.mems"), "0");
    // and the container's processes see exactly those CPUs
    let (code, out, _) = c.exec(&["grep", "Cpus_allowed_list", "/proc/self/status"]);
    assert_eq!(code, 0);
    let seen = out.split(':').nth(1).unwrap_or("").trim().to_string();
    assert_eq!(CpuList::parse(&seen).unwrap(), want);
    let decision = env.state(&id)["annotations"]["io.siloc.numa.decision"]
        .as_str()
        .expect("decision annotation")
        .to_string();
    assert!(
        decision.starts_with(&format!("mode=node:0 nodes=0 cpus={want} mems=0 devices="))
            && decision.ends_with(" reason=node 0 asked for"),
        "{decision}"
    );
}

#[test]
fn node_placement_never_widens_the_spec() {
    needs_root!();
    let topo = Topology::read("/sys".as_ref()).expect("topology");
    let last = topo
        .usable_cpus(0)
        .iter()
        .last()
        .expect("a usable CPU on node 0");
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["sleep", "1000"]);
    b.annotate("io.siloc.numa", "node:0");
    b.edit(|s| s["linux"]["resources"]["cpu"] = serde_json::json!({"cpus": last.to_string()}));
    let id = env.id("narrow");
    let _c = Container::start(&env, &b, &id);
    assert_eq!(cpuset_file(&env, &id, "cpuset.cpus"), last.to_string());
}

#[test]
fn bad_numa_requests_fail_and_leave_nothing() {
    needs_root!();
    let env = TestEnv::new();
    let topo = Topology::read("/sys".as_ref()).expect("topology");
    let missing = topo.nodes.keys().last().copied().unwrap_or(0) + 1;
    for (value, says) in [
        (
            format!("node:{missing}"),
            format!("node {missing} does not exist"),
        ),
        ("sometimes".to_string(), "node:N".to_string()),
    ] {
        let mut b = env.bundle(&format!("b-{value}"), &["true"]);
        b.annotate("io.siloc.numa", &value);
        let id = env.id("bad");
        let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &id]);
        assert!(!ok, "{value}: create should fail");
        assert!(
            err.contains("io.siloc.numa") && err.contains(&says),
            "{value}: {err}"
        );
        assert!(env.leftovers().is_empty(), "{value}: {:?}", env.leftovers());
        assert!(no_cgroups(&id), "{value}: a cgroup is left");
    }
    // a bad host default names the config key
    let env = TestEnv::with_config("[numa]\ndefault = \"everywhere\"\n");
    let b = env.bundle("b", &["true"]);
    let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &env.id("cfg")]);
    assert!(!ok && err.contains("numa.default"), "{err}");
}
