//! `process.rlimits` checked against what the runtime can set, before anything starts.
//!
//! libcontainer 0.7 sets the rlimits in its intermediate process (setrlimit(2), after
//! the fork) and a refusal comes back as "intermediate process error EPERM", with the
//! container half made. runc sets them on the ready init from the runtime
//! (prlimit(2)) and names the limit: "error setting rlimits for ready process: error
//! setting rlimit type 7: operation not permitted" (runc's process_linux.go and
//! setupRlimits in init_linux.go; the type is the kernel's RLIMIT_* number). podman
//! without `--ulimit` asks for RLIMIT_NOFILE 1048576, which a runtime without
//! CAP_SYS_RESOURCE cannot grant.
//!
//! [`check`] applies the kernel's rules (kernel/sys.c, do_prlimit) to each limit
//! before create or exec does anything: a soft limit above the hard one is EINVAL;
//! raising a hard limit above the runtime's own needs CAP_SYS_RESOURCE in the initial
//! user namespace (`capable()`: a container's user namespace does not help); and
//! RLIMIT_NOFILE above `fs.nr_open` is EPERM for everyone.
//!
//! With a user namespace (new or joined by path) libcontainer's intermediate process
//! calls setrlimit(2) only after it has entered it (`container_intermediate_process`:
//! `setup_userns`, then `set_rlimit`; `siloc exec` joins the container's user
//! namespace itself before libcontainer forks), where it never holds CAP_SYS_RESOURCE
//! in the initial user namespace: raising a hard limit failed with EPERM even for a
//! runtime that has it, while runc, which sets the limits from outside, succeeds. So
//! siloc raises its own hard limits to the spec's first ([`RaisedHard`], in the
//! initial user namespace, with the runtime's CAP_SYS_RESOURCE); libcontainer's
//! processes inherit them, and their setrlimit only lowers or keeps a hard limit,
//! which needs no capability. Then a create or exec succeeds exactly when [`check`]
//! passes, with a user namespace or without (tests/it/process_setup.rs on this host,
//! which has no CAP_SYS_RESOURCE; integration/vm/t/10-rlimit-userns.sh where root has
//! it).

use oci_spec::runtime::{PosixRlimit, PosixRlimitType};

/// Where the kernel's RLIMIT_NOFILE ceiling is (proc(5) `/proc/sys/fs/nr_open`).
const NR_OPEN: &str = "/proc/sys/fs/nr_open";

/// A limit the runtime cannot set, in runc's words.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
/// (`create` puts runc's "unable to start container process: error during container
/// init: " before it, `exec` "unable to start container process: ".)
#[error("error setting rlimits for ready process: error setting rlimit type {typ}: {reason}")]
pub struct RlimitError {
    /// The kernel's RLIMIT_* number (runc prints it, not the name).
    pub typ: u32,
    /// The errno's text as Go prints it (`operation not permitted`, `invalid argument`).
    pub reason: &'static str,
}

/// The kernel's RLIMIT_* number of `t` (asm-generic/resource.h).
pub fn number(t: PosixRlimitType) -> u32 {
    match t {
        PosixRlimitType::RlimitCpu => libc::RLIMIT_CPU,
        PosixRlimitType::RlimitFsize => libc::RLIMIT_FSIZE,
        PosixRlimitType::RlimitData => libc::RLIMIT_DATA,
        PosixRlimitType::RlimitStack => libc::RLIMIT_STACK,
        PosixRlimitType::RlimitCore => libc::RLIMIT_CORE,
        PosixRlimitType::RlimitRss => libc::RLIMIT_RSS,
        PosixRlimitType::RlimitNproc => libc::RLIMIT_NPROC,
        PosixRlimitType::RlimitNofile => libc::RLIMIT_NOFILE,
        PosixRlimitType::RlimitMemlock => libc::RLIMIT_MEMLOCK,
        PosixRlimitType::RlimitAs => libc::RLIMIT_AS,
        PosixRlimitType::RlimitLocks => libc::RLIMIT_LOCKS,
        PosixRlimitType::RlimitSigpending => libc::RLIMIT_SIGPENDING,
        PosixRlimitType::RlimitMsgqueue => libc::RLIMIT_MSGQUEUE,
        PosixRlimitType::RlimitNice => libc::RLIMIT_NICE,
        PosixRlimitType::RlimitRtprio => libc::RLIMIT_RTPRIO,
        PosixRlimitType::RlimitRttime => libc::RLIMIT_RTTIME,
    }
}

