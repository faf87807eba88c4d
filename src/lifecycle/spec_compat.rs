//! runc's reading of the process and memory-policy fields that oci-spec 0.10 (the
//! crate libcontainer 0.7 parses with) reads differently. Works on the raw JSON of a
//! config.json or a `exec --process` file, before oci-spec sees it:
//!
//! - **Unknown capabilities** (a name oci-spec does not know, or one the running
//!   kernel lacks, above `/proc/sys/kernel/cap_last_cap`) are dropped from every set
//!   with runc's warning `ignoring unknown or unavailable capabilities: [CAP_A CAP_B]`
//!   (runc's libcontainer/capabilities); oci-spec refuses the whole file.
//! - **`process.scheduler.flags`**: runtime-spec 1.2 names the flag
//!   `SCHED_FLAG_RESET_ON_FORK`; oci-spec 0.10 only knows `SCHED_RESET_ON_FORK`, so
//!   the spec's name is translated (both are accepted).
//! - **`process.user`** may be left out of an `exec --process` file: runc runs it as
//!   uid 0, gid 0; oci-spec requires the field.
//! - **`linux.memoryPolicy`** is checked as runc 1.4 checks it (specconv and
//!   validate), with its texts: `invalid memory policy mode "X"`, `invalid memory
//!   policy flag "X"`, `invalid memory policy nodes "X": ...`, `memory policy mode
//!   requires 0 nodes but got N`, `memory policy mode requires at least one node but
//!   got 0`. A mode or flag of runtime-spec 1.2 the running kernel lacks
//!   ([`crate::sys::mempolicy::Support`], the probe `siloc features` lists from) is
//!   refused with the same texts, before anything is made: runc 1.4 would accept it
//!   and fail in its init with `set_mempolicy: invalid argument`.

use serde_json::Value;

/// The capability sets of runtime-spec `process.capabilities`.
const CAP_SETS: [&str; 5] = [
    "bounding",
    "effective",
    "inheritable",
    "permitted",
    "ambient",
];

/// A field runc refuses: (JSON path of the field, runc's message).
pub type FieldError = (String, String);

/// Applies runc's reading to a whole config.json document (see the module doc).
/// Returns the warnings to log (runc's texts). Errors: the memory-policy field at
/// fault and runc's message.
pub fn spec_json(spec: &mut Value) -> Result<Vec<String>, FieldError> {
    let mut warnings = Vec::new();
    if let Some(p) = spec.get_mut("process").filter(|p| p.is_object()) {
        warnings.extend(process_fields(p));
    }
    if let Some(mp) = spec.pointer("/linux/memoryPolicy") {
        check_memory_policy(mp, crate::sys::mempolicy::Support::running_kernel())?;
    }
    Ok(warnings)
}

/// Applies runc's reading to an `exec --process` document: a missing `user` becomes
/// `{"uid": 0, "gid": 0}`, then the capability and scheduler rules of [`spec_json`].
/// Returns the warnings to log.
pub fn process_json(process: &mut Value) -> Vec<String> {
    if let Some(obj) = process.as_object_mut()
        && obj.get("user").is_none_or(Value::is_null)
    {
        obj.insert("user".into(), serde_json::json!({"uid": 0, "gid": 0}));
    }
    process_fields(process)
}

fn process_fields(p: &mut Value) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Some(flags) = p
        .pointer_mut("/scheduler/flags")
        .and_then(Value::as_array_mut)
    {
        for f in flags.iter_mut() {
            if f == "SCHED_FLAG_RESET_ON_FORK" {
                *f = Value::from("SCHED_RESET_ON_FORK");
            }
        }
    }
    let mut dropped = drop_unknown_caps(p, &supported_caps());
    if !dropped.is_empty() {
        dropped.sort();
        dropped.dedup();
        warnings.push(unknown_caps_warning(&dropped));
    }
    warnings
}

/// runc's warning for capabilities it leaves out (names sorted, as Go prints a slice).
pub fn unknown_caps_warning(names: &[String]) -> String {
    format!(
        "ignoring unknown or unavailable capabilities: [{}]",
        names.join(" ")
    )
}

/// Whether `name` is a capability oci-spec knows and `supported` holds.
pub fn cap_is_usable(name: &str, supported: &Option<caps::CapsHashSet>) -> bool {
    let known = serde_json::from_value::<oci_spec::runtime::Capability>(Value::from(name)).is_ok();
    let in_kernel = match (supported, name.parse::<caps::Capability>()) {
        (Some(set), Ok(c)) => set.contains(&c),
        // without /proc/sys/kernel/cap_last_cap, trust the name
        (None, Ok(_)) => true,
        (_, Err(_)) => false,
    };
    known && in_kernel
}

