//! `HOME` for the container's processes, from the container's own `/etc/passwd`, as
//! runc sets it: when the process's environment has no (or an empty) `HOME`, the
//! home field of the first passwd entry with the process's uid, else `/` (runc 1.1.5
//! `libcontainer/init_linux.go` setupUser and `user.GetExecUser`'s defaults).
//!
//! libcontainer 0.7 looks the uid up with glibc's getpwuid_r inside the container,
//! right before the program runs. That goes through glibc's NSS, which reads the
//! container's `/etc/nsswitch.conf` and dlopens the `libnss_*.so.2` modules it names
//! from the container's filesystem: code of the image ran inside siloc's init (seen
//! here with a `passwd: files evil` image). runc parses the file and loads nothing.
//! siloc reads the file itself, from the host and with every path component resolved
//! inside the container's root (openat2 `RESOLVE_IN_ROOT`), and hands libcontainer a
//! process whose environment already has `HOME`, so its lookup never runs:
//! - `create`: from the rootfs, or from the source of a bind mount the spec puts on
//!   `/etc/passwd` or `/etc` (podman binds its own passwd file there) - [`for_create`];
//!   an empty [`ADDED_MARKER`] file in the record dir notes the addition, so a
//!   command-line `exec` does not inherit the init user's home ([`without_added`]);
//! - `exec`: through `/proc/<init>/root`, the container's own mount tree - [`for_exec`].

use std::path::{Path, PathBuf};

use oci_spec::runtime::{Mount, Spec};

/// The most of a passwd file siloc reads (bytes); a larger one counts as absent.
const PASSWD_LIMIT: u64 = 16 << 20;

/// The file in siloc's record dir of a container whose final spec got `HOME` from
/// [`for_create`] (empty: a file without data costs the state root no block).
pub const ADDED_MARKER: &str = "home-added";

/// runc's home for a uid without a passwd entry (or without a readable passwd).
pub const DEFAULT_HOME: &str = "/";

/// The home field of the first entry of `passwd` (passwd(5): `name:pw:uid:gid:gecos:home:shell`)
/// whose uid is `uid`; None when no entry has it. Lines that do not parse are skipped,
/// as runc's parser skips them.
pub fn home_of(passwd: &str, uid: u32) -> Option<&str> {
    passwd.lines().find_map(|line| {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            return None;
        }
        let f: Vec<&str> = line.split(':').collect();
        let entry_uid: u32 = f.get(2)?.trim().parse().ok()?;
        (entry_uid == uid).then(|| f.get(5).copied().unwrap_or(""))
    })
}

/// The variable name of environment entry `kv`: the text before its first `=`, or
/// all of it (libcontainer 0.7 takes an entry without `=` as the name, empty).
fn key(kv: &str) -> &str {
    kv.split_once('=').map_or(kv, |(k, _)| k)
}

/// Whether the environment `env` (`KEY=VALUE` strings) lacks a non-empty `HOME` as the
/// process gets it: the last entry named `HOME` counts, as in runc (each entry set in
/// order) and libcontainer 0.7 (a map, the last one kept), which looks an empty one
/// up through NSS; `["HOME=/x", "HOME="]` lacks one.
pub fn missing(env: &[String]) -> bool {
    env.iter()
        .rev()
        .find(|kv| key(kv) == "HOME")
        .is_none_or(|kv| kv.split_once('=').is_none_or(|(_, v)| v.is_empty()))
}

/// `env` with `HOME=home` in place of every entry named `HOME` it has.
fn with_home(env: &mut Vec<String>, home: &str) {
    env.retain(|kv| key(kv) != "HOME");
    env.push(format!("HOME={home}"));
}

/// The home of `uid` in the passwd file at container path `/etc/passwd` of the tree
/// `root` (resolved inside it); [`DEFAULT_HOME`] when the file or the entry is missing.
fn lookup(root: &Path, file: &Path, uid: u32) -> String {
    match crate::sys::fs::read_in_root(root, file, PASSWD_LIMIT) {
        // An empty home field counts as none: libcontainer would look an empty HOME
        // up again (through NSS), and runc's init then gets `/` from its default too.
        Ok(body) => home_of(&String::from_utf8_lossy(&body), uid)
            .filter(|h| !h.is_empty())
            .unwrap_or(DEFAULT_HOME)
            .to_string(),
        Err(e) => {
            tracing::debug!(root = %root.display(), %e, "no passwd file: HOME={DEFAULT_HOME}");
            DEFAULT_HOME.to_string()
        }
    }
}

