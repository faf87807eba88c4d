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
    let wants = a[ann::USERNS] == "auto";
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
    linux["uidMappings"] = json!([{"containerID": 0, "hostID": uid, "size": size}]);
    linux["gidMappings"] = json!([{"containerID": 0, "hostID": gid, "size": size}]);
    if let Some(a) = spec["annotations"].as_object_mut() {
        a.remove(ann::USERNS);
        a.remove(ann::USERNS_SIZE);
    }
    log::info!(
        "joins the user namespace of sandbox {sandbox} (pid {pid}, uid {uid} gid {gid} size {size})"
    );
    Ok(Some(sandbox))
}

#[cfg(test)]
mod tests {
    use super::*;

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
