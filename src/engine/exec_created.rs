//! `exec` into a container that is created but not yet started, which runc allows
//! (its exec only refuses a stopped container, and a paused one without
//! `--ignore-paused`): containerd and podman run probes and setup commands there.
//!
//! libcontainer 0.7's tenant builder refuses every status but `Running` (`Paused`
//! with ignore_paused): its `load_container_state` says "incompatible container
//! status: `Created`". It reads the container only through its state dir
//! `<root>/<id>` (state.json; youki_config.json for the cgroup path; the bundle's
//! config.json through the absolute `bundle` path in state.json), and makes its
//! per-exec sockets there. So siloc hands it a **view**: a private root
//! `<root>/.siloc/exec-created/<pid>/` whose `<id>/` holds a copy of state.json with
//! the status `running` and a copy of youki_config.json. The real state dir is not
//! touched (a racing `start` or `state` sees the container as it is), and the view is
//! removed when the exec has been built ([`View`]'s drop), success or not.

use std::path::{Path, PathBuf};

/// A private root that shows container `id` as running; removed on drop.
#[derive(Debug)]
pub struct View {
    root: PathBuf,
}

impl View {
    /// Makes the view of container `id` of state root `root`.
    ///
    /// Errors: the container's state.json cannot be read or parsed, or the view
    /// cannot be written (the message names the file).
    pub fn make(root: &Path, id: &str) -> Result<View, String> {
        let real = super::container_dir(root, id);
        let view_root = root
            .join(".siloc")
            .join("exec-created")
            .join(std::process::id().to_string());
        let view = View { root: view_root };
        let dir = view.root.join(id);
        // a stale view of an earlier exec with this pid (killed) goes first
        let _ = std::fs::remove_dir_all(&view.root);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let state_path = real.join("state.json");
        let text =
            std::fs::read(&state_path).map_err(|e| format!("{}: {e}", state_path.display()))?;
        let mut state: serde_json::Value =
            serde_json::from_slice(&text).map_err(|e| format!("{}: {e}", state_path.display()))?;
        state["status"] = serde_json::Value::from("running");
        let out = dir.join("state.json");
        std::fs::write(&out, serde_json::to_vec(&state).unwrap_or_default())
            .map_err(|e| format!("{}: {e}", out.display()))?;
        let cfg = real.join("youki_config.json");
        if cfg.exists() {
            let out = dir.join("youki_config.json");
            std::fs::copy(&cfg, &out).map_err(|e| format!("{}: {e}", out.display()))?;
        }
        Ok(view)
    }

    /// The root to hand libcontainer's builder instead of the real one.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Drop for View {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
        // exec-created/ itself, unless a parallel exec still has its view there
        if let Some(parent) = self.root.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_view_shows_running_and_goes_away() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("c1");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::write(
            real.join("state.json"),
            r#"{"id":"c1","status":"created","pid":5,"bundle":"/b"}"#,
        )
        .unwrap();
        std::fs::write(real.join("youki_config.json"), "{}").unwrap();
        let v = View::make(d.path(), "c1").unwrap();
        let seen: serde_json::Value =
            serde_json::from_slice(&std::fs::read(v.root().join("c1/state.json")).unwrap())
                .unwrap();
        assert_eq!(seen["status"], "running");
        assert_eq!(seen["pid"], 5);
        assert!(v.root().join("c1/youki_config.json").exists());
        // the real state is untouched
        assert!(
            std::fs::read_to_string(real.join("state.json"))
                .unwrap()
                .contains("created")
        );
        let at = v.root().to_path_buf();
        drop(v);
        assert!(!at.exists());
    }
}
