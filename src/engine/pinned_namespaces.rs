//! Namespace `path`s that libcontainer 0.7 opens from inside the container's user
//! namespace, opened by siloc first (as the runtime's root) and handed over as
//! `/proc/self/fd/N`.
//!
//! libcontainer joins a `pid` (and `time`) namespace given by path in its intermediate
//! process, and `ipc`, `uts`, `network`, `cgroup`, `mount` ones in the init, both after
//! they have entered the user namespace and become its root. Opening
//! `/proc/PID/ns/TYPE` then takes a ptrace read check of PID (proc(5), "/proc/pid/ns/";
//! ptrace(2) "Ptrace access mode checking") as that unprivileged user: it fails with
//! EACCES while PID is not dumpable under the user namespace, which is the case for a
//! pod sandbox's init between its `create` and the moment its `execve` has completed
//! (its memory map still belongs to the host's user namespace). containerd's
//! `RunPodSandbox` returns once `start` has released the init, before that exec must
//! have run, so a pod's app containers failed at random under load with `intermediate
//! process error EACCES: Permission denied` (4 of 50 parallel pods here). Opening the
//! path in siloc's process, where the check passes, and letting libcontainer reopen the
//! fd through `/proc/self/fd` (always allowed for the process's own fds, proc(5)) joins
//! the same namespace, and also pins it: the path's pid cannot be reused meanwhile.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;

use oci_spec::runtime::{LinuxNamespaceType, Spec};

/// A namespace path that could not be opened; names the type and the path.
#[derive(Debug, thiserror::Error)]
pub enum PinnedNsError {
    #[error("{typ} namespace {path}: {source}")]
    Open {
        typ: String,
        path: PathBuf,
        source: std::io::Error,
    },
}

/// The opened namespace files, kept open until libcontainer has built the container,
/// with the path each replaced.
#[derive(Debug, Default)]
pub struct Pinned {
    fds: Vec<(LinuxNamespaceType, PathBuf, OwnedFd)>,
}

impl Pinned {
    /// Opens the `path` of every namespace but the user namespace in a spec that has a
    /// user namespace (a new one or one joined by path); otherwise opens nothing.
    /// Errors: [`PinnedNsError::Open`] for a path siloc cannot open (libcontainer
    /// could not either).
    pub fn open(spec: &Spec) -> Result<Pinned, PinnedNsError> {
        let nss = spec
            .linux()
            .as_ref()
            .and_then(|l| l.namespaces().clone())
            .unwrap_or_default();
        if !nss.iter().any(|n| n.typ() == LinuxNamespaceType::User) {
            return Ok(Pinned::default());
        }
        let mut fds = Vec::new();
        for n in &nss {
            let Some(path) = n.path().clone().filter(|p| !p.as_os_str().is_empty()) else {
                continue;
            };
            if n.typ() == LinuxNamespaceType::User {
                continue;
            }
            // O_CLOEXEC: libcontainer's processes are clones and inherit it; the hooks
            // siloc execs do not.
            let f = std::fs::File::open(&path).map_err(|source| PinnedNsError::Open {
                typ: format!("{:?}", n.typ()).to_lowercase(),
                path: path.clone(),
                source,
            })?;
            fds.push((n.typ(), path, OwnedFd::from(f)));
        }
        Ok(Pinned { fds })
    }

    /// Whether nothing was opened.
    pub fn is_empty(&self) -> bool {
        self.fds.is_empty()
    }

    /// A copy of `spec` whose pinned namespaces are joined through
    /// `/proc/self/fd/N`: the spec to hand to libcontainer.
    pub fn rewrite(&self, spec: &Spec) -> Spec {
        let mut out = spec.clone();
        let Some(mut linux) = out.linux().clone() else {
            return out;
        };
        let Some(mut nss) = linux.namespaces().clone() else {
            return out;
        };
        for n in nss.iter_mut() {
            if let Some((_, _, fd)) = self
                .fds
                .iter()
                .find(|(t, p, _)| *t == n.typ() && n.path().as_ref() == Some(p))
            {
                n.set_path(Some(PathBuf::from(format!(
                    "/proc/self/fd/{}",
                    fd.as_raw_fd()
                ))));
            }
        }
        linux.set_namespaces(Some(nss));
        out.set_linux(Some(linux));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(nss: &str) -> Spec {
        serde_json::from_str(&format!(
            r#"{{"ociVersion":"1.0.2","linux":{{"namespaces":{nss}}}}}"#
        ))
        .unwrap()
    }

    fn paths(s: &Spec) -> Vec<String> {
        s.linux()
            .as_ref()
            .unwrap()
            .namespaces()
            .as_ref()
            .unwrap()
            .iter()
            .map(|n| {
                n.path()
                    .as_ref()
                    .map_or(String::new(), |p| p.display().to_string())
            })
            .collect()
    }

    #[test]
    fn paths_beside_a_user_namespace_become_own_fds() {
        let s = spec(
            r#"[{"type":"user","path":"/proc/self/ns/user"},
                {"type":"pid","path":"/proc/self/ns/pid"},
                {"type":"ipc","path":"/proc/self/ns/ipc"},
                {"type":"mount"}]"#,
        );
        let p = Pinned::open(&s).unwrap();
        let got = paths(&p.rewrite(&s));
        assert_eq!(got[0], "/proc/self/ns/user");
        assert!(got[1].starts_with("/proc/self/fd/"), "{got:?}");
        assert!(
            got[2].starts_with("/proc/self/fd/") && got[2] != got[1],
            "{got:?}"
        );
        assert_eq!(got[3], "");
        // The fd names the same namespace as the path.
        let ino = |p: &str| {
            std::fs::metadata(p)
                .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
                .unwrap()
        };
        assert_eq!(ino(&got[1]), ino("/proc/self/ns/pid"));
    }

    #[test]
    fn nothing_without_a_user_namespace_and_a_clear_error_for_a_bad_path() {
        let s = spec(r#"[{"type":"pid","path":"/proc/self/ns/pid"}]"#);
        let p = Pinned::open(&s).unwrap();
        assert!(p.is_empty());
        assert_eq!(paths(&p.rewrite(&s)), ["/proc/self/ns/pid"]);
        let bad = spec(r#"[{"type":"user"},{"type":"pid","path":"/nonexistent/ns"}]"#);
        let e = Pinned::open(&bad).unwrap_err().to_string();
        assert!(e.contains("pid namespace /nonexistent/ns"), "{e}");
    }
}
