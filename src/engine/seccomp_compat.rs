//! runc's seccomp behaviour on top of libcontainer 0.7, which loads the spec's filter
//! itself (libcontainer `seccomp::initialize_seccomp`): siloc adjusts the spec it gets.
//!
//! - `process.noNewPrivileges: false`: libcontainer tests the field for presence, not
//!   value, so an explicit `false` made it load the filter after the capabilities are
//!   dropped, without no_new_privs and without CAP_SYS_ADMIN: `seccomp(2)` refuses
//!   with EACCES ("failed to load seccomp context"). runc loads it before dropping the
//!   capabilities when no_new_privs is off (standard_init_linux.go); `false` is made
//!   absent, which means the same to the spec and gives libcontainer that order.
//! - `-ENOSYS` for syscalls newer than the profile: runc prepends a stub to the filter
//!   that answers ENOSYS for every syscall numbered above the profile's highest, per
//!   architecture, unless the default action allows (ALLOW, LOG, TRACE) or is already
//!   ENOSYS (runc libcontainer/seccomp/patchbpf). A program probing a new syscall
//!   (glibc's clone3, close_range) then falls back instead of failing with EPERM.
//!   siloc adds an `SCMP_ACT_ERRNO` ENOSYS rule for each syscall the linked libseccomp
//!   knows above that number. Not covered: numbers libseccomp does not know (the
//!   kernel's newest, beyond libseccomp 2.5.4's table: 451 and up on x86_64), which
//!   keep the default action.
//! - `SECCOMP_FILTER_FLAG_TSYNC` is accepted and ignored, as runc does (the init is
//!   single-threaded, and with SCMP_ACT_NOTIFY the kernel refuses TSYNC beside
//!   NEW_LISTENER); `SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV` needs libseccomp 2.6 (API
//!   level 7): refused by name on an older one instead of libcontainer's "failed to set
//!   filter flag".
//! - `SCMP_ACT_NOTIFY` with no agent at `listenerPath`: runc's "failed to connect with
//!   seccomp agent specified in the seccomp profile" ([`listener_error`]) instead of
//!   libcontainer's "failed seccomp listener".

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use libseccomp::{ScmpArch, ScmpSyscall};
use oci_spec::runtime::{
    LinuxSeccomp, LinuxSeccompAction, LinuxSeccompFilterFlag, LinuxSyscallBuilder, Spec,
};

/// ENOSYS, the errno runc's stub returns (asm-generic/errno.h).
pub const ENOSYS: u32 = libc::ENOSYS as u32;

/// How far above the profile's highest syscall number names are looked up: past the
/// x86_64 gap (335..424) and any table libseccomp ships.
const LOOKAHEAD: i32 = 1024;

/// The filter flags runc knows (`runc features` "knownFlags"; runc's seccomp/config.go).
pub const KNOWN_FLAGS: &[&str] = &[
    "SECCOMP_FILTER_FLAG_TSYNC",
    "SECCOMP_FILTER_FLAG_SPEC_ALLOW",
    "SECCOMP_FILTER_FLAG_LOG",
    "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV",
];

/// Errors of the seccomp adjustments; each names the spec field.
#[derive(Debug, thiserror::Error)]
pub enum SeccompCompatError {
    #[error(
        "linux.seccomp.flags: SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV needs libseccomp 2.6 \
         (API level 7); this siloc runs with libseccomp {version} (API level {api})"
    )]
    WaitKillableUnsupported { version: String, api: u32 },
    #[error("linux.seccomp.architectures: {arch}: {msg}")]
    Arch { arch: String, msg: String },
    #[error("linux.seccomp: {0}")]
    Build(String),
    #[error("--process {path}: {msg}")]
    ProcessFile { path: PathBuf, msg: String },
}

/// Whether libseccomp on this host can set SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
/// (libseccomp's API level 7, libseccomp 2.6 with Linux 5.19+).
pub fn wait_killable_supported() -> bool {
    libseccomp::get_api() >= 7
}

/// The flags of [`KNOWN_FLAGS`] this build and kernel take (`features` "supportedFlags"):
/// [`flags_at_api`] of the linked libseccomp's API level, which it finds by asking the
/// kernel.
pub fn supported_flags() -> Vec<&'static str> {
    flags_at_api(libseccomp::get_api())
}

