//! `/proc/PID/mountinfo` (proc(5)), parsed by the `procfs` crate, with the octal
//! escapes (`\040` for a space, `\011`, `\012`, `\134`) the kernel writes into paths
//! undone, which procfs leaves in place. One reader for every caller.

use std::path::{Path, PathBuf};

use procfs::process::MountInfo;

/// One mount as siloc needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The mount ID (field 1), as statx STATX_MNT_ID reports it ([`mount_id_of`]).
    pub(crate) id: u64,
    /// The mount point, seen from the reading process's root (field 5), unescaped.
    pub mount_point: PathBuf,
    /// The path in the filesystem that is the mount's root (field 4: `/` for a whole
    /// filesystem, the source directory of a bind), unescaped.
    pub(crate) root: PathBuf,
    /// The filesystem type (`overlay`, `ext4`, `cgroup`).
    pub(crate) fs_type: String,
    /// The mount source (`siloc-<id>` for siloc's overlays; empty for `none`),
    /// unescaped.
    pub(crate) source: String,
    /// Per-mount options (field 6): `rw`, `nosuid`, `idmapped`, ...
    pub(crate) options: Vec<String>,
    /// Per-superblock options (the last field): `rw`, `lowerdir+=...`, `favordynmods`.
    pub(crate) super_options: Vec<String>,
}

impl Mount {
    /// Whether the per-mount options include `opt`.
    pub(crate) fn has_option(&self, opt: &str) -> bool {
        self.options.iter().any(|o| o == opt)
    }
}

/// Undoes mountinfo's octal escapes.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..=i + 3].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// procfs' option maps as sorted `key` / `key=value` words.
fn words(map: std::collections::HashMap<String, Option<String>>) -> Vec<String> {
    let mut out: Vec<String> = map
        .into_iter()
        .map(|(k, v)| v.map_or_else(|| k.clone(), |v| format!("{k}={v}")))
        .collect();
    out.sort();
    out
}

fn convert(m: MountInfo) -> Mount {
    Mount {
        id: u64::try_from(m.mnt_id).unwrap_or(0),
        mount_point: PathBuf::from(unescape(&m.mount_point.to_string_lossy())),
        root: PathBuf::from(unescape(&m.root)),
        fs_type: m.fs_type,
        source: m.mount_source.as_deref().map(unescape).unwrap_or_default(),
        options: words(m.mount_options),
        super_options: words(m.super_options),
    }
}

/// Parses mountinfo text, in table order; lines procfs cannot read are skipped.
pub(crate) fn parse(text: &str) -> Vec<Mount> {
    parse_where(text, |_, _| true)
}

/// [`parse`] of only the lines `keep(mount point, filesystem type)` accepts, both
/// taken from the line as written (the mount point still escaped) without parsing
/// the rest: procfs' parse of a line (two option maps, the strings unescaped) is
/// paid for the lines a caller needs only. A line without the ` - ` separator is skipped.
fn parse_where(text: &str, keep: impl Fn(&str, &str) -> bool) -> Vec<Mount> {
    text.lines()
        .filter(|l| quick_fields(l).is_some_and(|(mp, fs)| keep(mp, fs)))
        .filter_map(|l| MountInfo::from_line(l).ok())
        .map(convert)
        .collect()
}

/// A line's mount point (field 5, escaped) and filesystem type (the first field after
/// the ` - ` that ends the optional fields; proc(5)). The kernel escapes spaces in
/// paths (`\040`), so the single spaces split the fields.
pub(crate) fn quick_fields(line: &str) -> Option<(&str, &str)> {
    let mount_point = line.split(' ').nth(4)?;
    let (_, after) = line.split_once(" - ")?;
    Some((mount_point, after.split(' ').next()?))
}

