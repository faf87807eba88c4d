//! Bad input: each case exits non-zero with a runc-style message that names what is
//! wrong, and leaves no mount, cgroup, process or state behind. Needs root. One file
//! per concept: the command line and bundle (cli), image layouts (image), layers and
//! upper dirs (upper), `update` (update) and `exec` (exec).

mod cli;
mod exec;
mod image;
mod update;
mod upper;

use crate::common::{TestEnv, traces_of};

/// Asserts `args` fails with `needle` in stderr and leaves nothing of `id`.
fn fails_cleanly(env: &TestEnv, args: &[&str], needle: &str, id: &str) {
    let (ok, _, err) = env.detached(args);
    assert!(!ok, "{args:?} should fail");
    assert!(
        err.contains(needle),
        "{args:?}: expected {needle:?} in {err:?}"
    );
    assert!(err.lines().count() <= 2, "one-line message expected: {err}");
    assert!(
        env.leftovers().is_empty(),
        "{args:?}: {:?}",
        env.leftovers()
    );
    assert!(traces_of(id).is_empty(), "{args:?}: {:?}", traces_of(id));
}