/// The flags of [`KNOWN_FLAGS`] libcontainer can set through libseccomp at API level
/// `api` (seccomp_api_get(3): 3 brings `SECCOMP_FILTER_FLAG_LOG`, Linux 4.14; 4
/// `SPEC_ALLOW`, Linux 4.17; 7 `WAIT_KILLABLE_RECV`, libseccomp 2.6 and Linux 5.19;
/// below those, libseccomp refuses the attribute and the create fails). TSYNC is
/// taken at any level: siloc drops it, as runc ignores it.
pub fn flags_at_api(api: u32) -> Vec<&'static str> {
    KNOWN_FLAGS
        .iter()
        .copied()
        .filter(|f| match *f {
            "SECCOMP_FILTER_FLAG_LOG" => api >= 3,
            "SECCOMP_FILTER_FLAG_SPEC_ALLOW" => api >= 4,
            "SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV" => api >= 7,
            _ => true,
        })
        .collect()
}

/// The architecture names of libseccomp-rs (`ScmpArch`'s `SCMP_ARCH_*` names), the
/// candidates [`loadable_archs`] asks about.
const ARCH_NAMES: [&str; 23] = [
    "SCMP_ARCH_AARCH64",
    "SCMP_ARCH_ARM",
    "SCMP_ARCH_LOONGARCH64",
    "SCMP_ARCH_M68K",
    "SCMP_ARCH_MIPS",
    "SCMP_ARCH_MIPS64",
    "SCMP_ARCH_MIPS64N32",
    "SCMP_ARCH_MIPSEL",
    "SCMP_ARCH_MIPSEL64",
    "SCMP_ARCH_MIPSEL64N32",
    "SCMP_ARCH_PARISC",
    "SCMP_ARCH_PARISC64",
    "SCMP_ARCH_PPC",
    "SCMP_ARCH_PPC64",
    "SCMP_ARCH_PPC64LE",
    "SCMP_ARCH_RISCV64",
    "SCMP_ARCH_S390",
    "SCMP_ARCH_S390X",
    "SCMP_ARCH_SH",
    "SCMP_ARCH_SHEB",
    "SCMP_ARCH_X32",
    "SCMP_ARCH_X86",
    "SCMP_ARCH_X86_64",
];

/// The `linux.seccomp.architectures` a filter of this siloc can hold (`features`
/// "archs"), sorted: the names runtime-spec (oci-spec's `Arch`) and libseccomp-rs
/// both know that the linked libseccomp adds to a filter for the native architecture.
/// seccomp_arch_add(3) refuses an architecture the library does not know (2.5.4:
/// LoongArch, m68k) and, EDOM, one of the other byte order (the big-endian MIPS, PPC,
/// s390, PA-RISC and SuperH ones on x86_64); libcontainer fails the create on either.
pub fn loadable_archs() -> Vec<&'static str> {
    archs_where(|arch| {
        libseccomp::ScmpFilterContext::new(libseccomp::ScmpAction::Allow)
            .is_ok_and(|mut ctx| ctx.add_arch(arch).is_ok())
    })
}

/// The names of [`ARCH_NAMES`] oci-spec reads whose libseccomp architecture
/// `can_add` takes (a fake library in tests).
pub fn archs_where(can_add: impl Fn(ScmpArch) -> bool) -> Vec<&'static str> {
    ARCH_NAMES
        .iter()
        .copied()
        .filter(|n| {
            serde_json::from_value::<oci_spec::runtime::Arch>(serde_json::Value::from(*n)).is_ok()
        })
        .filter(|n| ScmpArch::from_str(n).is_ok_and(&can_add))
        .collect()
}

/// Adjusts `spec` for libcontainer as the module doc says: `noNewPrivileges: false`
/// made absent, TSYNC dropped, WAIT_KILLABLE_RECV checked, ENOSYS rules added.
///
/// Errors: [`SeccompCompatError`] naming the field.
pub fn fix_spec(spec: &mut Spec) -> Result<(), SeccompCompatError> {
    if let Some(p) = spec.process_mut()
        && p.no_new_privileges() == Some(false)
    {
        p.set_no_new_privileges(None);
    }
    let Some(linux) = spec.linux_mut() else {
        return Ok(());
    };
    let Some(mut seccomp) = linux.seccomp().clone() else {
        return Ok(());
    };
    fix_flags(&mut seccomp)?;
    add_enosys_rules(&mut seccomp)?;
    linux.set_seccomp(Some(seccomp));
    Ok(())
}

