//! Shim grouping: one shim process serves all containers of a Kubernetes pod, as
//! containerd's runc shim does (cmd/containerd-shim-runc-v2/manager, `Start`).
//!
//! `shim start` runs in the new container's bundle. It reads the bundle's config.json
//! and takes the grouping id from its annotations: the first of [`GROUP_LABELS`] that
//! is set (containerd's CRI sets `io.kubernetes.cri.sandbox-id` on the sandbox and on
//! each app container of a pod), else the container's own id (a `ctr run` container
//! gets a shim of its own). The socket address comes from the grouping id with
//! containerd's rule ([`address`]); when a shim already listens there, `start` hands
//! that address to containerd and starts nothing. Otherwise it spawns a shim serving
//! that address (containerd-shim's `spawn`; a second `start` racing for the same
//! address finds the socket in use by the winner and hands over its address).

use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

use serde_json::Value;

use crate::error::{Result, ShimError, io_at};

/// The spec annotations that name a container's shim group, in order of precedence
/// (containerd's runc shim `groupLabels`: its own group label, then the CRI sandbox
/// id).
pub const GROUP_LABELS: [&str; 2] = ["io.containerd.runc.v2.group", crate::pod::SANDBOX_ID];

/// The grouping id of container `id` whose OCI spec is `spec`: the value of the first
/// of [`GROUP_LABELS`] among its annotations, else `id`.
pub fn grouping_id(spec: &Value, id: &str) -> String {
    GROUP_LABELS
        .iter()
        .find_map(|k| spec["annotations"][k].as_str())
        .unwrap_or(id)
        .to_string()
}

/// The grouping id of container `id` from `<bundle>/config.json`.
///
/// Errors: config.json unreadable or not JSON (containerd's runc shim fails `start`
/// the same way).
pub fn grouping_of_bundle(bundle: &Path, id: &str) -> Result<String> {
    let cfg = bundle.join("config.json");
    let data = std::fs::read(&cfg).map_err(io_at(&cfg))?;
    let spec: Value = serde_json::from_slice(&data).map_err(|e| ShimError::Bundle {
        path: cfg.clone(),
        msg: e.to_string(),
    })?;
    Ok(grouping_id(&spec, id))
}

/// The shim socket address of a group: `unix:///run/containerd/s/<hex sha256 of
/// "<containerd address>/<namespace>/<grouping id>">`, containerd's
/// `shim.SocketAddress` (pkg/shim/util_unix.go) as containerd-shim's
/// `socket_address` computes it.
pub fn address(containerd_address: &str, namespace: &str, grouping: &str) -> String {
    containerd_shim::socket_address(containerd_address, namespace, grouping)
}

/// The filesystem path of a `unix://` address (a bare path stays as it is).
fn socket_path(address: &str) -> &str {
    address.strip_prefix("unix://").unwrap_or(address)
}

/// Whether a shim accepts connections at `address` (containerd's `shim.CanConnect`).
pub fn listening(address: &str) -> bool {
    UnixStream::connect(socket_path(address)).is_ok()
}

/// Removes the socket file at `address` when no shim listens there any more (what a
/// shim killed with SIGKILL leaves). Returns whether it removed one. Never removes
/// anything that is not a socket.
pub fn remove_dead_socket(address: &str) -> bool {
    let path = Path::new(socket_path(address));
    let is_socket = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket());
    if !is_socket || listening(address) {
        return false;
    }
    std::fs::remove_file(path).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_pod_container_groups_by_its_sandbox_id() {
        let spec = json!({"annotations": {
            "io.kubernetes.cri.container-type": "container",
            "io.kubernetes.cri.sandbox-id": "sb1",
        }});
        assert_eq!(grouping_id(&spec, "app1"), "sb1");
        // The sandbox itself carries its own id as sandbox-id.
        let spec = json!({"annotations": {"io.kubernetes.cri.sandbox-id": "sb1"}});
        assert_eq!(grouping_id(&spec, "sb1"), "sb1");
    }

    #[test]
    fn the_group_label_comes_before_the_sandbox_id() {
        let spec = json!({"annotations": {
            "io.kubernetes.cri.sandbox-id": "sb1",
            "io.containerd.runc.v2.group": "g",
        }});
        assert_eq!(grouping_id(&spec, "app1"), "g");
    }

    #[test]
    fn a_container_outside_a_pod_is_its_own_group() {
        assert_eq!(grouping_id(&json!({}), "ctr1"), "ctr1");
        assert_eq!(
            grouping_id(&json!({"annotations": {"x": "y"}}), "ctr1"),
            "ctr1"
        );
        // A non-string value is not a group.
        let spec = json!({"annotations": {"io.kubernetes.cri.sandbox-id": 5}});
        assert_eq!(grouping_id(&spec, "ctr1"), "ctr1");
    }

    #[test]
    fn grouping_from_a_bundle_and_its_errors() {
        let d = tempfile::tempdir().unwrap();
        let e = grouping_of_bundle(d.path(), "c").unwrap_err();
        assert!(e.to_string().contains("config.json"), "{e}");
        std::fs::write(d.path().join("config.json"), "{").unwrap();
        assert!(matches!(
            grouping_of_bundle(d.path(), "c"),
            Err(ShimError::Bundle { .. })
        ));
        std::fs::write(
            d.path().join("config.json"),
            r#"{"annotations":{"io.kubernetes.cri.sandbox-id":"sb"}}"#,
        )
        .unwrap();
        assert_eq!(grouping_of_bundle(d.path(), "c").unwrap(), "sb");
    }

    #[test]
    fn the_address_is_containerds() {
        // printf %s /run/containerd/containerd.sock/k8s.io/sb1 | sha256sum
        assert_eq!(
            address("/run/containerd/containerd.sock", "k8s.io", "sb1"),
            "unix:///run/containerd/s/\
             c8b3756a389f9a824c34560159e9b9b56e7772ccd268a813a0c4f36ea276c49e"
        );
        // Containers of one group share it; another group or namespace differs.
        let a = address("/c.sock", "k8s.io", "sb1");
        assert_eq!(a, address("/c.sock", "k8s.io", "sb1"));
        assert_ne!(a, address("/c.sock", "k8s.io", "sb2"));
        assert_ne!(a, address("/c.sock", "default", "sb1"));
    }

    #[test]
    fn a_live_socket_is_kept_a_dead_one_removed() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("s");
        let addr = format!("unix://{}", path.display());
        assert!(!listening(&addr));
        assert!(!remove_dead_socket(&addr), "nothing there");
        let l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(listening(&addr));
        assert!(!remove_dead_socket(&addr), "a listening socket stays");
        drop(l);
        assert!(path.exists(), "the socket file outlives its listener");
        assert!(!listening(&addr));
        assert!(remove_dead_socket(&addr));
        assert!(!path.exists());
        // Not a socket: never removed.
        std::fs::write(&path, "x").unwrap();
        assert!(!remove_dead_socket(&addr));
        assert!(path.exists());
    }
}
