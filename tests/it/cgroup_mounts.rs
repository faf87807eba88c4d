//! siloc reads the cgroup hierarchies' mounts only as far as they go in mountinfo
//! (`sys::cgroup_mounts`). Here a v1 hierarchy's first mount is not the one libcgroups
//! takes: `pids` is moved away, keeping its early place in the table, and bound back at
//! /sys/fs/cgroup/pids after 60 other mounts, all in a private mount namespace
//! (`unshare -m --propagation private`), so the host's table never changes. Every
//! container's cgroup must still go in every hierarchy. v1 or hybrid hosts with a
//! `pids` hierarchy; needs root; skips loudly elsewhere.

use crate::common;

use std::path::Path;
use std::process::Command;

use common::{Bundle, TestEnv};

/// Removes what containers `ids` left in the v1 hierarchies (`siloc-<id>`), on drop.
struct CgroupGuard(Vec<String>);

impl Drop for CgroupGuard {
    fn drop(&mut self) {
        let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") else {
            return;
        };
        for h in rd.flatten() {
            for id in &self.0 {
                let _ = std::fs::remove_dir(h.path().join(format!("siloc-{id}")));
            }
        }
    }
}

#[test]
fn a_hierarchy_bound_back_late_in_the_table_keeps_no_cgroup() {
    needs_root!();
    let pids = Path::new("/sys/fs/cgroup/pids");
    let v1_pids = siloc::sys::mountinfo::read(None)
        .unwrap_or_default()
        .iter()
        .any(|m| m.mount_point == pids);
    if !v1_pids {
        eprintln!("SKIPPED: no v1 pids hierarchy at {}", pids.display());
        return;
    }
    let env = TestEnv::new();
    let b = Bundle::busybox(&env.dir.path().join("b"), &["true"]);
    let (run_id, del_id) = (env.id("late-run"), env.id("late-del"));
    let _cgroups = CgroupGuard(vec![run_id.clone(), del_id.clone()]);
    let d = env.dir.path().display();
    let siloc = env.siloc_sh();
    let script = format!(
        "set -e; mkdir -p {d}/pods {d}/moved; mount -t tmpfs tmpfs {d}/pods
         for i in $(seq 60); do mkdir {d}/pods/$i; mount -t tmpfs tmpfs {d}/pods/$i; done
         mount --move {pids} {d}/moved; mount --bind {d}/moved {pids}
         {siloc} run --bundle {b} {run_id}
         {siloc} create --bundle {b} {del_id}; {siloc} delete --force {del_id}",
        pids = pids.display(),
        b = b.path(),
    );
    let o = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .output()
        .expect("unshare");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    for id in [&run_id, &del_id] {
        assert!(
            common::traces_of(id).is_empty(),
            "{id}: {:?}",
            common::traces_of(id)
        );
    }
    assert!(env.leftovers().is_empty(), "{:?}", env.leftovers());
}