/// TSYNC out, WAIT_KILLABLE_RECV checked against libseccomp.
fn fix_flags(seccomp: &mut LinuxSeccomp) -> Result<(), SeccompCompatError> {
    let Some(flags) = seccomp.flags().clone() else {
        return Ok(());
    };
    if flags.contains(&LinuxSeccompFilterFlag::SeccompFilterFlagWaitKillableRecv)
        && !wait_killable_supported()
    {
        let version = libseccomp::ScmpVersion::current()
            .map(|v| format!("{}.{}.{}", v.major, v.minor, v.micro))
            .unwrap_or_else(|_| "?".into());
        return Err(SeccompCompatError::WaitKillableUnsupported {
            version,
            api: libseccomp::get_api(),
        });
    }
    let kept: Vec<_> = flags
        .into_iter()
        .filter(|f| *f != LinuxSeccompFilterFlag::SeccompFilterFlagTsync)
        .collect();
    seccomp.set_flags(if kept.is_empty() { None } else { Some(kept) });
    Ok(())
}

/// Whether runc's stub is needed for `seccomp`: its default action denies, and not
/// already with ENOSYS (runc's generatePatch).
fn wants_enosys(seccomp: &LinuxSeccomp) -> bool {
    let allows = matches!(
        seccomp.default_action(),
        LinuxSeccompAction::ScmpActAllow
            | LinuxSeccompAction::ScmpActLog
            | LinuxSeccompAction::ScmpActTrace
    );
    let errno = matches!(seccomp.default_action(), LinuxSeccompAction::ScmpActErrno)
        && seccomp.default_errno_ret() == Some(ENOSYS);
    !allows && !errno
}

/// The profile's architectures as libseccomp's, the native one when none are given.
fn arches(seccomp: &LinuxSeccomp) -> Result<Vec<ScmpArch>, SeccompCompatError> {
    let mut out = Vec::new();
    for a in seccomp.architectures().iter().flatten() {
        let name = serde_json::to_value(a)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        let arch = ScmpArch::from_str(&name).map_err(|e| SeccompCompatError::Arch {
            arch: name.clone(),
            msg: e.to_string(),
        })?;
        out.push(if arch == ScmpArch::Native {
            ScmpArch::native()
        } else {
            arch
        });
    }
    if out.is_empty() {
        out.push(ScmpArch::native());
    }
    out.dedup();
    Ok(out)
}

/// The syscalls libseccomp knows that are newer than the profile: on every profile
/// architecture where they resolve, numbered above the highest syscall the profile
/// names there. Sorted, without duplicates.
pub fn newer_than_profile(seccomp: &LinuxSeccomp) -> Result<Vec<String>, SeccompCompatError> {
    let named: BTreeSet<&str> = seccomp
        .syscalls()
        .iter()
        .flatten()
        .flat_map(|s| s.names().iter().map(String::as_str))
        .collect();
    let nr = |name: &str, arch: ScmpArch| {
        ScmpSyscall::from_name_by_arch(name, arch)
            .ok()
            .map(|s| s.as_raw_syscall())
            .filter(|n| *n >= 0)
    };
    let mut maxes = Vec::new();
    for arch in arches(seccomp)? {
        // runc: "could not find any syscalls for arch": no stub for it.
        if let Some(max) = named.iter().filter_map(|n| nr(n, arch)).max() {
            maxes.push((arch, max));
        }
    }
    let mut newer = BTreeSet::new();
    for (arch, max) in &maxes {
        for n in max.saturating_add(1)..max.saturating_add(LOOKAHEAD) {
            if let Ok(name) = ScmpSyscall::from(n).get_name_by_arch(*arch) {
                newer.insert(name);
            }
        }
    }
    // A name older than the profile on any of its arches stays out.
    newer.retain(|name| {
        !named.contains(name.as_str())
            && maxes
                .iter()
                .all(|(arch, max)| nr(name, *arch).is_none_or(|x| x > *max))
    });
    Ok(newer.into_iter().collect())
}