/// The capabilities of the running kernel (None when procfs does not say).
pub fn supported_caps() -> Option<caps::CapsHashSet> {
    caps::runtime::procfs_all_supported(None).ok()
}

/// Removes the capabilities [`cap_is_usable`] refuses from every set of
/// `process.capabilities`; returns their names.
fn drop_unknown_caps(p: &mut Value, supported: &Option<caps::CapsHashSet>) -> Vec<String> {
    let mut dropped = Vec::new();
    let Some(caps) = p.get_mut("capabilities").and_then(Value::as_object_mut) else {
        return dropped;
    };
    for set in CAP_SETS {
        let Some(list) = caps.get_mut(set).and_then(Value::as_array_mut) else {
            continue;
        };
        list.retain(|c| match c.as_str() {
            Some(name) if !cap_is_usable(name, supported) => {
                dropped.push(name.to_string());
                false
            }
            // a non-string stays for oci-spec to name
            _ => true,
        });
    }
    dropped
}

/// runc 1.4's checks of `linux.memoryPolicy` (specconv, then validate), a mode or
/// flag `kernel` lacks taken as one runc does not know.
fn check_memory_policy(
    mp: &Value,
    kernel: &crate::sys::mempolicy::Support,
) -> Result<(), FieldError> {
    let err = |f: &str, m: String| Err((format!("linux.memoryPolicy.{f}"), m));
    let Some(mode) = mp.get("mode").and_then(Value::as_str) else {
        // a missing or non-string mode is oci-spec's to name
        return Ok(());
    };
    if !kernel.has_mode(mode) {
        return err("mode", format!("invalid memory policy mode {mode:?}"));
    }
    let nodes = mp.get("nodes").and_then(Value::as_str).unwrap_or("");
    let count = match node_count(nodes) {
        Ok(n) => n,
        Err(why) => {
            return err(
                "nodes",
                format!("invalid memory policy nodes {nodes:?}: {why}"),
            );
        }
    };
    for f in mp
        .get("flags")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = f.as_str().unwrap_or_default();
        if !kernel.has_flag(name) {
            return err("flags", format!("invalid memory policy flag {name:?}"));
        }
    }
    match mode {
        "MPOL_DEFAULT" | "MPOL_LOCAL" if count != 0 => err(
            "nodes",
            format!("memory policy mode requires 0 nodes but got {count}"),
        ),
        "MPOL_BIND" | "MPOL_INTERLEAVE" | "MPOL_PREFERRED_MANY" | "MPOL_WEIGHTED_INTERLEAVE"
            if count == 0 =>
        {
            err(
                "nodes",
                "memory policy mode requires at least one node but got 0".into(),
            )
        }
        _ => Ok(()),
    }
}

