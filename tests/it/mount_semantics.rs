//! runc's mount semantics where libcontainer 0.7 differs (engine::mount_compat):
//! cleared bind flags, a read-only /dev, tmpfs modes, tmpcopyup, symlinked
//! destinations, /proc on a symlink, masked paths. Each was compared with runc 1.1.5
//! and crun 1.8 on the same bundle. Needs root; skips loudly without it.

use crate::common;

use common::TestEnv;
use serde_json::json;

/// Runs the bundle in the foreground; returns (exit code, stdout, stderr).
use common::run;

/// Unmounts (lazily) what a test mounted on the host, also when it fails.
struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = nix::mount::umount2(&self.0, nix::mount::MntFlags::MNT_DETACH);
    }
}

/// A bind of `dir` onto itself with `flags` (a read-only, nosuid, ... source).
fn flagged_source(dir: &std::path::Path, flags: nix::mount::MsFlags) -> Unmount {
    use nix::mount::{MsFlags, mount};
    std::fs::create_dir_all(dir).unwrap();
    mount(Some(dir), dir, None::<&str>, MsFlags::MS_BIND, None::<&str>).unwrap();
    let guard = Unmount(dir.to_path_buf());
    mount(
        None::<&str>,
        dir,
        None::<&str>,
        MsFlags::MS_REMOUNT | MsFlags::MS_BIND | flags,
        None::<&str>,
    )
    .unwrap();
    guard
}

/// The options (mountinfo field 6) of the mount at `point`, from a container printing
/// `cut -d' ' -f5,6` of its mountinfo.
fn options_of<'a>(out: &'a str, point: &str) -> Vec<&'a str> {
    out.lines()
        .filter_map(|l| l.split_once(' '))
        .filter(|(p, _)| *p == point)
        .map(|(_, o)| o)
        .collect()
}

/// A bind mount's `rw`, `suid`, `dev`, `exec` clear what its source has (runc 1.2,
/// crun; libcontainer 0.7 kept the source's `ro,nosuid,nodev,noexec`). In a user
/// namespace the kernel locks those flags, and they are kept, as runc keeps them: the
/// container still starts.
#[test]
fn cleared_bind_flags_are_applied_and_locked_ones_kept() {
    needs_root!();
    use nix::mount::MsFlags;
    let env = TestEnv::new();
    let src = env.dir.path().join("src");
    let _m = flagged_source(
        &src,
        MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
    );
    let show = "grep -E ' /(cleared|kept) ' /proc/self/mountinfo | cut -d' ' -f5,6";
    for userns in [false, true] {
        let mut b = env.bundle(&format!("b{userns}"), &["sh", "-c", show]);
        if userns {
            b.annotate("io.siloc.userns", "auto");
        }
        b.edit(|s| {
            let m = s["mounts"].as_array_mut().unwrap();
            m.push(json!({"destination": "/cleared", "type": "bind",
                          "source": src.to_str().unwrap(),
                          "options": ["rbind", "rw", "suid", "dev", "exec"]}));
            m.push(json!({"destination": "/kept", "type": "bind",
                          "source": src.to_str().unwrap(), "options": ["rbind"]}));
        });
        let (code, out, err) = run(&env, &b, &format!("flags{userns}"));
        assert_eq!(code, 0, "userns {userns}: {err}");
        let kept = options_of(&out, "/kept");
        assert_eq!(kept.len(), 1, "{out}");
        for f in ["ro", "nosuid", "nodev", "noexec"] {
            assert!(kept[0].split(',').any(|o| o == f), "{out}");
        }
        let cleared = options_of(&out, "/cleared");
        assert_eq!(cleared.len(), 1, "{out}");
        let has = |f: &str| cleared[0].split(',').any(|o| o == f);
        if userns {
            // locked: kept, as runc keeps them
            assert!(
                has("ro") && has("nosuid") && has("nodev") && has("noexec"),
                "{out}"
            );
        } else {
            assert!(has("rw"), "{out}");
            for f in ["nosuid", "nodev", "noexec"] {
                assert!(!has(f), "{f}: {out}");
            }
        }
    }
}