/// Where a `create` reads the container's passwd: the tree and the path in it, or
/// None when a mount hides the rootfs's file. The last spec mount on `/etc/passwd` or
/// `/etc` decides: a bind mount gives its source (relative sources are the bundle's), a
/// `tmpcopyup` tmpfs the rootfs's copy, any other mount no file. Without one: the
/// rootfs.
fn passwd_source(mounts: &[Mount], rootfs: &Path, bundle: &Path) -> Option<(PathBuf, PathBuf)> {
    let passwd = Path::new("/etc/passwd");
    // Relative destinations are the rootfs's (runc warns and takes them so).
    let dest = |m: &Mount| Path::new("/").join(m.destination());
    let Some(m) = mounts
        .iter()
        .rev()
        .find(|m| dest(m) == passwd || dest(m) == Path::new("/etc"))
    else {
        return Some((rootfs.to_path_buf(), passwd.to_path_buf()));
    };
    let has = |o: &str| m.options().iter().flatten().any(|x| x == o);
    if has("tmpcopyup") {
        return Some((rootfs.to_path_buf(), passwd.to_path_buf()));
    }
    if m.typ().as_deref() != Some("bind") && !has("bind") && !has("rbind") {
        return None;
    }
    let src = bundle.join(m.source().as_ref()?);
    Some(if dest(m) == passwd {
        let parent = src.parent().unwrap_or(Path::new("/")).to_path_buf();
        (parent, Path::new("/").join(src.file_name()?))
    } else {
        (src, PathBuf::from("/passwd"))
    })
}

/// Gives the spec's process `HOME` when its environment lacks one (see the module
/// doc), reading the passwd file from `rootfs` or the bind mount over it. Returns
/// whether it added `HOME`.
pub fn for_create(spec: &mut Spec, rootfs: &Path, bundle: &Path) -> bool {
    let mounts = spec.mounts().clone().unwrap_or_default();
    let Some(p) = spec.process_mut().as_mut() else {
        return false;
    };
    let mut env = p.env().clone().unwrap_or_default();
    if !missing(&env) {
        return false;
    }
    let home = match passwd_source(&mounts, rootfs, bundle) {
        Some((root, file)) => lookup(&root, &file, p.user().uid()),
        None => DEFAULT_HOME.to_string(),
    };
    with_home(&mut env, &home);
    p.set_env(Some(env));
    true
}

/// Gives an `exec`'d process (`process.json` as a JSON value) `HOME` when its `env`
/// lacks one, from the passwd file the container with init `pid` sees.
pub fn for_exec(process: &mut serde_json::Value, pid: i32) {
    let Some(obj) = process.as_object_mut() else {
        return;
    };
    let mut env: Vec<String> = obj
        .get("env")
        .and_then(|e| serde_json::from_value(e.clone()).ok())
        .unwrap_or_default();
    if !missing(&env) {
        return;
    }
    let uid = obj
        .get("user")
        .and_then(|u| u.get("uid"))
        .and_then(|u| u.as_u64())
        .and_then(|u| u32::try_from(u).ok())
        .unwrap_or(0);
    let root = PathBuf::from(format!("/proc/{pid}/root"));
    with_home(&mut env, &lookup(&root, Path::new("/etc/passwd"), uid));
    obj.insert("env".into(), serde_json::json!(env));
}

