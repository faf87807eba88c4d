//! Whether a user-namespaced container's host root can reach its rootfs.
//!
//! libcontainer sets up the rootfs from the container's init process after it has
//! joined the new user namespace, as the container's root, which on the host is the
//! first ID of its range (runc does the same: its init mounts the rootfs as that user).
//! A directory above root.path that this user cannot search (`mktemp -d` makes them
//! 0700 root:root) made it fail with a bare "failed to prepare rootfs" (EACCES).
//! siloc checks the directories first and names the one at fault, the host uid and
//! what to change.
//!
//! The check follows the kernel's rules (path_resolution(7), capabilities(7)): the
//! container's root has CAP_DAC_OVERRIDE only over inodes whose owner and group are
//! both mapped into its namespace; otherwise the owner, group (its host gid or a
//! supplementary group it keeps from siloc) or other execute bit decides. A
//! directory with a POSIX ACL is not judged (it may grant more).

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::userns::IdMap;

/// A directory the container's host root cannot search.
#[derive(Debug, thiserror::Error)]
#[error(
    "root.path {rootfs}: the container's root (host uid {uid}, gid {gid}) cannot search \
     {dir} (mode {mode:04o}, owner {owner}:{group}); libcontainer sets up the rootfs as that \
     user: allow it (chmod o+x {dir}) or move the bundle under a directory it can search"
)]
pub struct Unreachable {
    pub rootfs: PathBuf,
    pub dir: PathBuf,
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
    pub owner: u32,
    pub group: u32,
}

fn mapped(maps: &[IdMap], host: u32) -> bool {
    maps.iter()
        .any(|m| host >= m.host_id && u64::from(host) < u64::from(m.host_id) + u64::from(m.size))
}

/// Whether a process with host `uid`/`gid`, supplementary `groups`, root in a user
/// namespace with mappings `maps` (uid, gid), may search a directory with `mode`,
/// owned by `owner`:`group`.
pub fn may_search(
    mode: u32,
    owner: u32,
    group: u32,
    (uid, gid): (u32, u32),
    groups: &[u32],
    maps: &(Vec<IdMap>, Vec<IdMap>),
) -> bool {
    if mapped(&maps.0, owner) && mapped(&maps.1, group) {
        return true;
    }
    let bit = if owner == uid {
        0o100
    } else if group == gid || groups.contains(&group) {
        0o010
    } else {
        0o001
    };
    mode & bit != 0
}

/// Checks every directory above `rootfs` (root.path, resolved) for the container's
/// host root `ids`. Errors: [`Unreachable`] naming the first directory, from `/`
/// down, that it cannot search.
pub fn check(
    rootfs: &Path,
    ids: (u32, u32),
    maps: &(Vec<IdMap>, Vec<IdMap>),
) -> Result<(), Box<Unreachable>> {
    let groups: Vec<u32> = nix::unistd::getgroups()
        .map(|g| g.iter().map(|g| g.as_raw()).collect())
        .unwrap_or_default();
    let mut dirs: Vec<&Path> = rootfs.ancestors().skip(1).collect();
    dirs.reverse();
    for dir in dirs {
        let Ok(m) = std::fs::metadata(dir) else {
            continue;
        };
        let mode = m.permissions().mode() & 0o7777;
        if may_search(mode, m.uid(), m.gid(), ids, &groups, maps) {
            continue;
        }
        if xattr::get(dir, "system.posix_acl_access")
            .ok()
            .flatten()
            .is_some()
        {
            continue;
        }
        return Err(Box::new(Unreachable {
            rootfs: rootfs.to_path_buf(),
            dir: dir.to_path_buf(),
            uid: ids.0,
            gid: ids.1,
            mode,
            owner: m.uid(),
            group: m.gid(),
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn maps(base: u32) -> (Vec<IdMap>, Vec<IdMap>) {
        let m = vec![IdMap {
            container_id: 0,
            host_id: base,
            size: 65536,
        }];
        (m.clone(), m)
    }

    #[test]
    fn the_kernel_s_rules_for_searching_a_directory() {
        let r = (100_000, 100_000);
        let m = maps(100_000);
        // mktemp -d: 0700 root:root, root unmapped.
        assert!(!may_search(0o700, 0, 0, r, &[], &m));
        // o+x is enough.
        assert!(may_search(0o701, 0, 0, r, &[], &m));
        // A group it is in.
        assert!(may_search(0o710, 0, 0, r, &[0], &m));
        assert!(may_search(0o710, 0, 100_000, r, &[], &m));
        // Owned by its root: the owner bits, or DAC override when the group is mapped.
        assert!(may_search(0o000, 100_000, 100_000, r, &[], &m));
        assert!(may_search(0o100, 100_000, 0, r, &[], &m));
        assert!(!may_search(0o070, 100_000, 0, r, &[0], &m));
        // Owned by another mapped ID and group: DAC override in its namespace.
        assert!(may_search(0o700, 100_005, 100_005, r, &[], &m));
    }

    #[test]
    fn the_first_closed_directory_from_the_top_is_named() {
        let d = tempfile::tempdir().unwrap();
        let top = d.path().join("closed");
        let rootfs = top.join("bundle/rootfs");
        std::fs::create_dir_all(&rootfs).unwrap();
        std::fs::set_permissions(&top, std::fs::Permissions::from_mode(0o700)).unwrap();
        let me = (
            nix::unistd::getuid().as_raw(),
            nix::unistd::getgid().as_raw(),
        );
        if me.0 == 0 && d.path().metadata().unwrap().permissions().mode() & 0o001 != 0 {
            let e = check(&rootfs, (100_000, 100_000), &maps(100_000)).unwrap_err();
            assert_eq!(e.dir, top);
            let msg = e.to_string();
            assert!(
                msg.contains("host uid 100000") && msg.contains("chmod o+x"),
                "{msg}"
            );
        }
        std::fs::set_permissions(&top, std::fs::Permissions::from_mode(0o711)).unwrap();
        if std::env::temp_dir()
            .metadata()
            .unwrap()
            .permissions()
            .mode()
            & 0o001
            != 0
        {
            check(&rootfs, (100_000, 100_000), &maps(100_000)).unwrap();
        }
    }
}