/// `relatime` (like `atime`) on a bind of a `noatime` source gives `relatime`, as runc
/// 1.1.5 and 1.2 give it; libcontainer 0.7 ORs MS_RELATIME into the source's flags and
/// the kernel kept `noatime`. A bind without an atime option keeps the source's.
#[test]
fn relatime_and_atime_replace_a_noatime_source() {
    needs_root!();
    use nix::mount::MsFlags;
    let env = TestEnv::new();
    let src = env.dir.path().join("src");
    let _m = flagged_source(&src, MsFlags::MS_NOATIME);
    let show = "grep -E ' /(rel|at|kept) ' /proc/self/mountinfo | cut -d' ' -f5,6";
    let mut b = env.bundle("b", &["sh", "-c", show]);
    b.edit(|s| {
        let m = s["mounts"].as_array_mut().unwrap();
        for (dest, opt) in [("/rel", "relatime"), ("/at", "atime"), ("/kept", "rbind")] {
            m.push(json!({"destination": dest, "type": "bind",
                          "source": src.to_str().unwrap(), "options": ["rbind", opt]}));
        }
    });
    let (code, out, err) = run(&env, &b, "relatime");
    assert_eq!(code, 0, "{err}");
    for (point, want) in [
        ("/rel", "relatime"),
        ("/at", "relatime"),
        ("/kept", "noatime"),
    ] {
        let o = options_of(&out, point);
        assert_eq!(o.len(), 1, "{out}");
        let atime: Vec<&str> = o[0].split(',').filter(|f| f.ends_with("atime")).collect();
        assert_eq!(atime, [want], "{point}: {out}");
    }
}

/// `ro` on the `/dev` mount: the devices are made, then /dev is read-only (runc's
/// finalizeRootfs, crun alike; libcontainer 0.7 left it read-write).
#[test]
fn a_read_only_dev_comes_out_read_only() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "grep ' /dev ' /proc/self/mountinfo | cut -d' ' -f5,6; test -c /dev/null && echo null; \
             touch /dev/x 2>/dev/null || echo ro",
        ],
    );
    b.edit(|s| {
        for m in s["mounts"].as_array_mut().unwrap() {
            if m["destination"] == "/dev" {
                m["options"].as_array_mut().unwrap().push(json!("ro"));
            }
        }
    });
    let (code, out, err) = run(&env, &b, "devro");
    assert_eq!(code, 0, "{err}");
    let opts = options_of(&out, "/dev");
    assert!(opts[0].starts_with("ro,"), "{out}");
    assert!(out.contains("\nnull\nro\n"), "{out}");
}

/// A tmpfs without `mode=` takes the mode of the directory it covers (runc; crun and
/// libcontainer 0.7 give tmpfs's 1777); an explicit `mode=` wins.
#[test]
fn a_tmpfs_without_mode_takes_the_covered_directory_mode() {
    needs_root!();
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["sh", "-c", "stat -c %a /t700 /t750"]);
    for (d, m) in [("t700", 0o700), ("t750", 0o750)] {
        let p = b.dir.join("rootfs").join(d);
        std::fs::create_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(m)).unwrap();
    }
    b.edit(|s| {
        let m = s["mounts"].as_array_mut().unwrap();
        m.push(
            json!({"destination": "/t700", "type": "tmpfs", "source": "tmpfs",
                      "options": ["nosuid"]}),
        );
        m.push(
            json!({"destination": "/t750", "type": "tmpfs", "source": "tmpfs",
                      "options": ["mode=1777"]}),
        );
    });
    let (code, out, err) = run(&env, &b, "mode");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "700\n1777\n");
}

/// `tmpcopyup`: the new tmpfs starts with the covered directory's files, owners,
/// modes and symlinks (runc, crun); writes land in the tmpfs, not the rootfs.
/// libcontainer 0.7 failed the container ("failed to prepare rootfs").
#[test]
fn tmpcopyup_copies_the_covered_directory() {
    needs_root!();
    use std::os::unix::fs::PermissionsExt;
    let env = TestEnv::new();
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "cat /cu/file /cu/sub/deep; stat -c '%u:%g %a' /cu/file /cu/sub; readlink /cu/link; \
             echo new > /cu/new; grep ' /cu ' /proc/self/mountinfo | cut -d' ' -f9",
        ],
    );
    let cu = b.dir.join("rootfs/cu");
    std::fs::create_dir_all(cu.join("sub")).unwrap();
    std::fs::write(cu.join("file"), "data\n").unwrap();
    std::fs::write(cu.join("sub/deep"), "deep\n").unwrap();
    std::os::unix::fs::chown(cu.join("file"), Some(1000), Some(1001)).unwrap();
    std::fs::set_permissions(cu.join("file"), std::fs::Permissions::from_mode(0o604)).unwrap();
    std::fs::set_permissions(cu.join("sub"), std::fs::Permissions::from_mode(0o710)).unwrap();
    std::os::unix::fs::symlink("sub/deep", cu.join("link")).unwrap();
    b.edit(|s| {
        s["mounts"].as_array_mut().unwrap().push(
            json!({"destination": "/cu", "type": "tmpfs", "source": "tmpfs",
                   "options": ["nosuid", "tmpcopyup"]}),
        );
    });
    let (code, out, err) = run(&env, &b, "copyup");
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out, "data\ndeep\n1000:1001 604\n0:0 710\nsub/deep\ntmpfs\n",
        "{err}"
    );
    assert!(!cu.join("new").exists(), "the write went to the rootfs");
}

