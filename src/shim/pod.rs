//! A pod's containers share the sandbox's user namespace and ID range (Kubernetes'
//! rule for user-namespaced pods). containerd's CRI marks each container's spec with
//! `io.kubernetes.cri.container-type` (`sandbox` or `container`) and
//! `io.kubernetes.cri.sandbox-id`. When the sandbox (pause) container got an ID range
//! from siloc (`io.siloc.userns=auto`, shown as `io.siloc.userns.range` in its state),
//! an app container's spec is made to join the sandbox's user namespace
//! (`/proc/<sandbox pid>/ns/user`) and to repeat its mappings, and loses
//! `io.siloc.userns*`: siloc then idmaps the app container's layers with the sandbox's
//! range and allocates none. A spec that already has a user namespace
//! (containerd 2.x `hostUsers: false` pods) is left as it is.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;

use serde_json::{Value, json};
use siloc::annotations as ann;

use crate::error::{Result, ShimError};
use crate::runtime::Siloc;

/// CRI annotation: `sandbox` or `container`.
pub const CONTAINER_TYPE: &str = "io.kubernetes.cri.container-type";
/// CRI annotation: the pod sandbox's container id.
pub const SANDBOX_ID: &str = "io.kubernetes.cri.sandbox-id";

/// The host range of a siloc `io.siloc.userns.range` value `uid=U,gid=G,size=N`.
fn parse_range(v: &str) -> Option<(u64, u64, u64)> {
    let get = |k: &str| {
        v.split(',')
            .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
            .and_then(|n| n.parse::<u64>().ok())
    };
    Some((get("uid")?, get("gid")?, get("size")?))
}

fn has_userns(spec: &Value) -> bool {
    spec["linux"]["namespaces"]
        .as_array()
        .is_some_and(|ns| ns.iter().any(|n| n["type"] == "user"))
}

/// Makes an app container join its sandbox's user namespace, if the sandbox has a
/// siloc range. Returns the sandbox id it joined.
///
/// Errors: [`ShimError::Sandbox`] when the container asks for `io.siloc.userns=auto`
/// but its sandbox cannot be read, or has no range (it would get a range of its own,
/// which Kubernetes' pods never do).
pub fn join_sandbox(spec: &mut Value, siloc: &Siloc) -> Result<Option<String>> {
    let a = &spec["annotations"];
    if a[CONTAINER_TYPE] != "container" || has_userns(spec) {
        return Ok(None);
    }
    let Some(sandbox) = a[SANDBOX_ID].as_str().map(str::to_string) else {
        return Ok(None);
    };
    let wants = ann::userns_is_auto(a[ann::USERNS].as_str());
    let bad = |msg: String| ShimError::Sandbox {
        sandbox: sandbox.clone(),
        msg,
    };
    let st = match siloc.state(&sandbox) {
        Ok(st) => st,
        Err(e) if wants => return Err(bad(format!("cannot read its siloc state: {e}"))),
        Err(_) => return Ok(None),
    };
    let range = st["annotations"][ann::OUT_USERNS_RANGE]
        .as_str()
        .and_then(parse_range);
    let Some((uid, gid, size)) = range else {
        if wants {
            return Err(bad(format!(
                "has no siloc ID range ({} absent in its state); the pod's containers \
                 share the sandbox's user namespace, so the sandbox needs {}=auto too",
                ann::OUT_USERNS_RANGE,
                ann::USERNS
            )));
        }
        return Ok(None);
    };
    let pid = st["pid"]
        .as_u64()
        .filter(|p| *p > 0)
        .ok_or_else(|| bad("has no running init process".into()))?;
    if !spec["linux"].is_object() {
        spec["linux"] = json!({});
    }
    let linux = &mut spec["linux"];
    if !linux["namespaces"].is_array() {
        linux["namespaces"] = json!([]);
    }
    if let Some(ns) = linux["namespaces"].as_array_mut() {
        ns.push(json!({"type": "user", "path": format!("/proc/{pid}/ns/user")}));
    }
    // A namespace the sandbox shares with the host (uts of a host-network pod) cannot
    // be joined from inside the pod's user namespace (setns wants CAP_SYS_ADMIN over
    // its owner, the host's user namespace), and libcontainer joins the user
    // namespace first: the container keeps the host's by inheritance instead.
    if let Some(ns) = linux["namespaces"].as_array_mut() {
        ns.retain(|n| {
            let (Some(t), Some(path)) = (n["type"].as_str(), n["path"].as_str()) else {
                return true;
            };
            let own = match t {
                "network" => "net",
                "mount" => "mnt",
                "user" => return true,
                other => other,
            };
            let id = |p: &str| siloc::sys::ns::id(p).ok();
            let hosts = id(path).is_some() && id(path) == id(&format!("/proc/self/ns/{own}"));
            if hosts {
                log::info!("{t} namespace {path} is the host's: inherited, not joined");
            }
            !hosts
        });
    }
    linux["uidMappings"] = json!([{"containerID": 0, "hostID": uid, "size": size}]);
    linux["gidMappings"] = json!([{"containerID": 0, "hostID": gid, "size": size}]);
    if let Some(a) = spec["annotations"].as_object_mut() {
        // The pod's range is the sandbox's: a container's own wish is dropped, said so.
        for key in [ann::USERNS, ann::USERNS_SIZE] {
            if let Some(v) = a.remove(key)
                && (key != ann::USERNS || !ann::userns_is_auto(v.as_str()))
            {
                log::warn!(
                    "{key}={v} of an app container ignored: the pod's containers share \
                     sandbox {sandbox}'s user namespace and ID range"
                );
            }
        }
    }
    log::info!(
        "joins the user namespace of sandbox {sandbox} (pid {pid}, uid {uid} gid {gid} size {size})"
    );
    Ok(Some(sandbox))
}

