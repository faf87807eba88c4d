//! An exec's IDs against the user namespace it joins: an unmapped uid, gid or
//! supplementary group makes setuid(2)/setgroups(2) fail with EINVAL, which
//! libcontainer reports as "failed syscall". siloc names the ID and the map first.

/// Checks `uid`, `gid` and `groups` (container IDs of the exec's `process.user`)
/// against `uid_map`/`gid_map`, the text of /proc/PID/uid_map and gid_map of the
/// container's init (user_namespaces(7): lines `inside outside count`).
///
/// Errors: a message naming the field, the ID and the map.
pub(crate) fn check(
    uid_map: &str,
    gid_map: &str,
    uid: u32,
    gid: u32,
    groups: &[u32],
) -> Result<(), String> {
    let wanted = std::iter::once(("process.user.uid", uid, uid_map))
        .chain(std::iter::once(("process.user.gid", gid, gid_map)))
        .chain(
            groups
                .iter()
                .map(|g| ("process.user.additionalGids", *g, gid_map)),
        );
    for (field, id, map) in wanted {
        if super::console_fixup::mapped(map, id).is_none() {
            let shown: Vec<&str> = map.lines().map(str::trim).collect();
            return Err(format!(
                "{field} {id} is not mapped in the container's user namespace (map: {})",
                shown.join(", ")
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RANGE: &str = "         0    7000000      65536\n";

    #[test]
    fn ids_in_the_range_pass_and_others_are_named() {
        assert_eq!(check(RANGE, RANGE, 0, 0, &[10, 65535]), Ok(()));
        let e = check(RANGE, RANGE, 0, 0, &[10, 70000]).unwrap_err();
        assert_eq!(
            e,
            "process.user.additionalGids 70000 is not mapped in the container's user \
             namespace (map: 0    7000000      65536)"
        );
        assert!(
            check(RANGE, RANGE, 65536, 0, &[])
                .unwrap_err()
                .starts_with("process.user.uid 65536")
        );
        assert!(
            check(RANGE, RANGE, 0, 4294967295, &[])
                .unwrap_err()
                .starts_with("process.user.gid")
        );
        // the host's own namespace maps everything
        let host = "0 0 4294967295\n";
        assert_eq!(check(host, host, 4294967294, 70000, &[1 << 31]), Ok(()));
        // two lines
        let two = "0 1000 1\n1 100000 65536\n";
        assert_eq!(check(two, two, 65536, 0, &[]), Ok(()));
    }
}
