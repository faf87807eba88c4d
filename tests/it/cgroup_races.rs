//! A container's cgroups when `kill` races its `delete` (containerd sends a task's
//! kill and delete on separate connections): nothing may be left behind, in
//! particular no freezer cgroup libcgroups remade (and froze) after delete removed it.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use crate::common::{Container, TestEnv, traces_of};

/// The container's default v1 freezer cgroup (`/siloc-<id>`), thawed and removed when
/// dropped should a failing test leave it.
struct FreezerGuard(PathBuf);

impl Drop for FreezerGuard {
    fn drop(&mut self) {
        if self.0.exists() {
            let _ = std::fs::write(self.0.join("freezer.state"), "THAWED");
            let _ = std::fs::remove_dir(&self.0);
        }
    }
}

#[test]
fn kill_all_during_a_delete_leaves_no_frozen_cgroup() {
    needs_root!();
    needs_test_hooks!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["sleep", "1000"]);
    let id = env.id("killrace");
    let guard = Container::start(&env, &b, &id);
    let freezer = FreezerGuard(PathBuf::from(format!("/sys/fs/cgroup/freezer/siloc-{id}")));
    env.ok(&["kill", &id, "KILL"]);
    assert!(guard.wait_status("stopped", 10));
    // delete stalls (2 s) with the cgroups removed and the state not yet; a kill --all
    // (containerd's WithProcessKill) comes in then.
    let mut delete = env
        .cmd(&["delete", &id])
        .env("SILOC_TEST_STALL_AT", "delete-after-cgroups")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let _ = env.siloc(&["kill", "--all", &id, "KILL"]);
    let deleted = delete.wait().unwrap();
    assert!(deleted.success(), "delete: {deleted}");
    // (It used to: libcgroups' freeze remade the removed freezer cgroup and froze it,
    // then failed listing the removed devices cgroup before its thaw; delete then
    // removed the state, and the FROZEN cgroup stayed for good.)
    assert!(
        !freezer.0.exists(),
        "{} left behind, freezer.state {:?}",
        freezer.0.display(),
        std::fs::read_to_string(freezer.0.join("freezer.state")).unwrap_or_default()
    );
    drop(guard);
    env.assert_no_trace(&id);
    assert!(traces_of(&id).is_empty(), "{:?}", traces_of(&id));
}