/// The destinations of the mounts that carry per-mount ID mappings (`uidMappings`/
/// `gidMappings`, or the `idmap`/`ridmap` option; runtime-spec 1.1 config.md "Mounts"),
/// for the log. containerd 2.x puts them on a user-namespaced pod's bind mounts
/// (volumes, /etc/hosts, /etc/hostname, resolv.conf): the shim hands them to siloc as
/// they are, and siloc makes each an idmapped bind mount
/// (`siloc::engine::idmapped_mounts`), so a volume's files keep their owners inside
/// instead of showing the overflow ID.
pub fn idmapped_mounts(spec: &Value) -> Vec<String> {
    spec["mounts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| {
            m.get("uidMappings").is_some()
                || m.get("gidMappings").is_some()
                || m["options"]
                    .as_array()
                    .is_some_and(|o| o.iter().any(|o| o == "idmap" || o == "ridmap"))
        })
        .map(|m| m["destination"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// The directory containerd's CRI plugin keeps its per-pod files in, below its root
/// (`/var/lib/containerd`) and its state dir (`/run/containerd`).
const CRI_DIR: &str = "io.containerd.grpc.v1.cri";
/// The directory of containerd's runtime v2 bundles (state) and work dirs (root).
const TASK_DIR: &str = "io.containerd.runtime.v2.task";

/// containerd's state and root directories as a container's bundle shows them: the
/// bundle is `<state>/io.containerd.runtime.v2.task/<namespace>/<id>` and holds a
/// symlink `work` to `<root>/io.containerd.runtime.v2.task/<namespace>/<id>`
/// (containerd's runtime v2 bundle, 1.x and 2.x). Either is left out when its path
/// does not have that shape; then no bind source below it is opened.
pub fn containerd_dirs(bundle: &Path) -> Vec<PathBuf> {
    let base = |p: &Path| -> Option<PathBuf> {
        let tasks = p.parent()?.parent()?;
        if tasks.file_name()? != TASK_DIR {
            return None;
        }
        tasks.parent().map(Path::to_path_buf)
    };
    let mut dirs: Vec<PathBuf> = base(bundle).into_iter().collect();
    if let Ok(work) = std::fs::read_link(bundle.join("work")) {
        dirs.extend(base(&work).filter(|d| !dirs.contains(d)));
    }
    dirs
}

/// Gives search permission to all (adds o+x, never read or g+x) on the directories
/// from containerd's root or state dir (`bases`, from [`containerd_dirs`]) down to
/// the bind-mount sources of a container in a user namespace that live in this
/// pod's own CRI directories:
/// `<base>/io.containerd.grpc.v1.cri/{sandboxes,containers}/<id>/...`, `<id>` being
/// the container `id` or its sandbox (`io.kubernetes.cri.sandbox-id`). Other sources
/// (hostPath volumes, also one shaped like that path elsewhere) are never touched,
/// nor a symlink below the base or its target. libcontainer 0.7 resolves bind
/// sources inside the container's user namespace, as the range's root, and
/// containerd makes its CRI sandbox and container directories 0700 unless it knows
/// of the user namespace itself (runc 1.2 opens the sources outside instead).
/// Returns the directories changed, for the log. Errors are logged, not returned:
/// the mount then fails with siloc's own message.
pub fn open_bind_sources(spec: &Value, id: &str, bases: &[PathBuf]) -> Vec<PathBuf> {
    let mut ids = vec![id];
    ids.extend(spec["annotations"][SANDBOX_ID].as_str());
    ids.retain(|i| !i.is_empty());
    let sources = spec["mounts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| {
            m["type"] == "bind"
                || m["options"]
                    .as_array()
                    .is_some_and(|o| o.iter().any(|o| o == "bind" || o == "rbind"))
        })
        .filter_map(|m| m["source"].as_str().map(PathBuf::from));
    let mut changed = Vec::new();
    for src in sources {
        let Some(base) = cri_base(&src, &ids).filter(|b| bases.iter().any(|d| d == b)) else {
            continue;
        };
        let opened = open_base(base).map(|base_fd| {
            for dir in src.ancestors().skip(1).take_while(|d| d.starts_with(base)) {
                let rel = dir.strip_prefix(base).unwrap_or(Path::new(""));
                match add_search(&base_fd, rel) {
                    Ok(true) => changed.push(dir.to_path_buf()),
                    Ok(false) => {}
                    Err(e) => log::warn!(
                        "cannot open {} for the container's user namespace: {e}",
                        dir.display()
                    ),
                }
            }
        });
        if let Err(e) = opened {
            log::warn!("cannot open {}: {e}", base.display());
        }
    }
    changed
}

/// The base (containerd's root or state dir) when `src` lies in the CRI directory of
/// one of `ids`: `<base>/io.containerd.grpc.v1.cri/{sandboxes,containers}/<id>/<more>`.
/// Relative sources and `..` components never match.
fn cri_base<'a>(src: &'a Path, ids: &[&str]) -> Option<&'a Path> {
    if !src.is_absolute() || src.components().any(|c| c == Component::ParentDir) {
        return None;
    }
    src.ancestors().find_map(|a| {
        if a.file_name()? != CRI_DIR {
            return None;
        }
        let mut rest = src.strip_prefix(a).ok()?.components();
        let kind = rest.next()?.as_os_str();
        let owner = rest.next()?.as_os_str();
        rest.next()?;
        let ours = (kind == "sandboxes" || kind == "containers") && ids.iter().any(|i| owner == *i);
        if ours { a.parent() } else { None }
    })
}

