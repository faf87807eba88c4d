//! The `io.siloc.*` annotations: what a bundle asks of siloc, and what siloc reports
//! back in the container's annotations (shown by `siloc state`).
//!
//! Annotations are runtime-spec `config.md` "Annotations": free-form string pairs; a
//! runtime ignores the ones it does not know, so these bundles still run under runc.

/// The prefix of every siloc annotation. `siloc features` lists it under
/// `potentiallyUnsafeConfigAnnotations` (runtime-spec 1.2 features.md): they make
/// siloc allocate host ID ranges, mount host directories, restrict cpusets and set I/O
/// limits, so a caller passes them on only from a trusted source.
pub const PREFIX: &str = "io.siloc.";
/// `auto` or `off`: give the container its own user namespace and host ID range.
pub const USERNS: &str = "io.siloc.userns";
/// Whether `value`, an [`USERNS`] value, asks for siloc's own user namespace:
/// `auto`, trimmed as userns::plan trims every `io.siloc.*` value. For the shim, which
/// must decide as siloc will.
pub fn userns_is_auto(value: Option<&str>) -> bool {
    value.map(str::trim) == Some("auto")
}
/// Number of IDs in the container's range (default 65536, `[userns] size`).
pub const USERNS_SIZE: &str = "io.siloc.userns.size";
/// JSON array of read-only layer directories, base first (image manifest order).
pub const ROOTFS_LAYERS: &str = "io.siloc.rootfs.layers";
/// A persistent writable directory for the overlay's upper layer.
pub const ROOTFS_UPPER: &str = "io.siloc.rootfs.upper";
/// With `io.siloc.rootfs.upper`: that upper dir's existing work dir, both owned by
/// whoever made them (containerd's snapshotter gives `.../snapshots/N/fs` and
/// `.../snapshots/N/work`); siloc neither makes nor removes either. Written by
/// containerd-shim-siloc-v2.
pub const ROOTFS_WORK: &str = "io.siloc.rootfs.work";
/// Every `io.siloc.rootfs.*` annotation names host paths: only a trusted writer (the
/// bundle's author, or siloc's shim, which strips any a pod brought) may set them.
pub const ROOTFS_PREFIX: &str = "io.siloc.rootfs.";
/// `auto`, `node:N` or `off`: NUMA-local placement.
pub(crate) const NUMA: &str = "io.siloc.numa";
/// Name of an I/O class from the host config.
pub(crate) const IO_CLASS: &str = "io.siloc.io.class";
/// Explicit limits: `rbps=…,wbps=…,riops=…,wiops=…`.
pub(crate) const IO_MAX: &str = "io.siloc.io.max";
/// Proportional I/O weight.
pub(crate) const IO_WEIGHT: &str = "io.siloc.io.weight";
/// cgroup v2 io.latency target for the container's disks: `2ms`, `500us`, or µs.
pub(crate) const IO_LATENCY: &str = "io.siloc.io.latency";

/// Written by siloc: the host ID range, `uid=U,gid=G,size=N`.
pub const OUT_USERNS_RANGE: &str = "io.siloc.userns.range";
/// Written by siloc when it joined namespaces for the container before its user
/// namespace (`engine::outer_namespaces`): `network=/var/run/netns/cni-… ipc=…`.
pub(crate) const OUT_NS_INHERITED: &str = "io.siloc.namespaces.inherited";
/// Written by siloc: how the rootfs was assembled
/// (`overlay layers=N trees=T idmapped=yes attached=1 via=lowerdir+`, or `idmapped-bind`).
pub(crate) const OUT_ROOTFS: &str = "io.siloc.rootfs.assembly";
/// Written by siloc when `io.siloc.numa` is not off: `mode=auto nodes=0 cpus=0-23
/// mems=0 devices=nvme0n1@0(259:0) reason=…` (`-`: left as the spec has it).
pub(crate) const OUT_NUMA_DECISION: &str = "io.siloc.numa.decision";
/// Written by siloc when an I/O policy applies: `class=NAME cgroup=v1 devices=
/// vda(254:0) rbps=N wbps=N riops=N wiops=N weight=N latency=µs spec=…` (`-`: none).
pub(crate) const OUT_IO_POLICY: &str = "io.siloc.io.policy";

/// Set on the scenario runner's containers: the run they belong to (`scenario`).
pub(crate) const SCENARIO_RUN: &str = "io.siloc.scenario.run";

