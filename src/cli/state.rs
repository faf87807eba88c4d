//! `state` (runc's JSON) and `start`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use libcontainer::container::Container;
use serde::Serialize;

use super::Ctx;
use crate::engine;
use crate::lifecycle::record::Record;

/// runc's `state` output (runtime-spec "State" plus runc's rootfs, created, owner).
#[derive(Serialize, Debug)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RuncState {
    oci_version: String,
    pub(crate) id: String,
    pub(crate) pid: i32,
    pub(crate) status: String,
    pub(crate) bundle: PathBuf,
    pub(crate) rootfs: PathBuf,
    pub(crate) created: String,
    pub(crate) owner: String,
    #[serde(skip_serializing_if = "HashMap::is_empty")]
    pub(crate) annotations: HashMap<String, String>,
}

/// The state of one loaded container, with the bundle and rootfs the caller gave.
pub(crate) fn runc_state(root: &Path, c: &Container) -> RuncState {
    let rec = Record::load(root, c.id()).ok().flatten();
    let status = c.status();
    let pid = match status {
        libcontainer::container::ContainerStatus::Stopped => 0,
        _ => c.pid().map_or(0, |p| p.as_raw()),
    };
    RuncState {
        oci_version: oci_spec::runtime::VERSION.to_string(),
        id: c.id().to_string(),
        pid,
        status: engine::status_word(status).to_string(),
        bundle: rec
            .as_ref()
            .map_or_else(|| c.bundle().clone(), |r| r.bundle.clone()),
        rootfs: rec.as_ref().map(|r| r.rootfs.clone()).unwrap_or_default(),
        created: c
            .created()
            .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true))
            .unwrap_or_default(),
        owner: String::new(),
        annotations: c.state.annotations.clone().unwrap_or_default(),
    }
}

/// `siloc state ID`.
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn state(ctx: &Ctx, id: &str) -> anyhow::Result<()> {
    let c = engine::load(&ctx.root, id)?;
    super::emit(&serde_json::to_string_pretty(&runc_state(&ctx.root, &c))?)
}

/// `siloc start ID`: runs the user process of a created container.
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn start(ctx: &Ctx, id: &str) -> anyhow::Result<()> {
    let mut c = engine::load(&ctx.root, id)?;
    match c.status() {
        libcontainer::container::ContainerStatus::Created => start_created(&ctx.root, &mut c),
        libcontainer::container::ContainerStatus::Stopped => {
            anyhow::bail!("cannot start a container that has stopped")
        }
        libcontainer::container::ContainerStatus::Running => {
            anyhow::bail!("cannot start an already running container")
        }
        // runc 1.1.5's words; a created container whose cgroup is frozen is paused
        // (engine::frozen_cgroup), and its start would hang.
        s => anyhow::bail!(
            "cannot start a container in the {} state",
            engine::status_word(s)
        ),
    }
}

/// Starts created container `c` (state root `root`); a failing poststart hook is named
/// as runc names it (engine::hooks left the message in the record).
pub(crate) fn start_created(root: &Path, c: &mut Container) -> anyhow::Result<()> {
    let id = c.id().to_string();
    c.start().map_err(|e| {
        let report = engine::hooks::poststart_report(&crate::lifecycle::record::dir(root, &id));
        match engine::hooks::take_path(&report) {
            Some(msg) => anyhow::anyhow!(msg),
            None => e.into(),
        }
    })
}