/// `nosymfollow` (MS_NOSYMFOLLOW) on a tmpfs and on a bind mount: a symlink there is
/// not followed in the container (ELOOP), as under runc 1.1.5; `symfollow` on a bind
/// of a `nosymfollow` source follows again, also in a user namespace (the kernel does
/// not lock the flag). libcontainer 0.7 failed the tmpfs ("failed to prepare rootfs")
/// and followed the bind's links.
#[test]
fn nosymfollow_stops_symlinks_on_the_mount() {
    needs_root!();
    use nix::mount::MsFlags;
    let env = TestEnv::new();
    let src = env.dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("target"), "data\n").unwrap();
    std::os::unix::fs::symlink("target", src.join("link")).unwrap();
    let nosym = env.dir.path().join("nosym");
    std::fs::create_dir_all(&nosym).unwrap();
    std::fs::write(nosym.join("target"), "data\n").unwrap();
    std::os::unix::fs::symlink("target", nosym.join("link")).unwrap();
    let _m = flagged_source(&nosym, MsFlags::from_bits_retain(libc::MS_NOSYMFOLLOW));
    let show = "echo x > /t/x && ln -s x /t/l; \
                for p in /t/l /b/link /f/link /k/link; do \
                cat $p >/dev/null 2>&1 && echo \"$p followed\" || echo \"$p stopped\"; done; \
                grep -E ' /(t|b) ' /proc/self/mountinfo | cut -d' ' -f5,6";
    for userns in [false, true] {
        let mut b = env.bundle(&format!("b{userns}"), &["sh", "-c", show]);
        if userns {
            b.annotate("io.siloc.userns", "auto");
        }
        b.edit(|s| {
            let m = s["mounts"].as_array_mut().unwrap();
            m.push(
                json!({"destination": "/t", "type": "tmpfs", "source": "tmpfs",
                          "options": ["nosuid", "nosymfollow"]}),
            );
            m.push(
                json!({"destination": "/b", "type": "bind", "source": src.to_str().unwrap(),
                          "options": ["rbind", "nosymfollow"]}),
            );
            m.push(json!({"destination": "/f", "type": "bind",
                          "source": nosym.to_str().unwrap(), "options": ["rbind", "symfollow"]}));
            m.push(json!({"destination": "/k", "type": "bind",
                          "source": nosym.to_str().unwrap(), "options": ["rbind"]}));
        });
        let (code, out, err) = run(&env, &b, &format!("nosym{userns}"));
        assert_eq!(code, 0, "userns {userns}: {err}");
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(
            &lines[..4],
            [
                "/t/l stopped",
                "/b/link stopped",
                "/f/link followed",
                "/k/link stopped"
            ],
            "userns {userns}: {out}"
        );
        for point in ["/t", "/b"] {
            let o = options_of(&out, point);
            assert_eq!(o.len(), 1, "{out}");
            assert!(o[0].split(',').any(|f| f == "nosymfollow"), "{out}");
        }
    }
}

/// A destination that is a dangling symlink is followed inside the rootfs, the target
/// made and mounted (runc 1.1.5; crun and libcontainer 0.7 fail).
#[test]
fn a_dangling_symlink_destination_is_followed_in_the_rootfs() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "readlink /dl; grep ' /nonexistent/dir ' /proc/self/mountinfo | cut -d' ' -f9",
        ],
    );
    std::os::unix::fs::symlink("/nonexistent/dir", b.dir.join("rootfs/dl")).unwrap();
    b.edit(|s| {
        s["mounts"]
            .as_array_mut()
            .unwrap()
            .push(json!({"destination": "/dl", "type": "tmpfs", "source": "tmpfs"}));
    });
    let (code, out, err) = run(&env, &b, "dangling");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "/nonexistent/dir\ntmpfs\n");
    assert!(b.dir.join("rootfs/nonexistent/dir").is_dir());
}

/// `/proc` on a symlink is refused in runc's words, leaving nothing behind.
#[test]
fn proc_on_a_symlink_is_refused_in_runcs_words() {
    needs_root!();
    let env = TestEnv::new();
    let b = env.bundle("b", &["true"]);
    let proc = b.dir.join("rootfs/proc");
    std::fs::remove_dir(&proc).unwrap();
    std::os::unix::fs::symlink("/tmp", &proc).unwrap();
    let id = env.id("procsym");
    let (ok, _, err) = env.detached(&["create", "--bundle", b.path(), &id]);
    assert!(!ok);
    assert!(
        err.contains(
            "error mounting \\\"proc\\\" to rootfs at \\\"/proc\\\": filesystem \\\"proc\\\" \
             must be mounted on ordinary directory"
        ) || err.contains(
            "error mounting \"proc\" to rootfs at \"/proc\": filesystem \"proc\" must be \
             mounted on ordinary directory"
        ),
        "{err}"
    );
    env.assert_no_trace(&id);
}

