//! Test hooks, compiled in only with the cargo feature `test-hooks` (`hack/test` turns
//! it on); a build without it ignores the variables, so a production binary cannot be
//! made to crash or stall by its environment.
//!
//! `SILOC_TEST_CRASH_AT=<point>` kills siloc with SIGKILL at that point of `create`, so
//! tests can prove that `delete --force` cleans up after any crash;
//! `SILOC_TEST_STALL_AT=<point>` pauses there for 2 s, so tests can race another
//! command against a create in progress.

/// Acts on the hooks named for `point` (`after-idpool`, `after-upper`, `after-mount`,
/// `before-libcontainer`, `after-libcontainer`, `after-extra-cgroup`: the named or
/// unified hierarchy's directory made, siloc not yet moved in; in `delete`:
/// `delete-after-cgroups`, a stopped container's cgroups removed, its state not yet;
/// in `exec`: `exec-after-libcontainer`, libcontainer's build returned, successful or
/// not, engine::cgroup_handoff not yet finished).
#[cfg(feature = "test-hooks")]
pub fn crash_point(point: &str) {
    if std::env::var("SILOC_TEST_CRASH_AT").is_ok_and(|p| p == point) {
        let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGKILL);
    }
    if std::env::var("SILOC_TEST_STALL_AT").is_ok_and(|p| p == point) {
        std::thread::sleep(std::time::Duration::from_secs(2));
    }
}

/// Without the `test-hooks` feature: nothing.
#[cfg(not(feature = "test-hooks"))]
#[inline(always)]
pub fn crash_point(_point: &str) {}