/// Opens containerd's directory `base` (following symlinks: its configured path).
fn open_base(base: &Path) -> std::io::Result<OwnedFd> {
    use nix::fcntl::{OFlag, open};
    let fd = open(
        base,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )?;
    // SAFETY: open returned a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds o+x to directory `rel` below the open `base` (`base` itself for an empty
/// `rel`) unless it has it, changed through an fd. Below the base no symlink is
/// followed (openat2 `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), so a link in
/// containerd's directories never leads the change elsewhere. `Ok(false)` when it
/// had o+x, or is or passes a symlink, or is no directory.
fn add_search(base: &OwnedFd, rel: &Path) -> std::io::Result<bool> {
    use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};
    use nix::sys::stat::{Mode, fchmod, fstat};
    let opened;
    let fd = if rel.as_os_str().is_empty() {
        base.as_raw_fd()
    } else {
        let how = OpenHow::new()
            .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW)
            .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
        match openat2(base.as_raw_fd(), rel, how) {
            // SAFETY: openat2 returned a new fd that nothing else owns.
            Ok(fd) => opened = unsafe { OwnedFd::from_raw_fd(fd) },
            Err(Errno::ELOOP | Errno::ENOTDIR | Errno::EXDEV) => return Ok(false),
            Err(e) => return Err(e.into()),
        }
        opened.as_raw_fd()
    };
    let mode = fstat(fd)?.st_mode & 0o7777;
    if mode & 0o001 != 0 {
        return Ok(false);
    }
    fchmod(fd, Mode::from_bits_truncate(mode | 0o001))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_idmaps_are_kept() {
        let spec = json!({"mounts": [
            {"destination": "/etc/hosts", "type": "bind", "options": ["rbind", "idmap"],
             "uidMappings": [{"containerID": 0, "hostID": 1, "size": 1}], "gidMappings": []},
            {"destination": "/proc", "type": "proc"}]});
        let before = spec.clone();
        assert_eq!(idmapped_mounts(&spec), vec!["/etc/hosts".to_string()]);
        assert_eq!(spec, before);
    }

    /// Makes each of `dirs` 0700.
    fn private(dirs: &[PathBuf]) {
        use std::os::unix::fs::PermissionsExt;
        for p in dirs {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
    }

    fn bind(src: PathBuf) -> Value {
        json!({"type": "bind", "source": src, "destination": "/x"})
    }

    #[test]
    fn only_the_pods_cri_dirs_get_search_permission() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let at = |p: &str| d.path().join(p);
        let base = at("root");
        let sb = base.join("io.containerd.grpc.v1.cri/sandboxes/pod1");
        let ct = base.join("io.containerd.grpc.v1.cri/containers/c1/volumes");
        let strange = base.join("io.containerd.grpc.v1.cri/sandboxes/pod2");
        // A hostPath volume that merely has an io.containerd.* component (the break-it
        // report's repro), and a symlink in it to a private directory elsewhere.
        let host = at("priv/io.containerd.evil/data");
        for p in [&sb, &ct, &strange, &host, &at("secret/sub")] {
            std::fs::create_dir_all(p).unwrap();
        }
        std::fs::write(sb.join("hosts"), "").unwrap();
        std::os::unix::fs::symlink(at("secret"), at("priv/io.containerd.evil/lnk")).unwrap();
        std::os::unix::fs::symlink(at("secret"), sb.join("lnk")).unwrap();
        let dirs = [
            d.path().to_path_buf(),
            base.clone(),
            base.join("io.containerd.grpc.v1.cri"),
            sb.clone(),
            base.join("io.containerd.grpc.v1.cri/containers/c1"),
            strange.clone(),
            at("priv"),
            at("priv/io.containerd.evil"),
            at("secret"),
        ];
        private(&dirs);
        let spec = json!({
            "annotations": {SANDBOX_ID: "pod1"},
            "mounts": [
                bind(sb.join("hosts")),
                {"type": "none", "options": ["rbind"], "source": ct.join("v"), "destination": "/v"},
                bind(strange.join("hosts")),
                bind(host.clone()),
                bind(at("priv/io.containerd.evil/lnk/sub")),
                bind(sb.join("lnk/sub")),
                bind(sb.join("../pod2/hosts")),
                {"type": "tmpfs", "source": sb.join("tmp"), "destination": "/t"}]});
        let bases = [base.clone()];
        let changed = open_bind_sources(&spec, "c1", &bases);
        // sandboxes/ and containers/ were made 0755: already searchable, left as they are.
        assert_eq!(
            changed,
            vec![
                sb.clone(),
                base.join("io.containerd.grpc.v1.cri"),
                base.clone(),
                base.join("io.containerd.grpc.v1.cri/containers/c1"),
            ]
        );
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&sb), 0o701, "o+x only");
        for (p, why) in [
            (d.path(), "above containerd's root"),
            (strange.as_path(), "another pod's"),
            (&at("priv"), "a hostPath's parent"),
            (
                &at("priv/io.containerd.evil"),
                "a hostPath's io.containerd.* component",
            ),
            (&at("secret"), "a symlink's target"),
        ] {
            assert_eq!(mode(p), 0o700, "{why}: untouched");
        }
        // Without the sandbox annotation only the container's own directory counts.
        let spec = json!({"mounts": [bind(strange.join("hosts"))]});
        assert_eq!(
            open_bind_sources(&spec, "pod2x", &bases),
            Vec::<PathBuf>::new()
        );
        assert_eq!(
            open_bind_sources(&spec, "pod2", &bases),
            vec![strange.clone()]
        );
    }

    /// The second break-it report: a hostPath shaped like the pod's own CRI directory
    /// but elsewhere (containerd creates the missing part) is not containerd's, and a
    /// symlink below containerd's directory leads nowhere.
    #[test]
    fn a_look_alike_cri_tree_elsewhere_is_left_alone() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let base = d.path().join("state");
        let fake = d.path().join("priv");
        let real = base.join("io.containerd.grpc.v1.cri/sandboxes/pod1");
        let elsewhere = d.path().join("elsewhere/sub");
        for p in [
            &real,
            &fake.join("io.containerd.grpc.v1.cri/sandboxes/pod1/x"),
            &elsewhere,
        ] {
            std::fs::create_dir_all(p).unwrap();
        }
        std::os::unix::fs::symlink(d.path().join("elsewhere"), real.join("lnk")).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let all = [
            fake.clone(),
            fake.join("io.containerd.grpc.v1.cri"),
            fake.join("io.containerd.grpc.v1.cri/sandboxes"),
            fake.join("io.containerd.grpc.v1.cri/sandboxes/pod1"),
            d.path().join("elsewhere"),
            elsewhere.clone(),
            real.clone(),
        ];
        private(&all);
        let spec = json!({
            "annotations": {SANDBOX_ID: "pod1"},
            "mounts": [
                bind(fake.join("io.containerd.grpc.v1.cri/sandboxes/pod1/x")),
                bind(real.join("lnk/sub/file"))]});
        // Only the real tree's own directory: not through the link, not the look-alike.
        assert_eq!(
            open_bind_sources(&spec, "c1", std::slice::from_ref(&base)),
            vec![real.clone()]
        );
        for p in &all[..6] {
            assert_eq!(mode(p), 0o700, "{} untouched", p.display());
        }
        // Without containerd's directories nothing is opened at all.
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(open_bind_sources(&spec, "c1", &[]), Vec::<PathBuf>::new());
    }

    #[test]
    fn containerd_dirs_come_from_the_bundle_and_its_work_link() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("run");
        let root = d.path().join("lib");
        let bundle = state.join("io.containerd.runtime.v2.task/k8s.io/c1");
        let work = root.join("io.containerd.runtime.v2.task/k8s.io/c1");
        std::fs::create_dir_all(&bundle).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        assert_eq!(containerd_dirs(&bundle), vec![state.clone()]);
        std::os::unix::fs::symlink(&work, bundle.join("work")).unwrap();
        assert_eq!(containerd_dirs(&bundle), vec![state, root]);
        assert!(containerd_dirs(&d.path().join("some/other/bundle")).is_empty());
    }

    #[test]
    fn ranges_parse() {
        assert_eq!(
            parse_range("uid=100000,gid=100000,size=65536"),
            Some((100000, 100000, 65536))
        );
        assert_eq!(parse_range("uid=1,size=2"), None);
    }

    #[test]
    fn sandboxes_and_specs_with_a_userns_are_left_alone() {
        let siloc = Siloc {
            binary: "/nonexistent/siloc".into(),
            root: "/nonexistent".into(),
            log: "/nonexistent/log.json".into(),
            systemd: false,
            debug: false,
        };
        let mut s = json!({"annotations": {CONTAINER_TYPE: "sandbox", ann::USERNS: "auto"}});
        assert_eq!(join_sandbox(&mut s, &siloc).unwrap(), None);
        let mut s = json!({"annotations": {CONTAINER_TYPE: "container", SANDBOX_ID: "p"},
                           "linux": {"namespaces": [{"type": "user", "path": "/proc/1/ns/user"}]}});
        assert_eq!(join_sandbox(&mut s, &siloc).unwrap(), None);
        // A container that asks for a range, whose sandbox cannot be read: refused.
        let mut s = json!({"annotations": {CONTAINER_TYPE: "container", SANDBOX_ID: "p", ann::USERNS: "auto"}});
        let e = join_sandbox(&mut s, &siloc).unwrap_err().to_string();
        assert!(e.contains("sandbox p"), "{e}");
    }
}