/// What the runtime process can grant: its own hard limit of a resource, whether it
/// has CAP_SYS_RESOURCE, and `fs.nr_open`.
pub struct Host {
    pub hard: fn(u32) -> Option<u64>,
    pub sys_resource: bool,
    pub nr_open: Option<u64>,
}

impl Host {
    /// This process's view.
    pub fn current() -> Host {
        Host {
            hard: own_hard,
            sys_resource: caps::has_cap(
                None,
                caps::CapSet::Effective,
                caps::Capability::CAP_SYS_RESOURCE,
            )
            .unwrap_or(false),
            nr_open: std::fs::read_to_string(NR_OPEN)
                .ok()
                .and_then(|s| s.trim().parse().ok()),
        }
    }
}

fn own_hard(resource: u32) -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one struct rlimit we own.
    (unsafe { libc::getrlimit(resource, &mut r) } == 0).then_some(r.rlim_max)
}

/// The first of `rlimits` (in order, as runc sets them) the runtime cannot set.
///
/// Errors: [`RlimitError`] naming its type number and the errno runc would report.
pub fn check_with(rlimits: &[PosixRlimit], host: &Host) -> Result<(), RlimitError> {
    for r in rlimits {
        let typ = number(r.typ());
        if r.soft() > r.hard() {
            return Err(RlimitError {
                typ,
                reason: "invalid argument",
            });
        }
        let above_nr_open =
            typ == libc::RLIMIT_NOFILE && host.nr_open.is_some_and(|max| r.hard() > max);
        let raises = (host.hard)(typ).is_some_and(|own| r.hard() > own);
        if above_nr_open || (raises && !host.sys_resource) {
            return Err(RlimitError {
                typ,
                reason: "operation not permitted",
            });
        }
    }
    Ok(())
}

/// [`check_with`] for the process of `spec` (create) or an `exec --process` file's
/// process, on this host.
pub fn check(process: Option<&oci_spec::runtime::Process>) -> Result<(), RlimitError> {
    match process.and_then(|p| p.rlimits().as_ref()) {
        Some(r) if !r.is_empty() => check_with(r, &Host::current()),
        _ => Ok(()),
    }
}

/// The runtime process's own hard limits raised to those of a spec's rlimits that are
/// higher (soft limits kept), so that processes forked from it, which set the spec's
/// limits from inside the container's user namespace, need not raise them (see the
/// module doc). Dropping it restores the limits it changed (lowering a hard limit
/// needs no capability). A raise the kernel refuses (no CAP_SYS_RESOURCE, RLIMIT_NOFILE
/// above `fs.nr_open`) is skipped: [`check`] has refused those already.
#[derive(Debug, Default)]
pub struct RaisedHard {
    saved: Vec<(u32, libc::rlimit)>,
}

impl RaisedHard {
    /// Raises this process's hard limits where `rlimits` ask for more.
    pub fn raise(rlimits: &[PosixRlimit]) -> RaisedHard {
        let mut saved: Vec<(u32, libc::rlimit)> = Vec::new();
        for r in rlimits {
            let typ = number(r.typ());
            let mut own = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes one struct rlimit we own.
            if unsafe { libc::getrlimit(typ, &mut own) } != 0 || r.hard() <= own.rlim_max {
                continue;
            }
            let raised = libc::rlimit {
                rlim_cur: own.rlim_cur,
                rlim_max: r.hard(),
            };
            // SAFETY: setrlimit reads one struct rlimit we own.
            if unsafe { libc::setrlimit(typ, &raised) } == 0 {
                if !saved.iter().any(|(t, _)| *t == typ) {
                    saved.push((typ, own));
                }
            } else {
                tracing::debug!(
                    target: "siloc",
                    "raise own hard limit of rlimit type {typ} to {}: {}",
                    r.hard(),
                    std::io::Error::last_os_error()
                );
            }
        }
        RaisedHard { saved }
    }
}

