//! The path of one container (DESIGN.md): bundle → plan → record → prepare → final
//! spec → libcontainer; and delete: libcontainer delete → undo → forget the record.

pub mod bundle;
pub mod container_lock;
pub mod final_spec;
pub mod placement;
pub mod plan;
pub mod prepare;
pub mod record;
pub mod root_path;
pub mod spec_compat;
pub(crate) mod test_hooks;
pub mod update;
pub mod update_order;
pub mod upper_guard;

use std::path::{Path, PathBuf};

use libcontainer::container::Container;

use crate::config::HostConfig;
use crate::engine::{self, EngineError, InitOptions};
use crate::userns::idpool::{IdPool, Pool};
use prepare::Env;
use record::{Prepared, Record};

/// Errors of create and delete. Each variant carries the module error that names the
/// file, field or annotation at fault.
#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    #[error(transparent)]
    Bundle(#[from] crate::lifecycle::bundle::BundleError),
    #[error(transparent)]
    Plan(#[from] crate::annotations::AnnotationError),
    #[error(transparent)]
    Prepare(#[from] prepare::PrepareError),
    #[error(transparent)]
    Record(#[from] record::RecordError),
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    MountCompat(#[from] crate::engine::mount_compat::MountCompatError),
    #[error(transparent)]
    PostBuild(#[from] crate::engine::post_build::PostBuildError),
    #[error(transparent)]
    NsOwner(Box<crate::engine::ns_owner::NsOwnerError>),
    #[error(transparent)]
    PinnedNs(#[from] crate::engine::pinned_namespaces::PinnedNsError),
    #[error(transparent)]
    Cwd(#[from] crate::engine::cwd::CwdError),
    #[error(transparent)]
    IdmapMount(#[from] crate::engine::idmapped_mounts::IdmapMountError),
    #[error(transparent)]
    MountGuard(#[from] crate::engine::mount_guard::MountGuardError),
    #[error(transparent)]
    Hook(#[from] crate::engine::hooks::HookError),
    #[error(transparent)]
    SpecMapping(#[from] crate::userns::SpecMappingError),
    #[error(transparent)]
    Frozen(#[from] crate::engine::frozen_cgroup::FrozenCgroupError),
    #[error(transparent)]
    Seccomp(#[from] crate::engine::seccomp_compat::SeccompCompatError),
    #[error(transparent)]
    Cgroup(#[from] crate::engine::cgroup_compat::CgroupCompatError),
    #[error("unable to start container process: error during container init: {0}")]
    Rlimit(#[from] crate::engine::rlimit_check::RlimitError),
    #[error(transparent)]
    Lsm(#[from] crate::engine::lsm_check::LsmError),
    #[error(transparent)]
    OomAdj(#[from] crate::engine::oom_adj::OomAdjError),
    #[error("{0}")]
    Other(String),
}

/// The state root, the host config and the cgroup driver: what every command needs.
pub struct Runtime {
    pub root: PathBuf,
    pub config: HostConfig,
    pub systemd: bool,
}

impl Runtime {
    /// The host's ID pool (`[userns] pool_dir`), holding for this state root.
    pub fn pool(&self) -> IdPool {
        IdPool::new(
            &self.config.userns.pool_dir,
            &self.root,
            Pool::from_config(&self.config.userns),
            holder_has_state,
        )
        .with_cap(self.config.userns.max_size)
    }
}

/// Whether container `id` has any state under state root `root`: siloc's record dir
/// (made before its range is allocated, removed after it is released) or
/// libcontainer's container dir. An error other than "no such file" (a root that
/// cannot be read) counts as state, so a range is never reclaimed on a guess. The
/// ID pool reclaims the entries of holders for which this is `false`.
pub fn holder_has_state(root: &Path, id: &str) -> bool {
    let present = |p: PathBuf| match p.symlink_metadata() {
        Ok(_) => true,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
        ),
    };
    present(record::dir(root, id)) || present(engine::container_dir(root, id))
}

/// The state startContainer hooks get (runtime-spec "State"): `id`, `bundle` and the
/// spec's annotations; the init sets `pid` and `status`.
fn start_hook_state(
    id: &str,
    bundle: &Path,
    spec: &oci_spec::runtime::Spec,
) -> Result<oci_spec::runtime::State, LifecycleError> {
    oci_spec::runtime::StateBuilder::default()
        .version(oci_spec::runtime::VERSION)
        .id(id)
        .bundle(bundle.to_path_buf())
        .annotations(spec.annotations().clone().unwrap_or_default())
        .build()
        .map_err(|e| LifecycleError::Other(format!("startContainer hook state: {e}")))
}

/// What `create` (and `run`) take from the command line.
#[derive(Debug, Clone)]
pub struct CreateRequest {
    pub id: String,
    pub bundle: PathBuf,
    pub init: InitOptions,
}

/// Creates container `req.id`. On any error everything done so far is undone: no
/// mount, ID range, directory or state is left.
pub fn create(rt: &Runtime, req: &CreateRequest) -> Result<Container, LifecycleError> {
    engine::validate_id(&req.id)?;
    if engine::container_dir(&rt.root, &req.id).exists() {
        return Err(EngineError::Exists(req.id.clone()).into());
    }
    let bundle = std::path::absolute(&req.bundle)
        .map_err(|e| LifecycleError::Other(format!("bundle {}: {e}", req.bundle.display())))?;
    let (spec, warnings) = crate::lifecycle::bundle::load_with_warnings(&bundle)?;
    for w in warnings {
        tracing::warn!("{w}");
    }
    crate::engine::mount_guard::check(&spec)?;
    // runc's rlimit error, before anything is made (engine::rlimit_check).
    crate::engine::rlimit_check::check(spec.process().as_ref())?;
    // runc's refusals of LSM labels the host cannot apply (engine::lsm_check).
    crate::engine::lsm_check::check(spec.process().as_ref(), Path::new("/"))?;
    // runc's refusal of an oom_score_adj below the runtime's without CAP_SYS_RESOURCE.
    crate::engine::oom_adj::check(spec.process().as_ref())?;
    let root_path = spec
        .root()
        .as_ref()
        .map(|r| r.path().clone())
        .unwrap_or_default();
    let (rootfs, given_root) = crate::lifecycle::root_path::resolve(&bundle, &root_path)?;
    if !rootfs.is_dir() {
        // libcontainer's create failed on the process's cwd ("mkdir /: ENOTDIR").
        return Err(LifecycleError::Other(format!(
            "root.path {}: invalid rootfs: not a directory",
            given_root.display()
        )));
    }
    let plan = crate::lifecycle::plan::plan(&spec, &rt.config)?;
    if let crate::userns::UsernsPlan::FromSpec { uid, gid, .. } = &plan.userns {
        crate::userns::check_spec_maps_fit(&spec, uid, gid)?;
    }
    std::fs::create_dir_all(&rt.root)
        .map_err(|e| LifecycleError::Other(format!("state root {}: {e}", rt.root.display())))?;
    let mut rec = Record {
        id: req.id.clone(),
        bundle: bundle.clone(),
        rootfs,
        plan,
        prepared: Prepared::default(),
    };
    rec.create_new(&rt.root)?;
    let pool = rt.pool();
    let env = Env {
        state_root: &rt.root,
        data_root: &rt.config.data_root,
        pool: &pool,
    };
    match create_prepared(rt, req, &env, &mut rec, spec, &bundle) {
        Ok(c) => {
            record::creation_done(&rt.root, &req.id);
            Ok(c)
        }
        Err(e) => {
            let _ = crate::engine::cgroup_compat::remove_extra(
                &record::dir(&rt.root, &req.id),
                CGROUP_DRAIN,
            );
            let _ = prepare::undo(&env, &rec);
            let _ = record::remove(&rt.root, &req.id);
            Err(e)
        }
    }
}

fn create_prepared(
    rt: &Runtime,
    req: &CreateRequest,
    env: &Env<'_>,
    rec: &mut Record,
    spec: oci_spec::runtime::Spec,
    bundle: &Path,
) -> Result<Container, LifecycleError> {
    prepare::apply(env, rec)?;
    // runc makes a missing process.cwd in the rootfs; libcontainer would fail the chdir.
    if let Some(p) = spec.process() {
        let owner = crate::userns::host_root(&crate::userns::id_maps(
            &rec.plan.userns,
            rec.prepared.range,
        ));
        let mounts = spec.mounts().clone().unwrap_or_default();
        crate::engine::cwd::ensure_for_spec(p.cwd(), &mounts, bundle, &rec.rootfs, owner)?;
    }
    let mut spec = final_spec::final_spec(spec, rec, rt.systemd)?;
    // HOME as runc sets it, read by siloc rather than by glibc's NSS in the container.
    if crate::engine::home::for_create(&mut spec, &rec.rootfs, bundle) {
        let marker = record::dir(&rt.root, &req.id).join(crate::engine::home::ADDED_MARKER);
        std::fs::write(&marker, "")
            .map_err(|e| LifecycleError::Other(format!("{}: {e}", marker.display())))?;
    }
    // runc's error for a UTS sysctl no user namespace's root may write.
    crate::engine::outer_namespaces::check_user_ns_sysctls(&spec).map_err(EngineError::from)?;
    // libcontainer 0.7 joins namespaces given by path from inside the user namespace;
    // those the container's user namespace does not own (a pod's network namespace)
    // siloc joins itself, for the container to inherit (engine::outer_namespaces).
    // Namespaces the container's user namespace does not own, which runc 1.1.5 cannot
    // use either: its errors, before libcontainer's bare ones (engine::ns_owner).
    crate::engine::outer_namespaces::check_types(&spec).map_err(EngineError::from)?;
    crate::engine::ns_owner::check(&spec).map_err(|e| LifecycleError::NsOwner(Box::new(e)))?;
    let outer = crate::engine::outer_namespaces::take(&mut spec).map_err(EngineError::from)?;
    final_spec::note_outer_namespaces(&mut spec, &outer)?;
    let outer_sysctls = crate::engine::outer_namespaces::take_sysctls(&mut spec, &outer);
    // runc's mount semantics libcontainer 0.7 lacks (engine::mount_compat): spec edits
    // now, the rest inside the container once libcontainer has built it.
    let mount_plan = crate::engine::mount_compat::prepare(&mut spec, &rec.rootfs, bundle)?;
    // runc's seccomp behaviour where libcontainer 0.7 differs (engine::seccomp_compat).
    crate::engine::seccomp_compat::fix_spec(&mut spec)?;
    // runc's cgroup rules where libcgroups differs (engine::cgroup_compat).
    crate::engine::cgroup_compat::fix_spec(&mut spec);
    // libcontainer 0.7 makes a v1 `cgroup` mount with a writable tmpfs, one mountinfo
    // read per hierarchy, and the wrong cgroups in a joined PID namespace: siloc makes
    // it (engine::pidns_cgroup).
    let own_cgroup_mounts =
        crate::engine::pidns_cgroup::take(&mut spec, crate::engine::cgroup_compat::host_is_v2());
    // Also under the systemd driver: a unified key must not leave the cgroup.
    crate::engine::cgroup_compat::check_unified_keys(
        spec.linux().as_ref().and_then(|l| l.resources().as_ref()),
    )?;
    let cgroup_facts = (!rt.systemd).then(|| {
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        (
            crate::sys::cgroup_mounts::read_with(&own).unwrap_or_default(),
            own,
        )
    });
    if let Some((mounts, own)) = &cgroup_facts {
        crate::engine::cgroup_compat::check_create(
            &spec,
            mounts,
            own,
            crate::engine::cgroup_compat::host_is_v2(),
        )?;
        // libcontainer would hang in a frozen cgroup (engine::frozen_cgroup).
        if let Some(cg) = spec.linux().as_ref().and_then(|l| l.cgroups_path().clone()) {
            crate::engine::frozen_cgroup::check(mounts, own, &cg)?;
        }
    }
    let spec_dir = record::dir(&rt.root, &req.id);
    // Without a mount namespace of its own, the container gets a private copy of
    // siloc's: libcontainer's rootfs setup (and the staged mounts) must not change the
    // caller's mounts.
    crate::engine::mount_guard::isolate(&spec)?;
    // libcontainer 0.7 refuses idmapped mounts: siloc makes them (idmapped_mounts).
    let staging = crate::engine::idmapped_mounts::StagingGuard(
        crate::engine::idmapped_mounts::staging_dir(&req.id),
    );
    crate::engine::idmapped_mounts::stage(&mut spec, &rec.rootfs, bundle, &staging.0)?;
    // libcontainer 0.7 neither names a failing hook nor runs createContainer hooks in
    // the rootfs: siloc wraps them (engine::hooks).
    let hook_report = if crate::engine::hooks::has_create_hooks(&spec) {
        Some(crate::engine::hooks::CreateReport::new(
            req.init.preserve_fds,
        )?)
    } else {
        None
    };
    crate::engine::hooks::wrap(
        &mut spec,
        &rec.rootfs,
        &hook_report
            .as_ref()
            .map_or(crate::engine::hooks::Report::Stderr, |r| r.report()),
        &crate::engine::hooks::poststart_report(&spec_dir),
    );
    // The prestart and createRuntime hooks run in siloc's own (runtime) namespaces,
    // not in those siloc enters for the container.
    let opened =
        crate::engine::outer_namespaces::Opened::open(&outer).map_err(EngineError::from)?;
    crate::engine::hooks::runtime_namespaces(&mut spec, &opened.own_fds());
    // startContainer hooks: siloc's init executor runs and names them (engine::hooks).
    let start = crate::engine::hooks::StartContainer {
        hooks: crate::engine::hooks::take_start_container(&mut spec),
        state: start_hook_state(&req.id, bundle, &spec)?,
    };
    // libcontainer 0.7 opens namespace paths from inside the user namespace, where a
    // pod sandbox's init that has not yet exec'd refuses them (EACCES): siloc opens
    // them and libcontainer gets /proc/self/fd/N (engine::pinned_namespaces).
    let pinned = crate::engine::pinned_namespaces::Pinned::open(&spec)?;
    pinned
        .rewrite(&spec)
        .save(spec_dir.join("config.json"))
        .map_err(|e| LifecycleError::Other(format!("write final spec: {e}")))?;
    // Absolute paths first, then work from the bundle as runc does, so relative mount
    // sources and hook paths resolve against it.
    let builder = engine::init_builder(&rt.root, &req.id, &req.init, start)?;
    std::env::set_current_dir(bundle)
        .map_err(|e| LifecycleError::Other(format!("chdir {}: {e}", bundle.display())))?;
    let baseline = crate::engine::mount_guard::Baseline::capture(&spec)?;
    test_hooks::crash_point("before-libcontainer");
    // The hierarchies libcgroups leaves out (engine::cgroup_compat): siloc joins them
    // right before libcontainer forks, so the intermediate and the init are born in
    // them, and leaves them as soon as it has forked (engine::cgroup_handoff).
    let handoff = match &cgroup_facts {
        Some((mounts, own)) => {
            let dirs = crate::engine::cgroup_compat::make_extra(&spec, mounts, own, &spec_dir)?;
            crate::engine::cgroup_handoff::Handoff::start(mounts, &dirs)
                .map_err(|e| LifecycleError::Other(e.to_string()))?
        }
        None => crate::engine::cgroup_handoff::Handoff::start(&[], &[])
            .map_err(|e| LifecycleError::Other(e.to_string()))?,
    };
    let entered = opened.enter().map_err(EngineError::from)?;
    entered
        .write_sysctls(&outer_sysctls)
        .map_err(EngineError::from)?;
    // libcontainer sets the rlimits inside the user namespace, where it cannot raise a
    // hard limit: siloc raises its own first (engine::rlimit_check::RaisedHard).
    let raised = crate::engine::rlimit_check::RaisedHard::raise(
        spec.process()
            .as_ref()
            .and_then(|p| p.rlimits().as_deref())
            .unwrap_or_default(),
    );
    // libcontainer's init reports only the top of its error; the cause it logs is
    // caught (engine::init_cause).
    let catcher = crate::engine::init_cause::Catcher::arm();
    let built = engine::build_init(builder, &spec_dir, &req.init);
    let init_cause = match (&built, catcher) {
        (Err(_), Some(c)) => crate::engine::init_cause::cause(&c.take()),
        _ => None,
    };
    drop(raised);
    drop(entered);
    let forked_within = handoff.finish();
    tracing::debug!(forked_within, "cgroup handoff done");
    if !pinned.is_empty() {
        // The record keeps the paths the caller gave, not this process's fds.
        drop(pinned);
        spec.save(spec_dir.join("config.json"))
            .map_err(|e| LifecycleError::Other(format!("write final spec: {e}")))?;
    }
    drop(staging);
    let hook_failure = hook_report.and_then(|r| r.take());
    let mut c = match (built, hook_failure) {
        (Err(_), Some(msg)) => {
            return Err(LifecycleError::Other(format!(
                "unable to start container process: error during container init: {msg}"
            )));
        }
        (Err(e), None) => {
            // runc's words for a seccomp agent that is not listening.
            let msg = e.to_string();
            return Err(
                match (
                    crate::engine::seccomp_compat::listener_error(&spec, &msg),
                    init_cause,
                ) {
                    (Some(m), _) => LifecycleError::Other(m),
                    (None, Some(cause)) => LifecycleError::Other(format!(
                        "unable to start container process: error during container init: {cause}"
                    )),
                    (None, None) => e.into(),
                },
            );
        }
        (Ok(c), _) => c,
    };
    test_hooks::crash_point("after-libcontainer");
    // Per-device blkio weights and pids.max 1 (engine::cgroup_compat), before the
    // container starts.
    if let (Some(pid), Some((mounts, _))) = (c.pid(), &cgroup_facts)
        && let Err(e) = crate::engine::cgroup_compat::after_create(&spec, pid.as_raw(), mounts)
    {
        let _ = delete_engine(&mut c, true, None);
        return Err(e.into());
    }
    // The v1 cgroup mounts, runc's mount semantics and the per-mount options, from one
    // helper in the container's mount namespace (engine::post_build). The init is in
    // all of its cgroups (named ones too: born there).
    if let Some(pid) = c.pid()
        && let Err(e) = crate::engine::post_build::apply(
            own_cgroup_mounts,
            &mount_plan,
            &spec,
            pid,
            &baseline,
            cgroup_facts.as_ref().map(|(m, _)| m.as_slice()),
        )
    {
        let _ = delete_engine(&mut c, true, None);
        return Err(e.into());
    }
    // io.latency: written once the cgroup exists (iopolicy::latency says why).
    if let (Some(pid), Some(d)) = (
        c.pid(),
        rec.prepared.placement.as_ref().and_then(|p| p.io.as_ref()),
    ) {
        match crate::iopolicy::latency::apply(pid.as_raw(), d) {
            Ok(None) => {}
            Ok(Some(w)) => tracing::warn!(target: "siloc", "container {}: {w}", req.id),
            Err(e) => {
                let _ = delete_engine(&mut c, true, None);
                return Err(LifecycleError::Other(e.to_string()));
            }
        }
    }
    if let (Some(p), Some(pid)) = (&req.init.pid_file, c.pid())
        && let Err(e) = engine::ensure_pid_file(p, pid)
    {
        let _ = delete_engine(&mut c, true, None);
        return Err(e.into());
    }
    Ok(c)
}

/// Deletes container `id`: libcontainer's delete (kill with `force`, cgroup, poststop
/// hooks, state dir), then siloc's undo (rootfs mount, writable dirs, ID range), then
/// the record. A container whose `create` crashed has only siloc's record, or a
/// half-made libcontainer dir; `force` cleans both.
///
/// Errors: [`EngineError::NotFound`] when neither exists and not `force` (runc: forced
/// delete of an unknown id succeeds); [`EngineError::InvalidId`] for an id that is
/// not one (runc: "invalid container id format"), also with `force`; libcontainer's
/// refusal to delete a running container without `force`.
pub fn delete(rt: &Runtime, id: &str, force: bool) -> Result<(), LifecycleError> {
    // The id becomes a path below: `..` would name the state root's parent.
    engine::validate_id(id)?;
    wait_for_creator(&rt.root, id)?;
    // A kill, pause or resume of this container finishes first, or waits and then finds
    // it gone, rather than remaking its cgroups after ours (container_lock).
    let _lock = container_lock::hold(&rt.root, id);
    let rec = Record::load(&rt.root, id).ok().flatten();
    match engine::load(&rt.root, id) {
        Ok(mut c) => delete_engine(&mut c, force, Some(&record::dir(&rt.root, id)))?,
        Err(EngineError::NotFound(_)) => {
            let dir = engine::container_dir(&rt.root, id);
            if dir.exists() {
                // A create killed before libcontainer wrote its state: nothing runs yet.
                if !force {
                    return Err(EngineError::NotFound(id.to_string()).into());
                }
                let _ = std::fs::remove_dir_all(&dir);
            } else if rec.is_none() {
                // runc: `delete --force` of an unknown id succeeds silently; podman
                // relies on it to clean up after a failed create.
                if force {
                    // A create killed before its first record save left a record dir
                    // without record.json, which keeps the id taken, or emptied dirs
                    // of siloc's: remove them, and any range the id still holds.
                    if rt.root.join(".siloc").is_dir() {
                        rt.pool().release(id).map_err(prepare::PrepareError::from)?;
                        record::remove(&rt.root, id)?;
                    }
                    return Ok(());
                }
                return Err(EngineError::NotFound(id.to_string()).into());
            }
        }
        Err(e) if force && engine::is_unreadable_state(&e) => {
            tracing::warn!(
                id,
                "state.json is unreadable (create killed while writing it?); removing by cgroup"
            );
            engine::remove_unreadable(&rt.root, id, CGROUP_DRAIN).map_err(LifecycleError::Other)?;
        }
        Err(e) => return Err(e.into()),
    }
    // The extra cgroups siloc made for the init (engine::cgroup_compat); a container
    // with libcontainer state had them removed before that state (delete_engine).
    crate::engine::cgroup_compat::remove_extra(&record::dir(&rt.root, id), CGROUP_DRAIN)?;
    if let Some(rec) = rec {
        let pool = rt.pool();
        let env = Env {
            state_root: &rt.root,
            data_root: &rt.config.data_root,
            pool: &pool,
        };
        prepare::undo(&env, &rec)?;
    }
    record::remove(&rt.root, id)?;
    Ok(())
}

/// How long delete waits for a `create` of the same id that is still running.
const CREATE_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Waits until no live siloc process is creating container `id`. Undoing a create in
/// progress would release its ID range and remove its upper dir under it, and the
/// container would still come up (with a range another container can then get).
/// A crashed create left a dead pid: nothing to wait for.
fn wait_for_creator(root: &Path, id: &str) -> Result<(), LifecycleError> {
    let deadline = std::time::Instant::now() + CREATE_WAIT;
    while let Some(pid) = record::creator(root, id) {
        if std::time::Instant::now() > deadline {
            return Err(LifecycleError::Other(format!(
                "container {id} is still being created (siloc pid {pid}); try again later"
            )));
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    Ok(())
}

/// How long delete waits for a killed container's processes to leave its cgroup.
/// libcgroups gives up on a busy cgroup after about 100 ms, which a loaded host
/// with many containers dying at once exceeds (seen with 100 parallel deletes).
const CGROUP_DRAIN: std::time::Duration = std::time::Duration::from_secs(10);

/// Removes the extra cgroups listed in `record_dir` of stopped container `c`: one try
/// first (its init is gone, and with its own PID namespace every process with it);
/// else what is left of the container is killed (libcontainer's kill of all its
/// processes, which a stopped container allows) and the removal waits until
/// `deadline`.
///
/// Errors: an extra cgroup still busy at `deadline`.
fn remove_extras_of_stopped(
    c: &mut Container,
    record_dir: &Path,
    deadline: std::time::Instant,
) -> Result<(), LifecycleError> {
    use crate::engine::cgroup_compat::remove_extra;
    if remove_extra(record_dir, std::time::Duration::ZERO).is_ok() {
        return Ok(());
    }
    let _ = c.kill(nix::sys::signal::Signal::SIGKILL, true);
    let wait = deadline.saturating_duration_since(std::time::Instant::now());
    remove_extra(record_dir, wait)?;
    Ok(())
}

/// Whether `pid` is the init (pid 1) of its own PID namespace: the last NSpid field
/// of proc_pid_status(5). A container that joins another PID namespace is not.
fn own_pid_namespace(pid: nix::unistd::Pid) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|st| {
        st.lines()
            .find_map(|l| l.strip_prefix("NSpid:"))
            .and_then(|v| v.split_whitespace().last())
            == Some("1")
    })
}

/// libcontainer's delete of `c` (kill first with `force`, as runc), with the busy
/// cgroup retries. With `extras` (the record dir listing the extra cgroups siloc made,
/// engine::cgroup_compat), a stopped container's extra cgroups are removed before
/// libcontainer removes its state: when they cannot be (still busy), the error leaves
/// the state in place, so a second `delete` finds the container and retries. runc
/// 1.1.5 differs on purpose here: it removes its state, logs "Failed to remove cgroup"
/// and exits 0, leaving the busy cgroup for nobody to remove.
///
/// Errors: a running container without `force`; an extra cgroup or libcontainer's
/// cgroup still busy after [`CGROUP_DRAIN`]; libcontainer's other errors.
fn delete_engine(
    c: &mut Container,
    force: bool,
    extras: Option<&Path>,
) -> Result<(), LifecycleError> {
    let deadline = std::time::Instant::now() + CGROUP_DRAIN;
    // `kill ID KILL; delete ID` (a script's, podman's): the kill returned before the
    // kernel tore the init down, so it still shows as running. It is already going:
    // wait for it, as long as a forced delete would, rather than refuse.
    if !force
        && c.status() == libcontainer::container::ContainerStatus::Running
        && let Some(pid) = c.pid()
        && crate::sys::pidfd::dying(pid)
    {
        crate::sys::pidfd::wait_exit(pid, CGROUP_DRAIN);
        let _ = c.refresh_status();
    }
    // The container's cgroup dirs, read once (a config, /proc/self/cgroup and the
    // mount table) by whichever step below needs them first.
    let mut cgroup_dirs: Option<Vec<PathBuf>> = None;
    // A create killed inside libcontainer saved no pid, and its init lives on
    // (engine::killed_create): found by its cgroups, it dies before the ID range goes.
    if c.pid().is_none() {
        let mut dirs = cgroup_dirs
            .get_or_insert_with(|| crate::engine::foreign_procs::dirs_of(c))
            .clone();
        dirs.extend(
            extras
                .and_then(crate::engine::cgroup_compat::extra_dirs)
                .unwrap_or_default(),
        );
        if let Err(left) = crate::engine::killed_create::kill(&dirs, c.id()) {
            return Err(LifecycleError::Other(format!(
                "container {}: process(es) {left:?} of its killed create did not die",
                c.id()
            )));
        }
    }
    // Kill first and wait for the init to be gone (its pid namespace with it), so
    // libcontainer finds an empty cgroup instead of sleeping through its retries.
    if let Some(pid) = c.pid()
        && c.status() != libcontainer::container::ContainerStatus::Stopped
        && (force || c.status() == libcontainer::container::ContainerStatus::Created)
    {
        // The init of a PID namespace takes every process of it along when it dies
        // (pid_namespaces(7)); libcontainer's kill --all builds a cgroup manager,
        // which on cgroup v1 reads /proc/self/mountinfo once per controller. A frozen
        // (paused) init would not die until thawed: libcontainer's kill thaws.
        if c.status() != libcontainer::container::ContainerStatus::Paused && own_pid_namespace(pid)
        {
            crate::sys::pidfd::kill_and_wait(pid, CGROUP_DRAIN);
        } else {
            let _ = c.kill(nix::sys::signal::Signal::SIGKILL, true);
            crate::sys::pidfd::wait_exit(pid, CGROUP_DRAIN);
        }
    }
    if c.refresh_status().is_ok() && c.status() == libcontainer::container::ContainerStatus::Stopped
    {
        // Processes in a stopped container's cgroups that are not its own (another
        // container's cgroup below it, a process put into one v1 hierarchy only) are
        // left alive, as runc leaves them; its own ones left are killed first.
        let dirs = cgroup_dirs.unwrap_or_else(|| crate::engine::foreign_procs::dirs_of(c));
        if let Some(busy) = crate::engine::foreign_procs::find(c, &dirs) {
            return crate::engine::foreign_procs::delete_leaving(c, &dirs, extras, &busy)
                .map_err(LifecycleError::Other);
        }
        if let Some(dir) = extras {
            remove_extras_of_stopped(c, dir, deadline)?;
        }
        // Only now: the extras' drain kills through libcontainer, which freezes through
        // the freezer dir (making it again when missing) and thaws only after listing
        // the pids through the devices dir.
        crate::engine::foreign_procs::remove_idle(&dirs);
        // Without poststop hooks on cgroup v1: one mount-table read instead of
        // libcontainer's one per controller. Any failure there (a cgroup still busy)
        // leaves the rest to libcontainer's delete and the retries below.
        if let Some(Ok(())) = crate::engine::stopped_delete::try_delete(c, &dirs) {
            return Ok(());
        }
    }
    // libcgroups' v1 manager cannot remove a cgroup with sub-cgroups: siloc removes
    // those first (engine::v1_subcgroups).
    let v1_dirs = crate::engine::v1_subcgroups::dirs_of(c);
    let _ = crate::engine::v1_subcgroups::remove_below(&v1_dirs);
    let mut result = c.delete(force);
    // A cgroup still busy with dying processes: kill what is left, give the kernel
    // time to reap it, and try again. Everything delete did before is idempotent.
    while let Err(libcontainer::error::LibcontainerError::CgroupManager(_)) = &result {
        if std::time::Instant::now() > deadline {
            break;
        }
        tracing::debug!(id = c.id(), "cgroup busy on delete; retrying");
        let _ = c.kill(nix::sys::signal::Signal::SIGKILL, true);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let _ = crate::engine::v1_subcgroups::remove_below(&v1_dirs);
        result = c.delete(force);
    }
    match result {
        Ok(()) => Ok(()),
        // The cgroups are gone; libcontainer returned before removing the state, so
        // every later delete would run the hook again and fail. runc 1.1.5 removes the
        // state first, logs the hook's error and exits 0.
        Err(libcontainer::error::LibcontainerError::Hook(e)) => {
            tracing::error!("error running poststop hook: {e}");
            std::fs::remove_dir_all(&c.root)
                .map_err(|e| LifecycleError::Other(format!("{}: {e}", c.root.display())))
        }
        Err(libcontainer::error::LibcontainerError::IncorrectStatus(s)) => {
            Err(LifecycleError::Other(format!(
                "cannot delete container {} that is not stopped: {}",
                c.id(),
                engine::status_word(s)
            )))
        }
        Err(e) => Err(EngineError::Lib(e).into()),
    }
}
