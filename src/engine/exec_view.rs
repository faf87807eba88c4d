//! What libcontainer's tenant builder reads for an `exec`, made readable from inside
//! the container's user namespace.
//!
//! siloc's exec joins the container's user namespace before libcontainer's build
//! (engine::join_user_namespace). setns(2) keeps the caller's uids (kuid 0) but its
//! capabilities then hold in the container's namespace only, where host root's inodes
//! are unmapped: a directory of the state root's path that host root crosses only
//! through CAP_DAC_READ_SEARCH (containerd 2.1's `/run/containerd`, mode 0600) cannot
//! be searched any more. libcontainer 0.7 reads `<root>/<id>` (state.json,
//! youki_config.json), the bundle's config.json (the bundle is siloc's record), the
//! process.json and the spec's `root.path` after that point, and said "container state
//! directory does not exist".
//!
//! So siloc hands it a **view**, made before the join: a private root
//! `<root>/.siloc/exec-created/<pid>/` whose `<id>/` holds copies of state.json
//! (status `running` for a created container, below; `bundle` pointing
//! into the view), youki_config.json, config.json (`root.path` set to `/`: the tenant
//! builder only canonicalizes it, the rootfs is the init's; the init's
//! `additionalGids` dropped, see [`View::make`]) and the process.json. The
//! builder is given `/proc/self/fd/N`, N an fd of the view opened before the join: a
//! magic link, resolved without searching the view's ancestors. The real state dir is
//! not touched, and the view is removed through an fd of `<root>/.siloc` when dropped.
//!
//! The same view is how `exec` reaches a container that is created but not yet
//! started, which runc allows (its exec refuses only a stopped container, and a paused
//! one without `--ignore-paused`; containerd and podman run probes there):
//! libcontainer 0.7's tenant builder refuses every status but `Running` ("incompatible
//! container status: `Created`"), so the view's state.json shows `running`, while a
//! racing `start` or `state` sees the real state dir.

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use libcontainer::container::builder::ContainerBuilder;
use nix::fcntl::{FcntlArg, OFlag, fcntl, open};
use nix::sys::stat::Mode;

/// The name of the process file in the view.
const PROCESS: &str = "process.json";

/// A private root showing container `id` to libcontainer's tenant builder; removed
/// on drop.
#[derive(Debug)]
pub struct View {
    id: String,
    /// `<root>/.siloc`, opened before the join (for the removal).
    siloc: OwnedFd,
    /// The view root, at fd number `n`: `/proc/self/fd/<n>` names it.
    view: OwnedFd,
}

fn open_dir(p: &Path) -> Result<OwnedFd, String> {
    open(
        p,
        OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    // SAFETY: a fresh fd open(2) returned, owned by nothing else.
    .map(|fd| unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) })
    .map_err(|e| format!("{}: {e}", p.display()))
}

impl View {
    /// Makes the view of container `id` of state root `root`, with a copy of the
    /// process file `process`. Call before joining the user namespace.
    ///
    /// Errors: a file of the container cannot be read or parsed, or the view cannot
    /// be written (the message names the file).
    pub fn make(root: &Path, id: &str, process: &Path) -> Result<View, String> {
        let real = super::container_dir(root, id);
        let siloc_dir = root.join(".siloc");
        let view_root = siloc_dir
            .join("exec-created")
            .join(std::process::id().to_string());
        let dir = view_root.join(id);
        // a stale view of an earlier exec with this pid (killed) goes first
        let _ = std::fs::remove_dir_all(&view_root);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let siloc = open_dir(&siloc_dir)?;
        let view = View {
            id: id.to_string(),
            siloc,
            view: open_dir(&view_root)?,
        };
        let at = view.root().join(id);
        let state_path = real.join("state.json");
        let text =
            std::fs::read(&state_path).map_err(|e| format!("{}: {e}", state_path.display()))?;
        let mut state: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", state_path.display()))?;
        let bundle = state["bundle"]
            .as_str()
            .map(PathBuf::from)
            .unwrap_or_default();
        // runc execs into a created container too (module doc).
        if state["status"] == "created" {
            state["status"] = serde_json::Value::from("running");
        }
        state["bundle"] = serde_json::Value::from(at.to_string_lossy().into_owned());
        let out = dir.join("state.json");
        std::fs::write(&out, serde_json::to_vec(&state).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", out.display()))?;
        let cfg = real.join("youki_config.json");
        if cfg.exists() {
            let out = dir.join("youki_config.json");
            std::fs::copy(&cfg, &out).map_err(|e| format!("{}: {e}", out.display()))?;
        }
        let spec_path = bundle.join("config.json");
        let text =
            std::fs::read(&spec_path).map_err(|e| format!("{}: {e}", spec_path.display()))?;
        let mut spec: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", spec_path.display()))?;
        if spec["root"].is_object() {
            spec["root"]["path"] = serde_json::Value::from("/");
        }
        // The builder validates the init's process as if it made a new user namespace,
        // from inside the joined one, so any additionalGids read as "unprivileged user
        // can't set supplementary groups" (containerd adds them to every process). It
        // then replaces that process by the exec's, so the init's groups are not used.
        if let Some(user) = spec["process"]["user"].as_object_mut() {
            user.remove("additionalGids");
        }
        let out = dir.join("config.json");
        std::fs::write(&out, serde_json::to_vec(&spec).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", out.display()))?;
        let out = dir.join(PROCESS);
        std::fs::copy(process, &out).map_err(|e| format!("{}: {e}", out.display()))?;
        Ok(view)
    }

    /// Replaces the view's process file by a copy of `src` (a file exec_seccomp
    /// adjusted). Errors name the file.
    pub fn set_process(&self, src: &Path) -> Result<(), String> {
        let out = self.process();
        std::fs::copy(src, &out)
            .map(|_| ())
            .map_err(|e| format!("{}: {e}", out.display()))
    }

    /// The view root as libcontainer is shown it: `/proc/self/fd/N`.
    pub fn root(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.view.as_raw_fd()))
    }