/// Appends one `SCMP_ACT_ERRNO` ENOSYS rule for [`newer_than_profile`] when the
/// profile wants runc's stub ([`wants_enosys`]).
fn add_enosys_rules(seccomp: &mut LinuxSeccomp) -> Result<(), SeccompCompatError> {
    if !wants_enosys(seccomp) {
        return Ok(());
    }
    let names = newer_than_profile(seccomp)?;
    if names.is_empty() {
        return Ok(());
    }
    tracing::debug!(
        count = names.len(),
        "seccomp: ENOSYS for syscalls newer than the profile"
    );
    let rule = LinuxSyscallBuilder::default()
        .names(names)
        .action(LinuxSeccompAction::ScmpActErrno)
        .errno_ret(ENOSYS)
        .build()
        .map_err(|e| SeccompCompatError::Build(e.to_string()))?;
    let mut rules = seccomp.syscalls().clone().unwrap_or_default();
    rules.push(rule);
    seccomp.set_syscalls(Some(rules));
    Ok(())
}

/// A copy of `exec --process` file `path` without `"noNewPrivileges": false` (see the
/// module doc), in `dir`, when the file has it; `None` when it can be used as it is.
/// The caller removes the copy.
///
/// Errors: the file cannot be read or parsed, or the copy cannot be written.
pub fn exec_process_copy(path: &Path, dir: &Path) -> Result<Option<PathBuf>, SeccompCompatError> {
    let err = |msg: String| SeccompCompatError::ProcessFile {
        path: path.to_path_buf(),
        msg,
    };
    let text = std::fs::read(path).map_err(|e| err(e.to_string()))?;
    let mut v: serde_json::Value = serde_json::from_slice(&text).map_err(|e| err(e.to_string()))?;
    let Some(obj) = v.as_object_mut() else {
        return Ok(None);
    };
    if obj.get("noNewPrivileges") != Some(&serde_json::Value::Bool(false)) {
        return Ok(None);
    }
    obj.remove("noNewPrivileges");
    let copy = dir.join(format!("siloc-exec-nnp-{}.json", std::process::id()));
    let body = serde_json::to_vec(&v).map_err(|e| err(e.to_string()))?;
    crate::sys::fs::write_atomic(&copy, &body).map_err(|e| err(e.to_string()))?;
    Ok(Some(copy))
}

/// libcontainer's text for a notify fd it could not hand over.
const LISTENER_FAILED: &str = "failed seccomp listener";

/// runc's message for `msg` (libcontainer's create or exec error) when it is the
/// failure to reach the seccomp agent at `spec`'s `listenerPath`: "failed to connect
/// with seccomp agent specified in the seccomp profile: dial unix PATH: connect:
/// REASON" (runc's process_linux.go), the reason found by connecting again. `None`
/// for any other error, or when an agent now answers there (the failure was elsewhere).
pub fn listener_error(spec: &Spec, msg: &str) -> Option<String> {
    let at = msg.find(LISTENER_FAILED)?;
    let path = spec
        .linux()
        .as_ref()?
        .seccomp()
        .as_ref()?
        .listener_path()
        .clone()?;
    let e = std::os::unix::net::UnixStream::connect(&path).err()?;
    Some(format!(
        "{}unable to start container process: {}",
        &msg[..at],
        agent_error(&path, &e)
    ))
}