/// A path listed twice is masked once, and every masked directory shows the same
/// read-only tmpfs (runc 1.2; runc 1.1.5, crun and libcontainer 0.7 stack a second
/// mount and give each directory its own tmpfs). Files get /dev/null.
#[test]
fn masked_paths_are_masked_once_and_directories_share_one_tmpfs() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "grep -E ' /(m1|m2|mfile|sys/firmware) ' /proc/self/mountinfo | cut -d' ' -f3,5,6; \
             cat /mfile | wc -c; touch /m1/x 2>/dev/null || echo ro",
        ],
    );
    for d in ["m1", "m2"] {
        std::fs::create_dir(b.dir.join("rootfs").join(d)).unwrap();
    }
    std::fs::write(b.dir.join("rootfs/mfile"), "secret\n").unwrap();
    b.edit(|s| {
        let m = s["linux"]["maskedPaths"].as_array_mut().unwrap();
        for p in ["/m1", "/m1", "/m2", "/mfile", "/mfile", "/no/such/path"] {
            m.push(json!(p));
        }
    });
    let (code, out, err) = run(&env, &b, "mask");
    assert_eq!(code, 0, "{err}");
    let lines: Vec<Vec<&str>> = out
        .lines()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .filter(|w| w.len() == 3)
        .collect();
    let at = |p: &str| lines.iter().filter(|w| w[1] == p).collect::<Vec<_>>();
    for p in ["/m1", "/m2", "/mfile", "/sys/firmware"] {
        assert_eq!(at(p).len(), 1, "{p}: {out}");
    }
    let dev = at("/m1")[0][0];
    assert_eq!(at("/m2")[0][0], dev, "{out}");
    assert_eq!(at("/sys/firmware")[0][0], dev, "{out}");
    assert!(at("/m1")[0][2].starts_with("ro"), "{out}");
    assert!(out.ends_with("0\nro\n"), "{out}");
}

/// A masked path that is a symlink is followed inside the container, as runc's init
/// follows it (runc 1.1.5 and 1.4; the "must be mounted on ordinary directory"
/// is runc's text for proc and sysfs mounts only): `/proc/net -> self/net` masks the
/// init's `/proc/1/net`, `/msym -> /etc/secret` masks the file the link names, and a
/// dangling link is skipped. siloc's masking helper is outside the container's PID
/// namespace, where `/proc/self` does not resolve: the mask was skipped.
#[test]
fn a_masked_path_that_is_a_symlink_is_followed_as_in_runcs_init() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "grep -E ' /(proc/1/net|etc/secret) ' /proc/self/mountinfo | cut -d' ' -f5 | sort; \
             cat /etc/secret | wc -c",
        ],
    );
    std::fs::write(b.dir.join("rootfs/etc/secret"), "secret\n").unwrap();
    std::os::unix::fs::symlink("/etc/secret", b.dir.join("rootfs/msym")).unwrap();
    std::os::unix::fs::symlink("/nonexistent", b.dir.join("rootfs/mdangle")).unwrap();
    b.edit(|s| {
        let m = s["linux"]["maskedPaths"].as_array_mut().unwrap();
        for p in ["/proc/net", "/msym", "/mdangle"] {
            m.push(json!(p));
        }
    });
    let (code, out, err) = run(&env, &b, "masksym");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "/etc/secret\n/proc/1/net\n0\n");
    assert!(!b.dir.join("rootfs/nonexistent").exists());
}

/// A destination with `..` is cleaned as runc cleans it: `/vol/../x` mounts at `/x`
/// and no `/vol` is made (runc 1.1.5; libcontainer 0.7 failed with "failed to
/// prepare rootfs", naming neither the mount nor the cause).
#[test]
fn a_destination_with_dot_dot_is_cleaned_as_runc_cleans_it() {
    needs_root!();
    let env = TestEnv::new();
    let src = env.dir.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("f"), "in src\n").unwrap();
    let mut b = env.bundle("b", &["cat", "/x/f"]);
    b.edit(|s| {
        s["mounts"].as_array_mut().unwrap().push(json!({
            "destination": "/vol/../x", "type": "bind",
            "source": src.display().to_string(), "options": ["rbind"]
        }));
    });
    let (code, out, err) = run(&env, &b, "dotdot");
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "in src\n");
    assert!(!b.dir.join("rootfs/vol").exists());
}