    /// The copy of the process file, through [`Self::root`].
    pub fn process(&self) -> PathBuf {
        self.root().join(&self.id).join(PROCESS)
    }

    /// `builder.with_root_path(self.root())`. libcontainer canonicalizes a root that
    /// exists, which resolves the magic link back into the real path (searching its
    /// ancestors); a path that does not exist is kept as given. So the view's fd is
    /// moved off its number while the builder takes the path, then back (the caller
    /// is single-threaded: nothing else opens an fd in between).
    ///
    /// Errors: dup(2) fails, or the number was taken in between.
    pub fn give_root(&mut self, builder: ContainerBuilder) -> Result<ContainerBuilder, String> {
        let n = self.view.as_raw_fd();
        let path = self.root();
        let err = |e: &dyn std::fmt::Display| format!("exec view fd {n}: {e}");
        let spare = fcntl(n, FcntlArg::F_DUPFD_CLOEXEC(n + 1)).map_err(|e| err(&e))?;
        // SAFETY: a fresh fd dup(2) returned, owned by nothing else.
        let spare = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(spare) };
        let old = std::mem::replace(&mut self.view, spare);
        drop(old);
        let built = builder.with_root_path(&path);
        let back =
            fcntl(self.view.as_raw_fd(), FcntlArg::F_DUPFD_CLOEXEC(n)).map_err(|e| err(&e))?;
        // SAFETY: as above.
        let back = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(back) };
        if back.as_raw_fd() != n {
            return Err(err(&"number taken"));
        }
        self.view = back;
        built.map_err(|e| err(&e))
    }
}

impl Drop for View {
    fn drop(&mut self) {
        let base =
            PathBuf::from(format!("/proc/self/fd/{}", self.siloc.as_raw_fd())).join("exec-created");
        let _ = std::fs::remove_dir_all(base.join(std::process::id().to_string()));
        // exec-created/ itself, unless a parallel exec still has its view there
        let _ = std::fs::remove_dir(base);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_shows_running_and_goes_away() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("c1");
        let rec = d.path().join("rec");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::create_dir_all(&rec).unwrap();
        std::fs::write(
            real.join("state.json"),
            format!(
                r#"{{"id":"c1","status":"created","pid":5,"bundle":{:?}}}"#,
                rec.display().to_string()
            ),
        )
        .unwrap();
        std::fs::write(real.join("youki_config.json"), "{}").unwrap();
        std::fs::write(
            rec.join("config.json"),
            r#"{"root":{"path":"/x/rootfs"},"process":{"user":{"uid":0,"gid":0,"additionalGids":[0]}}}"#,
        )
        .unwrap();
        let p = d.path().join("p.json");
        std::fs::write(&p, r#"{"args":["true"]}"#).unwrap();
        let v = View::make(d.path(), "c1", &p).unwrap();
        let read = |p: PathBuf| -> serde_json::Value {
            serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
        };
        let seen = read(v.root().join("c1/state.json"));
        assert_eq!(seen["status"], "running");
        assert_eq!(seen["pid"], 5);
        assert_eq!(seen["bundle"], v.root().join("c1").to_str().unwrap());
        let spec = read(v.root().join("c1/config.json"));
        assert_eq!(spec["root"]["path"], "/");
        assert_eq!(
            spec["process"]["user"],
            serde_json::json!({"uid":0,"gid":0})
        );
        assert_eq!(read(v.process())["args"][0], "true");
        assert!(v.root().join("c1/youki_config.json").exists());
        // the real state is untouched
        assert!(
            std::fs::read_to_string(real.join("state.json"))
                .unwrap()
                .contains("created")
        );
        drop(v);
        assert!(!d.path().join(".siloc/exec-created").exists());
    }
}