/// runc's words for a failed connect(2) to the seccomp agent at `path`: "failed to
/// connect with seccomp agent specified in the seccomp profile: dial unix PATH:
/// connect: REASON" (runc's sendContainerProcessState, Go's net.Dial error), REASON
/// the errno's text in lowercase.
pub fn agent_error(path: &Path, e: &std::io::Error) -> String {
    let reason = crate::sys::errno::go_io_text(e);
    format!(
        "failed to connect with seccomp agent specified in the seccomp profile: dial unix {}: connect: {reason}",
        path.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> Spec {
        serde_json::from_value(json!({"ociVersion": "1.0.2", "process": {"cwd": "/",
            "user": {"uid": 0, "gid": 0}, "args": ["true"], "noNewPrivileges": false},
            "root": {"path": "rootfs"}, "linux": {"seccomp": v}}))
        .unwrap()
    }

    fn rules(s: &Spec) -> Vec<serde_json::Value> {
        let v = serde_json::to_value(s.linux().as_ref().unwrap().seccomp()).unwrap();
        v["syscalls"].as_array().cloned().unwrap_or_default()
    }

    #[test]
    fn nnp_false_becomes_absent_and_true_stays() {
        let mut s = spec(json!({"defaultAction": "SCMP_ACT_ALLOW"}));
        fix_spec(&mut s).unwrap();
        assert_eq!(s.process().as_ref().unwrap().no_new_privileges(), None);
        s.process_mut()
            .as_mut()
            .unwrap()
            .set_no_new_privileges(Some(true));
        fix_spec(&mut s).unwrap();
        assert_eq!(
            s.process().as_ref().unwrap().no_new_privileges(),
            Some(true)
        );
    }

    #[test]
    fn enosys_rule_for_syscalls_above_the_profile() {
        // x86_64: openat2 is 437, close_range 436, faccessat2 439, epoll_pwait2 441.
        let mut s = spec(json!({"defaultAction": "SCMP_ACT_ERRNO",
            "architectures": ["SCMP_ARCH_X86_64"],
            "syscalls": [{"names": ["read", "close_range"], "action": "SCMP_ACT_ALLOW"}]}));
        fix_spec(&mut s).unwrap();
        let r = rules(&s);
        assert_eq!(r.len(), 2);
        assert_eq!(r[1]["action"], "SCMP_ACT_ERRNO");
        assert_eq!(r[1]["errnoRet"], ENOSYS);
        let names: Vec<&str> = r[1]["names"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        assert!(
            names.contains(&"openat2") && names.contains(&"faccessat2"),
            "{names:?}"
        );
        for old in ["read", "close_range", "clone3", "pidfd_open", "write"] {
            assert!(!names.contains(&old), "{old} is older than the profile");
        }
    }

    #[test]
    fn no_enosys_rule_when_the_default_allows_or_is_enosys() {
        for (action, errno) in [
            ("SCMP_ACT_ALLOW", None),
            ("SCMP_ACT_LOG", None),
            ("SCMP_ACT_ERRNO", Some(ENOSYS)),
        ] {
            let mut s = spec(json!({"defaultAction": action, "defaultErrnoRet": errno,
                "syscalls": [{"names": ["read"], "action": "SCMP_ACT_KILL"}]}));
            fix_spec(&mut s).unwrap();
            assert_eq!(rules(&s).len(), 1, "{action}");
        }
    }

    #[test]
    fn tsync_is_dropped_and_other_flags_kept() {
        let mut s = spec(json!({"defaultAction": "SCMP_ACT_ALLOW",
            "flags": ["SECCOMP_FILTER_FLAG_TSYNC", "SECCOMP_FILTER_FLAG_LOG"]}));
        fix_spec(&mut s).unwrap();
        let v = serde_json::to_value(s.linux().as_ref().unwrap().seccomp()).unwrap();
        assert_eq!(v["flags"], json!(["SECCOMP_FILTER_FLAG_LOG"]));
    }

    #[test]
    fn wait_killable_is_refused_by_name_on_an_old_libseccomp() {
        let mut s = spec(json!({"defaultAction": "SCMP_ACT_ALLOW",
            "flags": ["SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV"]}));
        let r = fix_spec(&mut s);
        assert_eq!(r.is_err(), !wait_killable_supported());
        if let Err(e) = r {
            assert!(e.to_string().contains("WAIT_KILLABLE_RECV"), "{e}");
        }
    }

    #[test]
    fn listener_error_in_runcs_words() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agent.sock");
        let s = spec(json!({"defaultAction": "SCMP_ACT_ALLOW",
            "listenerPath": path.display().to_string(),
            "syscalls": [{"names": ["mkdir"], "action": "SCMP_ACT_NOTIFY"}]}));
        let m = listener_error(&s, "failed to create container: failed seccomp listener").unwrap();
        assert_eq!(
            m,
            format!(
                "failed to create container: unable to start container process: failed to \
                 connect with seccomp agent specified in the seccomp profile: dial unix {}: \
                 connect: no such file or directory",
                path.display()
            )
        );
        assert_eq!(
            listener_error(&s, "failed to create container: other"),
            None
        );
    }
}
