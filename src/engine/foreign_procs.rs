//! Processes left in a stopped container's cgroups that are not the container's.
//!
//! A container with its own PID namespace loses every process with its init
//! (pid_namespaces(7)), so what its cgroups still hold once it stopped belongs to
//! somebody else: another container whose `linux.cgroupsPath` is the same or below
//! it. runc 1.1.5 kills a container's cgroup only when the container shares a PID
//! namespace (`destroy` in libcontainer/state_linux.go, `signalAllProcesses`), then
//! removes the empty cgroups, logs the busy ones and completes the delete.
//! libcontainer 0.7 kills what the cgroup lists (v1 `cgroup.procs`, v2 `cgroup.kill`:
//! the whole subtree), in every hierarchy, and so did siloc's sub-cgroup removal:
//! `delete A` killed a container whose cgroup was below A's, and a process somebody
//! put into A's cgroupsPath in one v1 hierarchy only. For those cases siloc deletes
//! as runc does, here; every other delete keeps libcontainer's path.

use std::path::{Path, PathBuf};

use libcontainer::container::Container;

/// A cgroup that still holds processes: its directory and their host pids.
pub type Busy = (PathBuf, Vec<i32>);

/// The cgroups of stopped container `c` (its directory in each hierarchy and every
/// one below it) that hold processes not the container's; `None` when there are none.
///
/// With a PID namespace of its own (a `pid` entry without `path` in its bundle's
/// config.json) every process left is somebody else's. Sharing one (or with an
/// unreadable config), the container's processes outlive its init, and runc 1.1.5
/// kills them (`destroy`, `signalAllProcesses` through `GetAllPids` of the devices
/// path): so are they here, first ([`kill_members`]), and what stays is somebody
/// else's, such as a process put into the same cgroupsPath in only some
/// hierarchies, which libcontainer's delete would kill in every one.
pub fn find(c: &Container, dirs: &[PathBuf]) -> Option<Vec<Busy>> {
    let dirs: Vec<&PathBuf> = dirs.iter().filter(|d| walkable(d)).collect();
    if !own_pid_namespace(&c.bundle().join("config.json")) {
        kill_members(&dirs);
    }
    let mut busy = Vec::new();
    for d in dirs {
        collect(d, &mut busy);
    }
    (!busy.is_empty()).then_some(busy)
}

/// How long each of a stopped container's leftover processes may take to die.
const MEMBER_DEATH: std::time::Duration = std::time::Duration::from_secs(2);

/// SIGKILLs the container's own processes among `dirs` and waits for each to die
/// (pidfd_send_signal, so a reused pid is never hit), in rounds while some are left
/// and the last round changed the list (one may fork before it dies; at most 5).
/// Its own processes: those of the devices cgroup and every one below it, as runc
/// lists them on cgroup v1; without a devices dir (cgroup v2, or no devices
/// hierarchy), those every dir's subtree lists. A frozen v1 freezer cgroup is thawed
/// first: a frozen process does not die (runc's kill thaws too).
fn kill_members(dirs: &[&PathBuf]) {
    if let Some(f) = dirs.iter().find(|d| hierarchy_is(d, "freezer")) {
        let _ = std::fs::write(f.join("freezer.state"), "THAWED");
    }
    let mut last = Vec::new();
    for _ in 0..5 {
        let now = members(dirs);
        if now.is_empty() || now == last {
            return;
        }
        for pid in &now {
            crate::sys::pidfd::kill_and_wait(nix::unistd::Pid::from_raw(*pid), MEMBER_DEATH);
        }
        last = now;
    }
}

/// Whether a stopped container whose cgroup dirs are `dirs` ([`dirs_of`]) still has a
/// cgroup to list processes through: its devices dir on cgroup v1 (runc's
/// `GetAllPids` path), else its first dir. runc 1.1.5's `kill --all` of a stopped
/// container without one signals nothing and succeeds; libcontainer's fails on the
/// missing dir after it froze (and so made again) the freezer dir.
pub fn has_listing_cgroup(dirs: &[PathBuf]) -> bool {
    dirs.iter()
        .find(|d| hierarchy_is(d, "devices"))
        .or(dirs.first())
        .is_some_and(|d| d.is_dir())
}

/// Whether cgroup dir `d` is in the v1 hierarchy mounted at /sys/fs/cgroup/`name`.
fn hierarchy_is(d: &Path, name: &str) -> bool {
    d.strip_prefix("/sys/fs/cgroup")
        .ok()
        .and_then(|r| r.components().next())
        .is_some_and(|h| h.as_os_str() == name)
}

/// The pids [`kill_members`] kills, sorted.
fn members(dirs: &[&PathBuf]) -> Vec<i32> {
    let subtree = |d: &Path| {
        let mut busy = Vec::new();
        collect(d, &mut busy);
        let mut pids: Vec<i32> = busy.into_iter().flat_map(|(_, p)| p).collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    };
    if let Some(d) = dirs.iter().find(|d| hierarchy_is(d, "devices")) {
        return subtree(d);
    }
    let mut sets = dirs.iter().map(|d| subtree(d));
    let first = sets.next().unwrap_or_default();
    sets.fold(first, |acc, s| {
        acc.into_iter()
            .filter(|p| s.binary_search(p).is_ok())
            .collect()
    })
}