/// The mounts cgroup code reads ([`crate::sys::cgroup::hierarchies`] and
/// [`top_at`] one of their mount points): every `cgroup` and `cgroup2` mount, and
/// any other mount stacked at one of their mount points. On a Kubernetes node the
/// table is mostly the pods' mounts (kubelet's volume tmpfs and binds, the snapshot
/// overlays of other runtimes' containers, each listing its lowerdirs, network
/// namespace binds), which this skips unparsed; [`crate::sys::cgroup_mounts`] reads
/// the hierarchies this way.
pub(crate) fn parse_cgroups(text: &str) -> Vec<Mount> {
    let is_cgroup = |fs: &str| fs == "cgroup" || fs == "cgroup2";
    let points: std::collections::HashSet<&str> = text
        .lines()
        .filter_map(quick_fields)
        .filter(|(_, fs)| is_cgroup(fs))
        .map(|(mp, _)| mp)
        .collect();
    parse_where(text, |mp, fs| is_cgroup(fs) || points.contains(mp))
}

/// Reads the mount table of process `pid`, or of this process for `None`.
///
/// Errors: reading `/proc/.../mountinfo`.
pub fn read(pid: Option<i32>) -> std::io::Result<Vec<Mount>> {
    Ok(parse(&read_text(pid)?))
}

/// This process's mounts at `target` (unescaped path), in table order.
///
/// Errors: reading `/proc/self/mountinfo`.
pub(crate) fn read_at(target: &Path) -> std::io::Result<Vec<Mount>> {
    Ok(parse_at(&read_text(None)?, target))
}

/// The mounts of mountinfo text whose mount point is `target`, in table order.
fn parse_at(text: &str, target: &Path) -> Vec<Mount> {
    parse_where(text, |mp, _| Path::new(&unescape(mp)) == target)
}

fn read_text(pid: Option<i32>) -> std::io::Result<String> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/mountinfo"),
        None => "/proc/self/mountinfo".to_string(),
    };
    std::fs::read_to_string(path)
}

/// statx(2) of `path` (relative to the working directory), asking for `mask`, with
/// `flags` (`AT_SYMLINK_NOFOLLOW`, ...). Allocates nothing: forked helpers call it.
///
/// Errors: the errno of statx.
pub(crate) fn statx(
    path: &std::ffi::CStr,
    flags: i32,
    mask: u32,
) -> Result<libc::statx, nix::errno::Errno> {
    // SAFETY: statx writes at most one struct statx into `buf`, which outlives the call;
    // `path` is NUL-terminated.
    let mut buf: libc::statx = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::statx(libc::AT_FDCWD, path.as_ptr(), flags, mask, &mut buf) };
    if r != 0 {
        return Err(nix::errno::Errno::last());
    }
    Ok(buf)
}

/// The mount ID (statx STATX_MNT_ID, Linux 5.8) of the topmost mount at `path`, as
/// mount(2) resolves it (symlinks followed); `None` when statx fails or the kernel
/// does not report it. Allocates nothing: forked helpers call it.
pub(crate) fn mount_id_of(path: &std::ffi::CStr) -> Option<u64> {
    let st = statx(path, 0, libc::STATX_MNT_ID).ok()?;
    (st.stx_mask & libc::STATX_MNT_ID != 0).then_some(st.stx_mnt_id)
}

/// The topmost (last) mount whose mount point is `target`.
pub(crate) fn top_at<'a>(mounts: &'a [Mount], target: &Path) -> Option<&'a Mount> {
    mounts.iter().rev().find(|m| m.mount_point == target)
}

/// The mount that holds `path`: the topmost of those with the longest mount point that
/// is `path` or one of its ancestors.
pub(crate) fn holder<'a>(mounts: &'a [Mount], path: &Path) -> Option<&'a Mount> {
    mounts
        .iter()
        .filter(|m| path.starts_with(&m.mount_point))
        .fold(None, |best: Option<&Mount>, m| match best {
            Some(b) if b.mount_point.as_os_str().len() > m.mount_point.as_os_str().len() => best,
            _ => Some(m),
        })
}