/// Every annotation a bundle may give siloc. Another `io.siloc.*` key that is no
/// report either ([`OUTPUTS`], [`OUT_NS_INHERITED`]) is a typo or meant for a newer
/// siloc: [`unknown`] finds it, and the plan warns and ignores it, as runtimes ignore
/// annotations they do not know (runtime-spec config.md "Annotations").
pub(crate) const INPUTS: [&str; 11] = [
    USERNS,
    USERNS_SIZE,
    ROOTFS_LAYERS,
    ROOTFS_UPPER,
    ROOTFS_WORK,
    NUMA,
    IO_CLASS,
    IO_MAX,
    IO_WEIGHT,
    IO_LATENCY,
    SCENARIO_RUN,
];

/// The `io.siloc.*` keys of `a` that siloc neither reads nor writes, sorted.
pub(crate) fn unknown<'a>(a: impl IntoIterator<Item = &'a String>) -> Vec<&'a str> {
    let mut v: Vec<&str> = a
        .into_iter()
        .map(String::as_str)
        .filter(|k| k.starts_with(PREFIX))
        .filter(|k| !INPUTS.contains(k) && !OUTPUTS.contains(k) && *k != OUT_NS_INHERITED)
        .collect();
    v.sort_unstable();
    v
}

/// Every annotation siloc writes as a report. A bundle's own value of one is never
/// kept (`lifecycle::final_spec` removes it): `siloc state` then shows only what siloc
/// did, and containerd-shim-siloc-v2, which reads a sandbox's `io.siloc.userns.range`
/// to put the pod's app containers into its user namespace, cannot be handed a range
/// by a pod annotation (`pod_annotations = ["io.siloc.*"]` passes them through).
pub(crate) const OUTPUTS: [&str; 4] = [
    OUT_USERNS_RANGE,
    OUT_ROOTFS,
    OUT_NUMA_DECISION,
    OUT_IO_POLICY,
];

/// A bad `io.siloc.*` annotation or host default; names the annotation. Each feature's
/// `plan` returns it, so the message reads `annotation io.siloc.numa: ...`.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("annotation {key}: {msg}")]
pub(crate) struct AnnotationError {
    pub(crate) key: String,
    pub(crate) msg: String,
}

/// The longest [`AnnotationError`] message kept whole, in bytes.
const MSG_MAX: usize = 512;
/// Bytes kept from each end of a longer message.
const MSG_KEEP: usize = 200;

/// An [`AnnotationError`] for annotation `key`. A message longer than [`MSG_MAX`]
/// bytes (one that quotes a huge annotation value: containerd's `pod_annotations`
/// passes any size, the kubelet retries RunPodSandbox and containerd logs each error
/// several times) keeps its first and last [`MSG_KEEP`] bytes (at char boundaries)
/// and says how many it left out, so the value's start and the hint after it stay.
pub(crate) fn err(key: &str, msg: impl Into<String>) -> AnnotationError {
    let mut msg: String = msg.into();
    if msg.len() > MSG_MAX {
        let mut head = MSG_KEEP;
        while !msg.is_char_boundary(head) {
            head -= 1;
        }
        let mut tail = msg.len() - MSG_KEEP;
        while !msg.is_char_boundary(tail) {
            tail += 1;
        }
        msg = format!(
            "{}...[{} bytes left out]...{}",
            &msg[..head],
            tail - head,
            &msg[tail..]
        );
    }
    AnnotationError {
        key: key.to_string(),
        msg,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userns_auto_is_read_trimmed() {
        assert!(userns_is_auto(Some("auto")));
        assert!(userns_is_auto(Some(" auto\n")));
        for v in [None, Some("off"), Some("Auto"), Some("auto x"), Some("")] {
            assert!(!userns_is_auto(v), "{v:?}");
        }
    }

    #[test]
    fn unknown_siloc_keys_are_found() {
        let keys: Vec<String> = [
            "io.siloc.io.bogus",
            "io.siloc.userns",
            "io.siloc.io.policy",
            "io.siloc.namespaces.inherited",
            "io.siloc.wieght",
            "io.kubernetes.cri.sandbox-id",
            "io.siloc.scenario.run",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(unknown(&keys), ["io.siloc.io.bogus", "io.siloc.wieght"]);
    }

    #[test]
    fn a_huge_message_keeps_both_ends() {
        let value = format!("auto{}", "\u{e9}".repeat(500_000));
        let e = err(USERNS, format!("{value:?}: use \"auto\" or \"off\""));
        let text = e.to_string();
        assert!(text.len() < 1024, "{} bytes", text.len());
        assert!(
            text.starts_with("annotation io.siloc.userns: \"auto\u{e9}"),
            "{text}"
        );
        assert!(text.ends_with("\": use \"auto\" or \"off\""), "{text}");
        assert!(text.contains("bytes left out]"), "{text}");
        // A short message stays as it is.
        assert_eq!(err(USERNS, "x").msg, "x");
    }
}