/// Deletes stopped container `c` without killing `busy`: removes every empty cgroup
/// of `dirs` bottom-up and the empty extra cgroups listed in the record dir `extras`
/// ([`super::cgroup_compat::extra_dirs`]), runs the poststop
/// hooks, and removes libcontainer's state directory. The busy cgroups stay, each
/// named in a warning, as runc's `Failed to remove cgroup` lines.
///
/// Errors: the state directory that cannot be removed (a failing poststop hook is
/// logged, as runc logs it).
pub fn delete_leaving(
    c: &Container,
    dirs: &[PathBuf],
    extras: Option<&Path>,
    busy: &[Busy],
) -> Result<(), String> {
    for (dir, pids) in busy {
        let pids: Vec<String> = pids.iter().map(i32::to_string).collect();
        tracing::warn!(
            target: "siloc",
            "container {}: cgroup {} kept: its process(es) {} are not the container's (its PID namespace ended with its init) and are not killed, as runc leaves them",
            c.id(),
            dir.display(),
            pids.join(" ")
        );
    }
    for d in dirs.iter().filter(|d| walkable(d)) {
        let _ = super::v1_subcgroups::remove_empty_tree(d);
    }
    // The extra cgroups (hybrid unified, name=systemd): each empty one, deepest first;
    // one above the other container's stays. Not walked: a pod's shared level is listed.
    // The list goes with them: what stays is named here, not retried by delete.
    if let Some(record_dir) = extras {
        let dirs = super::cgroup_compat::extra_dirs(record_dir).unwrap_or_default();
        for d in dirs.iter().rev() {
            // A parent siloc made (a pod's level) is shared: kept without a word.
            let parent = super::cgroup_compat::is_shared_parent(&dirs, d);
            let removed = if parent {
                std::fs::remove_dir(d)
            } else {
                super::v1_subcgroups::remove_empty_tree(d)
            };
            if let Err(e) = removed
                && e.kind() != std::io::ErrorKind::NotFound
                && !parent
            {
                tracing::warn!(target: "siloc", "container {}: cgroup {} kept: {e}", c.id(), d.display());
            }
        }
        let _ = std::fs::remove_file(record_dir.join(super::cgroup_compat::EXTRA_CGROUPS_FILE));
    }
    // The state goes before the hooks run, and a failing hook is logged, as runc 1.1.5
    // does: a delete that failed on it would run it again at every retry.
    let config = libcontainer::config::YoukiConfig::load(&c.root).ok();
    std::fs::remove_dir_all(&c.root).map_err(|e| format!("{}: {e}", c.root.display()))?;
    if let Some(hooks) = config.as_ref().and_then(|c| c.hooks.as_ref())
        && let Err(e) = libcontainer::hooks::run_hooks(
            hooks.poststop().as_ref(),
            Some(&c.state),
            None,
            None,
            None,
        )
    {
        tracing::error!("error running poststop hook: {e}");
    }
    Ok(())
}

/// rmdir(2) of each of `dirs` below a hierarchy's root, errors ignored: an empty
/// cgroup without sub-cgroups (a stopped container's usual state) goes at once, one
/// system call instead of the removal's walk (about 10); a cgroup that still holds
/// processes or sub-cgroups fails with EBUSY (cgroups(7)) and stays for it. Call it
/// after anything that kills through libcontainer (`Container::kill` with `all`): that
/// freezes through the freezer dir, making it again when it is gone, and lists the
/// pids through the devices dir, so with that one gone it returns still frozen.
pub fn remove_idle(dirs: &[PathBuf]) {
    for d in dirs.iter().filter(|d| below_root(d)) {
        let _ = std::fs::remove_dir(d);
    }
}

/// A container's cgroup dir that may be walked: below a hierarchy's root (the root
/// would be the whole host) and present.
fn walkable(d: &Path) -> bool {
    below_root(d) && d.is_dir()
}

/// Below a hierarchy's root: neither `/sys/fs/cgroup` nor a hierarchy's mount point.
fn below_root(d: &Path) -> bool {
    let root = Path::new("/sys/fs/cgroup");
    d != root && d.parent().is_some_and(|p| p != root)
}

