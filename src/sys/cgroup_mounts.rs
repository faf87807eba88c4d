//! The cgroup mounts of this process's mount table ([`mountinfo::parse_cgroups`]),
//! read only as far as they go. The kernel renders `/proc/self/mountinfo` as it is
//! read, a page at a time (fs/seq_file.c), so a read that stops early never pays for
//! the rest. On a node the cgroup hierarchies are mounted at boot, before any pod's
//! rootfs overlay, volume tmpfs or network namespace bind, and they come first: with
//! 100 pods the table is 500 lines and 200 KiB, and the hierarchies are in its first
//! 4 KiB. `create`, `exec`, `delete`, `pause`, `update`, `events` and the OOM watch
//! read the hierarchies this way.

use std::ffi::CString;
use std::io::{BufRead, BufReader};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::sys::cgroup::{LIBCGROUPS_V1, hierarchies, joins, libcgroups_v1_mount, path_in};
use crate::sys::mountinfo::{self, Mount};

/// The mounts [`mountinfo::parse_cgroups`] keeps from `/proc/self/mountinfo`, read
/// up to the first line after which every hierarchy of `/proc/self/cgroup` has a mount,
/// every v1 controller of it the mount libcgroups takes
/// ([`crate::sys::cgroup::libcgroups_v1_mount`], which may be a later mount of the
/// same hierarchy), and the topmost mount at each hierarchy's first mount point is the
/// one read (statx STATX_MNT_ID). A mount stacked on one later in the table makes it
/// read the whole table, as does a hierarchy this mount namespace does not mount, a
/// kernel before 5.8, or an unreadable `/proc/self/cgroup`. The hierarchies, their top
/// mounts and libcgroups' mounts are then those of the whole table; later extra
/// mounts of a hierarchy elsewhere are not read.
///
/// Errors: opening or reading `/proc/self/mountinfo`.
pub fn read() -> std::io::Result<Vec<Mount>> {
    read_with(&std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default())
}

/// [`read`] for a caller that has read `/proc/self/cgroup` (`own`) itself.
///
/// Errors: opening or reading `/proc/self/mountinfo`.
pub fn read_with(own: &str) -> std::io::Result<Vec<Mount>> {
    let table = BufReader::new(std::fs::File::open("/proc/self/mountinfo")?);
    read_from(table, own, |p| {
        mountinfo::mount_id_of(&CString::new(p.as_os_str().as_bytes()).ok()?)
    })
}