/// Whether `p` is a mount point in this process's mount table.
pub(crate) fn is_mount_point(p: &Path) -> bool {
    read_at(p).is_ok_and(|ms| !ms.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MI: &str = "\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
90 27 0:50 / /b\\040x rw,relatime - overlay siloc-c1 rw,lowerdir+=...
91 90 254:0 /img /b\\040x rw,relatime,idmapped - ext4 /dev/vda rw
92 27 0:51 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:9 - cgroup cgroup rw,pids
";

    #[test]
    fn escapes_options_and_the_top_mount() {
        let ms = parse(MI);
        assert_eq!(ms.len(), 4);
        let top = top_at(&ms, Path::new("/b x")).unwrap();
        assert_eq!(top.fs_type, "ext4");
        assert!(top.has_option("idmapped") && top.has_option("rw"));
        assert_eq!(ms[1].source, "siloc-c1");
        assert_eq!(ms[3].fs_type, "cgroup");
        assert!(top_at(&ms, Path::new("/nope")).is_none());
        assert_eq!(unescape("a\\134b\\011c"), "a\\b\tc");
        assert_eq!(unescape("trailing\\04"), "trailing\\04");
    }

    #[test]
    fn the_cgroup_view_keeps_hierarchies_and_what_is_stacked_on_them() {
        let mi = format!(
            "{MI}\
93 27 0:52 / /sys/fs/cgroup/unified rw shared:10 - cgroup2 cgroup2 rw,nsdelegate
94 92 0:53 / /sys/fs/cgroup/pids rw - tmpfs tmpfs rw
95 27 0:54 / /sys/fs/cgroup/pidsx rw - tmpfs tmpfs rw
broken line without the separator
"
        );
        let ms = parse_cgroups(&mi);
        let points: Vec<_> = ms
            .iter()
            .map(|m| (m.mount_point.to_str().unwrap(), m.fs_type.as_str()))
            .collect();
        assert_eq!(
            points,
            [
                ("/sys/fs/cgroup/pids", "cgroup"),
                ("/sys/fs/cgroup/unified", "cgroup2"),
                ("/sys/fs/cgroup/pids", "tmpfs"),
            ]
        );
        // the same hierarchies, and the same mount on top, as from the whole table
        let all = parse(&mi);
        assert_eq!(
            crate::sys::cgroup::hierarchies(&ms),
            crate::sys::cgroup::hierarchies(&all)
        );
        let at = Path::new("/sys/fs/cgroup/pids");
        assert_eq!(top_at(&ms, at), top_at(&all, at));
        assert!(parse_cgroups(MI.lines().next().unwrap()).is_empty());
    }

    #[test]
    fn the_mounts_at_a_path_are_its_stack() {
        let at = parse_at(MI, Path::new("/b x"));
        let types: Vec<_> = at.iter().map(|m| m.fs_type.as_str()).collect();
        assert_eq!(types, ["overlay", "ext4"]);
        assert!(parse_at(MI, Path::new("/b")).is_empty());
        assert!(is_mount_point(Path::new("/proc")) && !is_mount_point(Path::new("/proc/self")));
    }

    #[test]
    fn quick_fields_read_the_line_as_written() {
        let l = "92 27 0:51 / /a\\040b rw shared:9 master:2 - cgroup cgroup rw,pids";
        assert_eq!(quick_fields(l), Some(("/a\\040b", "cgroup")));
        assert_eq!(quick_fields("1 2 3 4 /x rw"), None);
        assert_eq!(quick_fields("1 2 - ext4"), None);
    }

    #[test]
    fn the_holder_is_the_deepest_mount_and_the_last_of_a_stack() {
        let ms = parse(MI);
        let h = holder(&ms, Path::new("/b x/etc")).unwrap();
        assert!(h.has_option("idmapped"));
        assert_eq!(
            holder(&ms, Path::new("/b")).unwrap().mount_point,
            Path::new("/")
        );
    }
}
