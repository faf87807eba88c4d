//! `exec` into a container that is created but not yet started, which runc allows
//! (its exec only refuses a stopped container, and a paused one without
//! `--ignore-paused`): containerd and podman run probes and setup commands there.
//!
//! libcontainer 0.7's tenant builder refuses every status but `Running` (`Paused`
//! with ignore_paused): its `load_container_state` says "incompatible container
//! status: `Created`". It reads the container only through its state dir
//! `<root>/<id>` (state.json; youki_config.json for the cgroup path; the bundle's
//! config.json through the absolute `bundle` path in state.json), and makes its
//! per-exec sockets there. So siloc hands it a view whose state.json shows the status
//! `running`: the view every exec gets ([`super::exec_view::View`]). The real state
//! dir is not touched (a racing `start` or `state` sees the container as it is).