/// The pids cgroup `dir`'s `cgroup.procs` lists; none when it cannot be read.
pub(super) fn procs_of(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Appends `dir` and every cgroup below it that lists processes.
fn collect(dir: &Path, busy: &mut Vec<Busy>) {
    let pids = procs_of(dir);
    if !pids.is_empty() {
        busy.push((dir.to_path_buf(), pids));
    }
    for child in super::v1_subcgroups::subdirs(dir).unwrap_or_default() {
        collect(&child, busy);
    }
}

/// Whether the config.json at `path` gives the container a PID namespace of its own:
/// a `pid` entry of `linux.namespaces` without a `path` (runtime-spec config-linux.md
/// "Namespaces"). An unreadable file counts as not.
fn own_pid_namespace(path: &Path) -> bool {
    let Ok(text) = std::fs::read(path) else {
        return false;
    };
    let Ok(spec) = serde_json::from_slice::<serde_json::Value>(&text) else {
        return false;
    };
    spec["linux"]["namespaces"].as_array().is_some_and(|ns| {
        ns.iter()
            .any(|n| n["type"] == "pid" && n["path"].as_str().is_none_or(|p| p.is_empty()))
    })
}

/// The cgroup directories of container `c` that [`find`] searches: its v1 ones
/// (engine::v1_subcgroups), or on a cgroup v2 host its one directory; none with the
/// systemd driver or when libcontainer's config cannot be read.
pub fn dirs_of(c: &Container) -> Vec<PathBuf> {
    let v1 = super::v1_subcgroups::dirs_of(c);
    if !v1.is_empty()
        || c.systemd()
        || !matches!(
            libcgroups::common::get_cgroup_setup(),
            Ok(libcgroups::common::CgroupSetup::Unified)
        )
    {
        return v1;
    }
    let Ok(config) = libcontainer::config::YoukiConfig::load(&c.root) else {
        return Vec::new();
    };
    let rel = config
        .cgroup_path
        .strip_prefix("/")
        .unwrap_or(&config.cgroup_path);
    vec![Path::new("/sys/fs/cgroup").join(rel)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_namespace_of_its_own_is_one_without_a_path() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("config.json");
        let own = |body: &str| {
            std::fs::write(&f, body).unwrap();
            own_pid_namespace(&f)
        };
        assert!(own(
            r#"{"linux":{"namespaces":[{"type":"mount"},{"type":"pid"}]}}"#
        ));
        assert!(own(
            r#"{"linux":{"namespaces":[{"type":"pid","path":""}]}}"#
        ));
        assert!(!own(
            r#"{"linux":{"namespaces":[{"type":"pid","path":"/proc/1/ns/pid"}]}}"#
        ));
        assert!(!own(r#"{"linux":{"namespaces":[{"type":"mount"}]}}"#));
        assert!(!own("not json"));
        assert!(!own_pid_namespace(&t.path().join("missing.json")));
    }

    #[test]
    fn idle_dirs_go_at_once_others_and_roots_stay() {
        // Plain directories stand in for cgroups: rmdir fails on one with a child
        // as it fails (EBUSY) on a cgroup with a sub-cgroup.
        let t = tempfile::tempdir().unwrap();
        let (idle, parent) = (t.path().join("idle"), t.path().join("parent"));
        std::fs::create_dir_all(&idle).unwrap();
        std::fs::create_dir_all(parent.join("child")).unwrap();
        remove_idle(&[idle.clone(), parent.clone()]);
        assert!(!idle.exists());
        assert!(parent.join("child").exists());
        assert!(!below_root(Path::new("/sys/fs/cgroup")));
        assert!(!below_root(Path::new("/sys/fs/cgroup/memory")));
        assert!(below_root(Path::new("/sys/fs/cgroup/memory/siloc-x")));
    }

    #[test]
    fn members_are_the_pids_every_dir_lists_without_a_devices_dir() {
        // Plain directories stand in for cgroups of two hierarchies: 7 sits in one
        // only (somebody else's), 42 in both, once in a sub-cgroup.
        let t = tempfile::tempdir().unwrap();
        let (a, b) = (t.path().join("a"), t.path().join("b"));
        std::fs::create_dir_all(a.join("sub")).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::write(a.join("cgroup.procs"), "7\n").unwrap();
        std::fs::write(a.join("sub/cgroup.procs"), "42\n").unwrap();
        std::fs::write(b.join("cgroup.procs"), "42\n").unwrap();
        assert_eq!(members(&[&a, &b]), vec![42]);
        assert!(hierarchy_is(
            Path::new("/sys/fs/cgroup/devices/x"),
            "devices"
        ));
        assert!(!hierarchy_is(
            Path::new("/sys/fs/cgroup/pids/devices"),
            "devices"
        ));
    }

    #[test]
    fn the_devices_dir_lists_a_stopped_containers_processes() {
        let t = tempfile::tempdir().unwrap();
        let here = t.path().to_path_buf();
        let gone = PathBuf::from("/sys/fs/cgroup/devices/siloc-unit-test-never-made");
        assert!(!has_listing_cgroup(&[]));
        assert!(has_listing_cgroup(std::slice::from_ref(&here)));
        assert!(!has_listing_cgroup(&[here.clone(), gone]));
        assert!(!has_listing_cgroup(&[here.join("gone"), here]));
    }

    #[test]
    fn busy_cgroups_are_the_ones_listing_processes() {
        let t = tempfile::tempdir().unwrap();
        let top = t.path().join("a");
        std::fs::create_dir_all(top.join("inner/deeper")).unwrap();
        std::fs::create_dir_all(top.join("empty")).unwrap();
        std::fs::write(top.join("inner/cgroup.procs"), "42\n").unwrap();
        let mut busy = Vec::new();
        collect(&top, &mut busy);
        assert_eq!(busy, vec![(top.join("inner"), vec![42])]);
    }
}