/// [`read`] of the mount table `table`, for the process-cgroup file `own`, with
/// `top_id` giving the ID of the topmost mount at a path.
fn read_from(
    mut table: impl BufRead,
    own: &str,
    top_id: impl Fn(&Path) -> Option<u64>,
) -> std::io::Result<Vec<Mount>> {
    let mut text = String::new();
    // The cgroup mounts read so far, parsed one line at a time.
    let mut seen: Vec<Mount> = Vec::new();
    loop {
        let start = text.len();
        if table.read_line(&mut text)? == 0 {
            return Ok(mountinfo::parse_cgroups(&text));
        }
        let line = &text[start..];
        let cgroup = mountinfo::quick_fields(line.trim_end())
            .is_some_and(|(_, fs)| fs == "cgroup" || fs == "cgroup2");
        if !cgroup {
            continue;
        }
        seen.extend(mountinfo::parse(line));
        let hs = hierarchies(&seen);
        // Every hierarchy, and the mount libcgroups takes for each v1 controller
        // (stopped_delete follows it), when that is another one.
        let all = !own.trim().is_empty()
            && own
                .lines()
                .all(|l| hs.iter().any(|h| path_in(l, h).is_some()))
            && LIBCGROUPS_V1
                .iter()
                .all(|c| !joins(own, c) || libcgroups_v1_mount(&seen, c).is_some());
        if !all {
            continue;
        }
        let mounts = mountinfo::parse_cgroups(&text);
        let on_top = hierarchies(&mounts).iter().all(|h| {
            let top = mountinfo::top_at(&mounts, &h.mount_point).map(|m| m.id);
            top.is_some() && top == top_id(&h.mount_point)
        });
        if on_top {
            return Ok(mounts);
        }
        table.read_to_string(&mut text)?;
        return Ok(mountinfo::parse_cgroups(&text));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    const OWN: &str = "3:cpu,cpuacct:/a\n2:pids:/a\n1:name=systemd:/a\n0::/a\n";
    const HEAD: &str = "\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
30 27 0:30 / /sys/fs/cgroup ro shared:4 - tmpfs tmpfs ro,mode=755
31 30 0:31 / /sys/fs/cgroup/unified rw shared:5 - cgroup2 cgroup2 rw,nsdelegate
32 30 0:32 / /sys/fs/cgroup/systemd rw shared:6 - cgroup cgroup rw,xattr,name=systemd
33 30 0:33 / /sys/fs/cgroup/cpu,cpuacct rw shared:7 - cgroup cgroup rw,cpu,cpuacct
34 30 0:34 / /sys/fs/cgroup/pids rw shared:8 - cgroup cgroup rw,pids
";
    /// A pod's rootfs overlay and volume, after the hierarchies.
    const PODS: &str = "\
90 27 0:50 / /run/containerd/k8s.io/c1/rootfs rw - overlay overlay rw,lowerdir=/l1:/l2
91 27 0:51 / /var/lib/kubelet/pods/p1/volumes/v rw - tmpfs tmpfs rw,size=1024k
";

    /// What [`read_from`] returns for `table` and how many bytes of it it read.
    fn read_fixture(table: &str, own: &str, ids: &[(&str, u64)]) -> (Vec<Mount>, usize) {
        let mut cur = Cursor::new(table.as_bytes());
        let ms = read_from(&mut cur, own, |p| {
            ids.iter()
                .find(|(at, _)| Path::new(at) == p)
                .map(|(_, id)| *id)
        })
        .unwrap();
        (ms, cur.position() as usize)
    }

    const TOPS: &[(&str, u64)] = &[
        ("/sys/fs/cgroup/unified", 31),
        ("/sys/fs/cgroup/systemd", 32),
        ("/sys/fs/cgroup/cpu,cpuacct", 33),
        ("/sys/fs/cgroup/pids", 34),
    ];

    #[test]
    fn stops_after_the_last_hierarchy_and_keeps_what_the_whole_table_gives() {
        let table = format!("{HEAD}{PODS}");
        let (ms, read) = read_fixture(&table, OWN, TOPS);
        assert_eq!(read, HEAD.len(), "the pods' lines are never read");
        let whole = mountinfo::parse_cgroups(&table);
        assert_eq!(ms, whole);
        assert_eq!(hierarchies(&ms).len(), 4);
    }

    #[test]
    fn a_mount_stacked_later_on_a_hierarchy_makes_it_read_the_whole_table() {
        let stacked = "95 34 0:60 / /sys/fs/cgroup/pids rw - tmpfs tmpfs rw\n";
        let table = format!("{HEAD}{PODS}{stacked}");
        let tops = [&TOPS[..3], &[("/sys/fs/cgroup/pids", 95)]].concat();
        let (ms, read) = read_fixture(&table, OWN, &tops);
        assert_eq!(read, table.len());
        let top = mountinfo::top_at(&ms, Path::new("/sys/fs/cgroup/pids")).unwrap();
        assert_eq!((top.id, top.fs_type.as_str()), (95, "tmpfs"));
        assert_eq!(ms, mountinfo::parse_cgroups(&table));
    }

    #[test]
    fn reads_on_to_the_mount_libcgroups_takes() {
        // pids first mounted elsewhere; libcgroups takes the later mount ending in
        // `pids`, after the pods' lines (a `mount --move` then `--bind` back)
        let head = HEAD.replace("/sys/fs/cgroup/pids", "/tmp/pmv");
        let late = "96 30 0:34 / /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n";
        let table = format!("{head}{PODS}{late}");
        let tops = [&TOPS[..3], &[("/tmp/pmv", 34)]].concat();
        let (ms, read) = read_fixture(&table, OWN, &tops);
        assert_eq!(read, table.len());
        assert_eq!(
            crate::sys::cgroup::libcgroups_v1_mount(&ms, "pids"),
            Some(Path::new("/sys/fs/cgroup/pids"))
        );
        // and a host without a cpu,cpuacct co-mount name: `cpu` and `cpuacct` alone
        let split = HEAD.replace(
            "33 30 0:33 / /sys/fs/cgroup/cpu,cpuacct rw shared:7 - cgroup cgroup rw,cpu,cpuacct\n",
            "33 30 0:33 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
             35 30 0:35 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct\n",
        );
        let own = OWN.replace("3:cpu,cpuacct:/a", "3:cpu:/a\n5:cpuacct:/a");
        assert!(split != HEAD && own != OWN);
        let tops = [
            &TOPS[..2],
            &[("/sys/fs/cgroup/cpu", 33), ("/sys/fs/cgroup/cpuacct", 35)],
            &TOPS[3..],
        ]
        .concat();
        let table = format!("{split}{PODS}");
        assert_eq!(read_fixture(&table, &own, &tops).1, split.len());
    }

    #[test]
    fn an_unmounted_hierarchy_an_unknown_mount_id_or_no_cgroup_file_read_it_all() {
        let table = format!("{HEAD}{PODS}");
        let whole = mountinfo::parse_cgroups(&table);
        // a hierarchy (freezer) mounted in another mount namespace only
        let own = format!("{OWN}4:freezer:/a\n");
        assert_eq!(
            read_fixture(&table, &own, TOPS),
            (whole.clone(), table.len())
        );
        // a kernel without STATX_MNT_ID
        assert_eq!(read_fixture(&table, OWN, &[]), (whole.clone(), table.len()));
        assert_eq!(read_fixture(&table, "", TOPS), (whole, table.len()));
    }

    #[test]
    fn this_process_gets_the_hierarchies_of_its_whole_table() {
        let whole =
            mountinfo::parse_cgroups(&std::fs::read_to_string("/proc/self/mountinfo").unwrap());
        let ms = read().unwrap();
        assert_eq!(hierarchies(&ms), hierarchies(&whole));
    }
}