impl Drop for RaisedHard {
    fn drop(&mut self) {
        for (typ, own) in self.saved.drain(..).rev() {
            // SAFETY: setrlimit reads one struct rlimit we own.
            if unsafe { libc::setrlimit(typ, &own) } != 0 {
                tracing::warn!(
                    target: "siloc",
                    "restore own rlimit type {typ}: {}",
                    std::io::Error::last_os_error()
                );
            }
        }
    }
}

/// The `rlimits` of `exec --process` file `path`; `None` when it has none or cannot be
/// read (libcontainer reports that file itself).
pub fn process_file_rlimits(path: &std::path::Path) -> Option<Vec<PosixRlimit>> {
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    serde_json::from_value(v.get("rlimits")?.clone()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(typ: PosixRlimitType, soft: u64, hard: u64) -> PosixRlimit {
        oci_spec::runtime::PosixRlimitBuilder::default()
            .typ(typ)
            .soft(soft)
            .hard(hard)
            .build()
            .unwrap()
    }

    fn host(sys_resource: bool) -> Host {
        Host {
            hard: |_| Some(20000),
            sys_resource,
            nr_open: Some(1048576),
        }
    }

    #[test]
    fn raising_the_hard_limit_needs_cap_sys_resource() {
        let nofile = [limit(PosixRlimitType::RlimitNofile, 1048576, 1048576)];
        let e = check_with(&nofile, &host(false)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "error setting rlimits for ready process: error setting rlimit type 7: operation \
             not permitted"
        );
        assert_eq!(check_with(&nofile, &host(true)), Ok(()));
        // at or below the runtime's own hard limit: anyone may
        let low = [
            limit(PosixRlimitType::RlimitNofile, 1024, 20000),
            limit(PosixRlimitType::RlimitCore, 0, 0),
        ];
        assert_eq!(check_with(&low, &host(false)), Ok(()));
    }

    #[test]
    fn own_hard_limits_are_raised_only_where_asked_and_restored() {
        let own = own_hard(libc::RLIMIT_CORE).unwrap();
        // Lower or equal: nothing to raise, nothing changed or restored.
        let same = [limit(PosixRlimitType::RlimitCore, 0, own)];
        let r = RaisedHard::raise(&same);
        assert!(r.saved.is_empty());
        drop(r);
        assert_eq!(own_hard(libc::RLIMIT_CORE), Some(own));
        if own != libc::RLIM_INFINITY {
            // Above: raised with CAP_SYS_RESOURCE, else left; the original comes back.
            let more = [limit(PosixRlimitType::RlimitCore, 0, own + 1)];
            let r = RaisedHard::raise(&more);
            let cap = Host::current().sys_resource;
            assert_eq!(
                own_hard(libc::RLIMIT_CORE),
                Some(if cap { own + 1 } else { own })
            );
            drop(r);
            assert_eq!(own_hard(libc::RLIMIT_CORE), Some(own));
        }
    }

    #[test]
    fn the_kernels_other_refusals() {
        let backwards = [limit(PosixRlimitType::RlimitCore, 10, 5)];
        assert_eq!(
            check_with(&backwards, &host(true)),
            Err(RlimitError {
                typ: 4,
                reason: "invalid argument"
            })
        );
        let past_nr_open = [limit(PosixRlimitType::RlimitNofile, 1, 1048577)];
        assert_eq!(check_with(&past_nr_open, &host(true)).unwrap_err().typ, 7);
        // the first failing limit is named, in spec order
        let two = [
            limit(PosixRlimitType::RlimitNproc, 1, 30000),
            limit(PosixRlimitType::RlimitNofile, 1, 30000),
        ];
        assert_eq!(check_with(&two, &host(false)).unwrap_err().typ, 6);
        assert_eq!(number(PosixRlimitType::RlimitRttime), 15);
    }
}