/// The number of distinct nodes in a cpuset-style list (`0-2,4`), as runc's
/// `ToCPUSet` counts them ([`crate::numa::cpulist::CpuList::parse_lenient`], ids
/// below the kernel's MAX_NUMNODES, 1024). Errors: runc's "invalid format: PART" or
/// "invalid range: PART".
fn node_count(list: &str) -> Result<usize, String> {
    crate::numa::cpulist::CpuList::parse_lenient(list, 1024)
        .map(|l| l.len())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_capabilities_are_dropped_with_runcs_warning() {
        let mut s = json!({"process": {"capabilities": {
            "bounding": ["CAP_KILL", "CAP_FOO"], "effective": ["CAP_FOO", "CAP_BAR"],
            "ambient": ["CAP_NET_RAW"]}}});
        let w = spec_json(&mut s).unwrap();
        assert_eq!(
            w,
            vec!["ignoring unknown or unavailable capabilities: [CAP_BAR CAP_FOO]"]
        );
        assert_eq!(
            s["process"]["capabilities"]["bounding"],
            json!(["CAP_KILL"])
        );
        assert_eq!(s["process"]["capabilities"]["effective"], json!([]));
        assert_eq!(
            s["process"]["capabilities"]["ambient"],
            json!(["CAP_NET_RAW"])
        );
    }

    #[test]
    fn a_capability_the_kernel_lacks_is_unusable() {
        let only_kill: caps::CapsHashSet = [caps::Capability::CAP_KILL].into_iter().collect();
        assert!(cap_is_usable("CAP_KILL", &Some(only_kill.clone())));
        assert!(!cap_is_usable("CAP_CHECKPOINT_RESTORE", &Some(only_kill)));
        assert!(cap_is_usable("CAP_CHECKPOINT_RESTORE", &None));
        assert!(!cap_is_usable("CAP_NOPE", &None));
    }

    #[test]
    fn the_specs_reset_on_fork_name_is_read() {
        let mut s = json!({"process": {"scheduler": {"policy": "SCHED_BATCH",
            "flags": ["SCHED_FLAG_RESET_ON_FORK", "SCHED_FLAG_RECLAIM"]}}});
        spec_json(&mut s).unwrap();
        assert_eq!(
            s["process"]["scheduler"]["flags"],
            json!(["SCHED_RESET_ON_FORK", "SCHED_FLAG_RECLAIM"])
        );
    }

    #[test]
    fn an_exec_process_without_user_runs_as_root() {
        let mut p = json!({"args": ["sh"], "cwd": "/"});
        assert!(process_json(&mut p).is_empty());
        assert_eq!(p["user"], json!({"uid": 0, "gid": 0}));
        let mut p = json!({"args": ["sh"], "cwd": "/", "user": {"uid": 5, "gid": 6}});
        process_json(&mut p);
        assert_eq!(p["user"], json!({"uid": 5, "gid": 6}));
    }

    #[test]
    fn memory_policy_errors_are_runcs() {
        let check = |mp: Value| {
            let mut s = json!({"linux": {"memoryPolicy": mp}});
            spec_json(&mut s).err().map(|(f, m)| format!("{f}: {m}"))
        };
        assert_eq!(check(json!({"mode": "MPOL_BIND", "nodes": "0-1"})), None);
        assert_eq!(check(json!({"mode": "MPOL_PREFERRED"})), None);
        assert_eq!(
            check(json!({"mode": "MPOL_FOO", "nodes": "0"})).unwrap(),
            "linux.memoryPolicy.mode: invalid memory policy mode \"MPOL_FOO\""
        );
        assert_eq!(
            check(json!({"mode": "MPOL_BIND", "nodes": "0", "flags": ["MPOL_F_FOO"]})).unwrap(),
            "linux.memoryPolicy.flags: invalid memory policy flag \"MPOL_F_FOO\""
        );
        assert_eq!(
            check(json!({"mode": "MPOL_BIND"})).unwrap(),
            "linux.memoryPolicy.nodes: memory policy mode requires at least one node but got 0"
        );
        assert_eq!(
            check(json!({"mode": "MPOL_LOCAL", "nodes": "0,1"})).unwrap(),
            "linux.memoryPolicy.nodes: memory policy mode requires 0 nodes but got 2"
        );
        assert!(
            check(json!({"mode": "MPOL_BIND", "nodes": "x"}))
                .unwrap()
                .contains("invalid memory policy nodes \"x\"")
        );
    }

    /// On Linux 6.1 (a fake of its set_mempolicy answers) MPOL_WEIGHTED_INTERLEAVE is
    /// refused as runc refuses a mode it does not know; without NUMA every mode is.
    #[test]
    fn a_mode_the_kernel_lacks_is_refused_by_name() {
        use crate::sys::mempolicy::{Answer, Support, linux_6_1};
        let check = |mp: Value, kernel: &Support| {
            check_memory_policy(&mp, kernel)
                .err()
                .map(|(f, m)| format!("{f}: {m}"))
        };
        let v6_1 = Support::from_answers(linux_6_1);
        let wi = json!({"mode": "MPOL_WEIGHTED_INTERLEAVE", "nodes": "0"});
        assert_eq!(
            check(wi.clone(), &v6_1).unwrap(),
            "linux.memoryPolicy.mode: invalid memory policy mode \"MPOL_WEIGHTED_INTERLEAVE\""
        );
        assert_eq!(
            check(json!({"mode": "MPOL_PREFERRED_MANY", "nodes": "0"}), &v6_1),
            None
        );
        let all = Support::from_answers(|_| Answer::Known);
        assert_eq!(check(wi, &all), None);
        // a kernel before 5.12: no NUMA balancing flag
        let v5_10 = Support::from_answers(|m| {
            if m & crate::sys::mempolicy::MPOL_F_NUMA_BALANCING != 0 || m & 0xff >= 5 {
                Answer::Unknown
            } else {
                Answer::Known
            }
        });
        assert_eq!(
            check(
                json!({"mode": "MPOL_BIND", "nodes": "0", "flags": ["MPOL_F_NUMA_BALANCING"]}),
                &v5_10
            )
            .unwrap(),
            "linux.memoryPolicy.flags: invalid memory policy flag \"MPOL_F_NUMA_BALANCING\""
        );
        let no_numa = Support::from_answers(|_| Answer::NoNuma);
        assert!(
            check(json!({"mode": "MPOL_DEFAULT"}), &no_numa)
                .unwrap()
                .ends_with("invalid memory policy mode \"MPOL_DEFAULT\"")
        );
    }
}
