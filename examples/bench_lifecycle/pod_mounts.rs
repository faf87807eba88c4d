//! `--pod-mounts N`: the mount table of a Kubernetes node with N pods, for every runtime
//! alike. Each runtime reads the mount table of the namespace it runs in
//! (`/proc/self/mountinfo`), and the kernel renders the whole table at every read, so
//! what a read costs grows with the pods a node runs; an idle test host has a few dozen
//! lines.
//!
//! Per pod, what kubelet and containerd mount on the host for a pod of one container
//! run by another runtime: its rootfs overlay (10 lowerdirs under containerd's
//! overlayfs snapshotter paths), three volume tmpfs (the service account token and two
//! projected or secret volumes, under kubelet's pod dirs) and the sandbox's `/dev/shm`
//! tmpfs: 5 lines, about 350 bytes each. They are made in a private mount namespace the
//! benchmark enters before it starts anything (unshare(2) with CLONE_NEWNS, which a
//! process with threads may not do), so the runtimes it runs inherit the table, and the
//! host's own table never sees them: they go when the benchmark exits.

use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};
use nix::sched::{CloneFlags, unshare};

/// Layers the pods' overlays share, as pods of a few images do.
const LAYERS: usize = 12;
/// Lowerdirs per overlay.
const DEPTH: usize = 10;

/// The pods' mounts, detached from the benchmark's namespace when dropped, so that the
/// work dir holding their directory can be removed.
pub struct PodMounts {
    dir: PathBuf,
    /// Lines of `/proc/self/mountinfo` with the pods' mounts.
    pub lines: usize,
    /// Its size in bytes.
    pub bytes: usize,
}

impl Drop for PodMounts {
    fn drop(&mut self) {
        let _ = umount2(&self.dir, MntFlags::MNT_DETACH);
    }
}

/// Enters a private mount namespace and mounts `pods` pods' worth of the mounts above
/// under `dir` (made; a tmpfs holds them all).
///
/// Panics: when a step fails (the benchmark needs root, and overlayfs and tmpfs).
pub fn make(dir: &Path, pods: usize) -> PodMounts {
    unshare(CloneFlags::CLONE_NEWNS).expect("unshare(CLONE_NEWNS): needs root, no threads");
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .expect("make / private in the benchmark's mount namespace");
    std::fs::create_dir_all(dir).expect("pod mounts dir");
    mount(
        Some("tmpfs"),
        dir,
        Some("tmpfs"),
        MsFlags::empty(),
        Some("mode=0700"),
    )
    .expect("tmpfs for the pod mounts");
    let snaps = dir.join("var/lib/containerd/io.containerd.snapshotter.v1.overlayfs/snapshots");
    let layer = |i: usize| snaps.join(format!("{}", 1000 + i)).join("fs");
    for i in 0..LAYERS {
        std::fs::create_dir_all(layer(i)).expect("layer dir");
    }
    for p in 0..pods {
        let id = format!("{p:064x}");
        let lower: Vec<String> = (0..DEPTH)
            .map(|l| layer((p + l) % LAYERS).display().to_string())
            .collect();
        let rootfs = dir
            .join("run/containerd/io.containerd.runtime.v2.task/k8s.io")
            .join(&id)
            .join("rootfs");
        let opts = format!("lowerdir={}", lower.join(":"));
        make_mount(&rootfs, "overlay", "overlay", &opts);
        let pod = dir
            .join("var/lib/kubelet/pods")
            .join(format!("{p:08x}-bench-pod-uid"));
        for v in [
            "kubernetes.io~projected/kube-api-access-7xk2q",
            "kubernetes.io~secret/app-credentials",
            "kubernetes.io~projected/app-config",
        ] {
            make_mount(&pod.join("volumes").join(v), "tmpfs", "tmpfs", "size=1m");
        }
        let shm = dir
            .join("run/containerd/io.containerd.grpc.v1.cri/sandboxes")
            .join(&id)
            .join("shm");
        make_mount(&shm, "shm", "tmpfs", "size=64m");
    }
    let table = std::fs::read_to_string("/proc/self/mountinfo").expect("read mountinfo");
    PodMounts {
        dir: dir.to_path_buf(),
        lines: table.lines().count(),
        bytes: table.len(),
    }
}

fn make_mount(at: &Path, source: &str, fstype: &str, opts: &str) {
    std::fs::create_dir_all(at).expect("mount point");
    mount(Some(source), at, Some(fstype), MsFlags::empty(), Some(opts))
        .unwrap_or_else(|e| panic!("mount {fstype} at {}: {e}", at.display()));
}