/// The container's environment `env` for a command-line `exec`, without the `HOME`
/// [`for_create`] added for the init's user (when `record_dir` holds [`ADDED_MARKER`]):
/// the exec's own user gets its own.
pub fn without_added(env: Vec<String>, record_dir: &Path) -> Vec<String> {
    if !record_dir.join(ADDED_MARKER).exists() {
        return env;
    }
    env.into_iter()
        .filter(|kv| !kv.starts_with("HOME="))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
        # a comment\n\
        broken line\n\
        daemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n\
        app:x:1000:1000:App:/home/app:/bin/sh\n\
        dup:x:1000:1000::/elsewhere:/bin/sh\n\
        nohome:x:1001:1001\n";

    #[test]
    fn first_entry_of_the_uid_wins() {
        assert_eq!(home_of(PASSWD, 0), Some("/root"));
        assert_eq!(home_of(PASSWD, 1000), Some("/home/app"));
        assert_eq!(home_of(PASSWD, 1001), Some(""));
        assert_eq!(home_of(PASSWD, 4242), None);
        assert_eq!(home_of("", 0), None);
    }

    #[test]
    fn home_counts_only_when_not_empty() {
        assert!(missing(&["PATH=/bin".into()]));
        assert!(missing(&["HOME=".into()]));
        assert!(!missing(&["HOME=/x".into(), "PATH=/bin".into()]));
        // the last HOME is the process's: an empty or bare one after a set one is none
        assert!(missing(&["HOME=/x".into(), "HOME=".into()]));
        assert!(missing(&["HOME=/x".into(), "HOME".into()]));
        assert!(!missing(&["HOME=".into(), "HOME=/x".into()]));
        assert!(!missing(&["HOMEDIR=".into(), "HOME=/x".into()]));
        let mut env = vec!["HOME=/x".to_string(), "HOME".to_string(), "HOMEX=1".into()];
        with_home(&mut env, "/root");
        assert_eq!(env, ["HOMEX=1", "HOME=/root"]);
        let mut env = vec!["HOME=".to_string(), "A=b".to_string()];
        with_home(&mut env, "/root");
        assert_eq!(env, ["A=b", "HOME=/root"]);
        let d = tempfile::tempdir().unwrap();
        assert_eq!(without_added(env.clone(), d.path()), env);
        std::fs::write(d.path().join(ADDED_MARKER), "").unwrap();
        assert_eq!(without_added(env, d.path()), ["A=b"]);
    }

    fn spec(mounts: serde_json::Value, env: serde_json::Value, uid: u32) -> Spec {
        serde_json::from_value(serde_json::json!({
            "ociVersion": "1.0.2",
            "process": {"cwd": "/", "args": ["sh"], "env": env, "user": {"uid": uid, "gid": 0}},
            "mounts": mounts
        }))
        .unwrap()
    }

    fn home(s: &Spec) -> Vec<String> {
        s.process().as_ref().unwrap().env().clone().unwrap()
    }

    #[test]
    fn create_reads_the_rootfs_inside_its_root() {
        let d = tempfile::tempdir().unwrap();
        let rootfs = d.path().join("rootfs");
        std::fs::create_dir_all(rootfs.join("etc")).unwrap();
        std::fs::write(rootfs.join("etc/passwd"), PASSWD).unwrap();
        let mut s = spec(
            serde_json::json!([]),
            serde_json::json!(["PATH=/bin"]),
            1000,
        );
        assert!(for_create(&mut s, &rootfs, d.path()));
        assert_eq!(home(&s), ["PATH=/bin", "HOME=/home/app"]);
        // an environment with HOME is left alone
        assert!(!for_create(&mut s, &rootfs, d.path()));
        // an unknown uid gets runc's default
        let mut s = spec(serde_json::json!([]), serde_json::json!([]), 7);
        assert!(for_create(&mut s, &rootfs, d.path()));
        assert_eq!(home(&s), ["HOME=/"]);
        // a symlink out of the rootfs is resolved inside it
        std::fs::remove_file(rootfs.join("etc/passwd")).unwrap();
        std::fs::write(d.path().join("host-passwd"), "x:x:5:5::/host:/bin/sh\n").unwrap();
        std::os::unix::fs::symlink("../../host-passwd", rootfs.join("etc/passwd")).unwrap();
        let mut s = spec(serde_json::json!([]), serde_json::json!([]), 5);
        assert!(for_create(&mut s, &rootfs, d.path()));
        assert_eq!(home(&s), ["HOME=/"]);
    }

    #[test]
    fn create_reads_a_bind_mounted_passwd() {
        let d = tempfile::tempdir().unwrap();
        let rootfs = d.path().join("rootfs");
        std::fs::create_dir_all(rootfs.join("etc")).unwrap();
        std::fs::write(rootfs.join("etc/passwd"), PASSWD).unwrap();
        std::fs::write(d.path().join("pw"), "u:x:1000:1000::/from/bind:/bin/sh\n").unwrap();
        let file = serde_json::json!([{"destination": "/etc/passwd", "type": "bind",
            "source": "pw", "options": ["rbind", "ro"]}]);
        let mut s = spec(file, serde_json::json!([]), 1000);
        assert!(for_create(&mut s, &rootfs, d.path()));
        assert_eq!(home(&s), ["HOME=/from/bind"]);
        std::fs::create_dir(d.path().join("etc2")).unwrap();
        std::fs::write(
            d.path().join("etc2/passwd"),
            "u:x:1000:1::/etc-bind:/bin/sh\n",
        )
        .unwrap();
        let dir = serde_json::json!([{"destination": "/etc", "source": d.path().join("etc2"),
            "options": ["bind"]}]);
        let mut s = spec(dir, serde_json::json!([]), 1000);
        assert!(for_create(&mut s, &rootfs, d.path()));
        assert_eq!(home(&s), ["HOME=/etc-bind"]);
        // a tmpfs on /etc hides the file, unless it copies it up
        let tmpfs =
            serde_json::json!([{"destination": "/etc", "type": "tmpfs", "source": "tmpfs"}]);
        let mut s = spec(tmpfs, serde_json::json!([]), 1000);
        assert!(for_create(&mut s, &rootfs, d.path()));
        assert_eq!(home(&s), ["HOME=/"]);
        let copy = serde_json::json!([{"destination": "/etc", "type": "tmpfs", "source": "tmpfs",
            "options": ["tmpcopyup"]}]);
        let mut s = spec(copy, serde_json::json!([]), 1000);
        assert!(for_create(&mut s, &rootfs, d.path()));
        assert_eq!(home(&s), ["HOME=/home/app"]);
    }
}
