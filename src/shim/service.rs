//! The task service: containerd's shim v2 API for the containers of one shim group
//! (a pod, see [`crate::group`]), each request routed by container id and turned
//! into siloc's runc CLI as containerd's runc shim turns it into runc's.
//!
//! Settings, with runc's option names: `BinaryName` (default: `siloc` next to the
//! shim, else on PATH), `Root` (default /run/containerd/siloc; the containerd
//! namespace is appended, as the runc shim does), `SystemdCgroup`. containerd hands a
//! runtime whose `runtime_type` is not runc's its options table as
//! `runtimeoptions.v1.Options` (`ConfigPath`, or the table itself as `ConfigBody`);
//! runc's own `containerd.runc.v1.Options` (ctr's `--runc-binary`, containerd 2.x's
//! IO owner for user-namespaced pods) are read too. What the options leave out comes
//! from `$SILOC_SHIM_CONFIG` or /etc/siloc/shim.toml.
//!
//! Cleanup: `<bundle>/siloc-shim.json` records how siloc was called and what the shim
//! mounted before anything is done, so `shim delete` (containerd's cleanup after a
//! shim died) can `siloc delete --force` and unmount.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use containerd_shim::api::{self, Status};
use containerd_shim::protos::events::task::{
    TaskCreate, TaskDelete, TaskExecAdded, TaskExecStarted, TaskExit, TaskIO, TaskOOM, TaskPaused,
    TaskResumed, TaskStart,
};
use containerd_shim::protos::protobuf::{Message, MessageField};
use containerd_shim::publisher::RemotePublisher;
use containerd_shim::{
    Config, DeleteResponse, ExitSignal, Flags, StartOpts, TtrpcContext, TtrpcResult,
};
use serde_json::Value;

use crate::error::{Result, ShimError, io_at};
use crate::events::Events;
use crate::io::{Fifos, ProcessIo};
use crate::process::Process;
use crate::rootfs::{self, Handover};
use crate::runtime::{self, Siloc};

/// containerd's name for this runtime (`runtime_type`).
pub const RUNTIME_ID: &str = "io.containerd.siloc.v2";
/// What the shim records in the bundle for `shim delete`.
const SAVED: &str = "siloc-shim.json";
/// siloc's default state root under containerd (the runc shim's is /run/containerd/runc).
const DEFAULT_ROOT: &str = "/run/containerd/siloc";

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Saved {
    id: String,
    siloc: Siloc,
    /// A rootfs the shim mounted itself (non-overlay snapshots).
    mounted: Option<PathBuf>,
}

impl Saved {
    fn save(&self, bundle: &Path) -> Result<()> {
        let data = serde_json::to_vec(self).map_err(|e| ShimError::Invalid(e.to_string()))?;
        runtime::write_atomic(&bundle.join(SAVED), &data)
    }

    fn load(bundle: &Path) -> Option<Saved> {
        serde_json::from_slice(&std::fs::read(bundle.join(SAVED)).ok()?).ok()
    }
}

/// One container this shim serves.
struct Task {
    id: String,
    bundle: PathBuf,
    siloc: Siloc,
    init: Arc<Process>,
    execs: HashMap<String, Arc<Process>>,
    /// Host uid and gid of the container's root (for its stdio pipes).
    owner: Option<(u32, u32)>,
    saved: Saved,
}

struct Inner {
    namespace: String,
    /// `-id`: the container a `shim delete` cleans up (for a serving shim, the
    /// group's first container).
    id: String,
    /// `-address`: containerd's gRPC socket, part of the shim socket's address.
    address: String,
    debug: bool,
    bundle: PathBuf,
    exit: ExitSignal,
    events: OnceLock<Events>,
    /// The containers of the group, by container id; the shim exits on Shutdown
    /// once this is empty.
    tasks: Mutex<HashMap<String, Task>>,
    /// The socket this shim serves (`-socket`), removed when it exits.
    socket: String,
}

/// The shim: containerd-shim's [`containerd_shim::Shim`] and task service.
#[derive(Clone)]
pub struct Service {
    inner: Arc<Inner>,
}

impl Service {
    fn tasks(&self) -> std::sync::MutexGuard<'_, HashMap<String, Task>> {
        self.inner.tasks.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn send<E>(&self, ev: E)
    where
        E: containerd_shim::event::Event + containerd_shim::protos::protobuf::MessageDyn + 'static,
    {
        if let Some(e) = self.inner.events.get() {
            e.send(ev);
        }
    }

    /// The process `exec_id` names ("" = init) of the task `id`.
    fn process(&self, id: &str, exec_id: &str) -> Result<(Arc<Process>, Siloc, String)> {
        let g = self.tasks();
        let t = g
            .get(id)
            .ok_or_else(|| ShimError::NotFound(format!("task {id}")))?;
        let p = if exec_id.is_empty() {
            t.init.clone()
        } else {
            t.execs
                .get(exec_id)
                .cloned()
                .ok_or_else(|| ShimError::NotFound(format!("exec {exec_id} of task {id}")))?
        };
        Ok((p, t.siloc.clone(), t.id.clone()))
    }
}

/// The shim's settings file when the runtime options name none: `$SILOC_SHIM_CONFIG`,
/// else this path if it exists.
pub const SETTINGS_FILE: &str = "/etc/siloc/shim.toml";

/// siloc's settings for the shim, with runc's option names (TOML keys `BinaryName`,
/// `Root`, `SystemdCgroup`).
#[derive(serde::Deserialize, Default, Debug)]
#[serde(rename_all = "PascalCase", deny_unknown_fields)]
struct Settings {
    binary_name: Option<String>,
    root: Option<String>,
    systemd_cgroup: Option<bool>,
}

fn settings_from(text: &str, from: &str) -> Result<Settings> {
    toml::from_str(text).map_err(|e| ShimError::Invalid(format!("shim settings {from}: {e}")))
}

/// The settings: the runtime options first (runc's `containerd.runc.v1.Options`, or
/// `runtimeoptions.v1.Options` naming a TOML file or carrying the TOML), then the
/// settings file for what they leave out. containerd 2.x hands a user-namespaced pod's
/// containers runc's options (with the IO owner) when the runtime has no options table,
/// so the settings file is how such a runtime is configured.
fn read_options(
    any: &MessageField<containerd_shim::protos::protobuf::well_known_types::any::Any>,
) -> Result<(Option<String>, Option<String>, bool)> {
    let nonempty = |s: String| (!s.is_empty()).then_some(s);
    let mut got = Settings::default();
    if let Some(any) = any.as_ref() {
        if any.type_url.ends_with("containerd.runc.v1.Options") {
            let o = api::Options::parse_from_bytes(&any.value).map_err(|e| {
                ShimError::Invalid(format!("runtime options {}: {e}", any.type_url))
            })?;
            got.binary_name = nonempty(o.binary_name);
            got.root = nonempty(o.root);
            got.systemd_cgroup = o.systemd_cgroup.then_some(true);
        } else if any.type_url.ends_with("runtimeoptions.v1.Options") {
            let (path, body) = runtime_options(&any.value);
            got = match (body, path) {
                (Some(b), _) if !b.is_empty() => {
                    settings_from(&String::from_utf8_lossy(&b), "(runtime options ConfigBody)")?
                }
                (_, Some(p)) if !p.is_empty() => {
                    settings_from(&std::fs::read_to_string(&p).map_err(io_at(&p))?, &p)?
                }
                _ => Settings::default(),
            };
        } else {
            log::warn!("runtime options of type {} ignored", any.type_url);
        }
    }
    let file = std::env::var("SILOC_SHIM_CONFIG").unwrap_or_else(|_| SETTINGS_FILE.to_string());
    if (got.binary_name.is_none() || got.root.is_none() || got.systemd_cgroup.is_none())
        && let Ok(text) = std::fs::read_to_string(&file)
    {
        let f = settings_from(&text, &file)?;
        got.binary_name = got.binary_name.or(f.binary_name);
        got.root = got.root.or(f.root);
        got.systemd_cgroup = got.systemd_cgroup.or(f.systemd_cgroup);
    }
    Ok((
        got.binary_name,
        got.root,
        got.systemd_cgroup.unwrap_or(false),
    ))
}

/// The answer to `shim -info`: a `containerd.types.RuntimeInfo`
/// (api/types/introspection.proto) naming the runtime, with siloc's OCI features
/// document (`siloc features`, runtime-spec features.md) as an Any of containerd's
/// type URL for it. The runtime options come on stdin (an Any).
pub fn runtime_info() -> Result<Vec<u8>> {
    use containerd_shim::protos::protobuf::well_known_types::any::Any;
    use std::io::Read;
    let mut input = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut input);
    let opts = if input.is_empty() {
        MessageField::none()
    } else {
        MessageField::from_option(Any::parse_from_bytes(&input).ok())
    };
    let (binary, _, _) = read_options(&opts)?;
    let binary = runtime::find_binary(binary.as_deref().unwrap_or("siloc"));
    let out = std::process::Command::new(&binary)
        .arg("features")
        .output()
        .map_err(|source| ShimError::SilocMissing {
            path: binary.clone(),
            source,
        })?;
    if !out.status.success() {
        return Err(ShimError::Siloc {
            cmd: "features".into(),
            status: out.status.code().unwrap_or(-1),
            msg: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let mut info = containerd_shim::protos::types::introspection::RuntimeInfo::new();
    info.name = RUNTIME_ID.to_string();
    let mut f = Any::new();
    f.type_url = "types.containerd.io/opencontainers/runtime-spec/1/features/Features".into();
    f.value = out.stdout;
    info.features = MessageField::some(f);
    info.write_to_bytes()
        .map_err(|e| ShimError::Invalid(format!("encode runtime info: {e}")))
}

/// Decodes `runtimeoptions.v1.Options` (containerd api/types/runtimeoptions/v1:
/// `type_url` = 1, `config_path` = 2, `config_body` = 3): (config_path, config_body).
fn runtime_options(mut b: &[u8]) -> (Option<String>, Option<Vec<u8>>) {
    fn varint(b: &mut &[u8]) -> Option<u64> {
        let mut n = 0u64;
        for shift in (0..64).step_by(7) {
            let (&c, rest) = b.split_first()?;
            *b = rest;
            n |= u64::from(c & 0x7f) << shift;
            if c & 0x80 == 0 {
                return Some(n);
            }
        }
        None
    }
    let (mut path, mut body) = (None, None);
    while let Some(key) = varint(&mut b) {
        let (field, wt) = (key >> 3, key & 7);
        match wt {
            0 => {
                if varint(&mut b).is_none() {
                    break;
                }
            }
            2 => {
                let Some(n) = varint(&mut b) else { break };
                let n = n as usize;
                if n > b.len() {
                    break;
                }
                let (v, rest) = b.split_at(n);
                b = rest;
                match field {
                    2 => path = Some(String::from_utf8_lossy(v).into_owned()),
                    3 => body = Some(v.to_vec()),
                    _ => {}
                }
            }
            _ => break,
        }
    }
    (path, body)
}

/// The container root's host IDs: the range siloc gave it, else the spec's mapping
/// of container ID 0.
fn container_owner(siloc: &Siloc, id: &str, spec: &Value) -> Option<(u32, u32)> {
    if let Ok(st) = siloc.state(id)
        && let Some(r) = st["annotations"][siloc::annotations::OUT_USERNS_RANGE].as_str()
    {
        let get = |k: &str| {
            r.split(',')
                .find_map(|kv| kv.strip_prefix(k)?.strip_prefix('='))
                .and_then(|n| n.parse::<u32>().ok())
        };
        return Some((get("uid")?, get("gid")?));
    }
    let root_of = |key: &str| {
        spec["linux"][key]
            .as_array()?
            .iter()
            .find_map(|m| (m["containerID"].as_u64() == Some(0)).then(|| m["hostID"].as_u64())?)
    };
    Some((
        root_of("uidMappings")? as u32,
        root_of("gidMappings")? as u32,
    ))
}

/// Whether the container gets a user namespace: the spec's own, or siloc's
/// `io.siloc.userns=auto`.
fn in_userns(spec: &Value) -> bool {
    siloc::annotations::userns_is_auto(spec["annotations"][siloc::annotations::USERNS].as_str())
        || spec["linux"]["namespaces"]
            .as_array()
            .is_some_and(|ns| ns.iter().any(|n| n["type"] == "user"))
}

/// Reads a pid file siloc wrote.
fn read_pid(path: &Path) -> Result<u32> {
    let text = std::fs::read_to_string(path).map_err(io_at(path))?;
    text.trim().parse::<u32>().map_err(|e| ShimError::Bundle {
        path: path.to_path_buf(),
        msg: format!("not a pid: {e}"),
    })
}

/// Undoes a create that failed half-way: whatever siloc holds, and the shim's mount.
impl Service {
    /// How siloc is called for the container of `bundle`, from the settings
    /// ([`read_options`]: `BinaryName`, `Root`, `SystemdCgroup`): the binary (default
    /// `siloc` next to the shim, else on PATH) and the state root (default
    /// [`DEFAULT_ROOT`]) joined with the containerd namespace, as the runc shim does.
    fn siloc_with(
        &self,
        bundle: &Path,
        (binary, root, systemd): (Option<String>, Option<String>, bool),
    ) -> Siloc {
        Siloc {
            binary: runtime::find_binary(binary.as_deref().unwrap_or("siloc")),
            root: PathBuf::from(root.as_deref().unwrap_or(DEFAULT_ROOT))
                .join(&self.inner.namespace),
            log: bundle.join("log.json"),
            systemd,
            debug: self.inner.debug,
        }
    }

    /// What `shim delete` cleans up with when the bundle's [`SAVED`] is missing or
    /// unreadable: siloc and its state root from the settings file (as [`read_options`]
    /// reads it without runtime options, which `shim delete` does not get), else the
    /// defaults, and the bundle's `rootfs` if it is a mount point; containerd's runc
    /// shim falls back to its default root and unmounts `<bundle>/rootfs` likewise.
    /// Said in the log: a `Root` given only in the runtime options is not known here.
    fn unsaved(&self, bundle: &Path) -> Saved {
        let settings = read_options(&MessageField::none()).unwrap_or_else(|e| {
            log::warn!("shim delete: {e}; using the defaults");
            (None, None, false)
        });
        let siloc = self.siloc_with(bundle, settings);
        log::warn!(
            "shim delete: {} missing or unreadable in {}; cleaning up {} with {} --root {}",
            SAVED,
            bundle.display(),
            self.inner.id,
            siloc.binary.display(),
            siloc.root.display()
        );
        Saved {
            id: self.inner.id.clone(),
            siloc,
            mounted: Some(bundle.join("rootfs")),
        }
    }
}

fn undo_create(siloc: &Siloc, id: &str, saved: &Saved, bundle: &Path) {
    if let Err(e) = siloc.delete(id, true) {
        log::debug!("cleanup: siloc delete --force {id}: {e}");
    }
    if let Some(m) = &saved.mounted
        && let Err(e) = rootfs::unmount(m)
    {
        log::error!("cleanup: unmount {}: {e}", m.display());
    }
    let _ = std::fs::remove_file(bundle.join(SAVED));
}

impl containerd_shim::Shim for Service {
    type T = Service;

    fn new(_runtime_id: &str, flags: &Flags, _config: &mut Config) -> Self {
        let bundle = if flags.bundle.is_empty() {
            std::env::current_dir().unwrap_or_default()
        } else {
            PathBuf::from(&flags.bundle)
        };
        Service {
            inner: Arc::new(Inner {
                namespace: flags.namespace.clone(),
                id: flags.id.clone(),
                address: flags.address.clone(),
                debug: flags.debug,
                bundle,
                exit: ExitSignal::default(),
                events: OnceLock::new(),
                tasks: Mutex::new(HashMap::new()),
                socket: flags.socket.clone(),
            }),
        }
    }

    /// Runs in the new container's bundle: the group's shim if one listens, else a
    /// new one ([`crate::group`]).
    fn start_shim(&mut self, opts: StartOpts) -> containerd_shim::Result<String> {
        let bundle = std::env::current_dir().map_err(io_at("."))?;
        let grouping = crate::group::grouping_of_bundle(&bundle, &opts.id)?;
        let address = crate::group::address(&opts.address, &opts.namespace, &grouping);
        if crate::group::listening(&address) {
            log::info!("{}: joins the shim of group {grouping}", opts.id);
        } else {
            let (_pid, spawned) = containerd_shim::spawn(opts, &grouping, Vec::new())?;
            debug_assert_eq!(spawned, address);
        }
        containerd_shim::synchronous::util::write_address(&address)?;
        Ok(address)
    }

    /// containerd's cleanup after the shim died: `siloc delete --force`, unmount.
    fn delete_shim(&mut self) -> containerd_shim::Result<DeleteResponse> {
        crate::exits::start();
        let bundle = self.inner.bundle.clone();
        let saved = Saved::load(&bundle).unwrap_or_else(|| self.unsaved(&bundle));
        log::info!(
            "shim delete: cleaning up {} in {}",
            saved.id,
            bundle.display()
        );
        undo_create(&saved.siloc, &saved.id, &saved, &bundle);
        // The socket of a shim that died (the crate removes it only on a clean exit).
        if let Ok(grouping) = crate::group::grouping_of_bundle(&bundle, &self.inner.id)
            && !self.inner.address.is_empty()
        {
            let a = crate::group::address(&self.inner.address, &self.inner.namespace, &grouping);
            if crate::group::remove_dead_socket(&a) {
                log::info!("shim delete: removed the dead shim's socket {a}");
            }
        }
        let mut r = DeleteResponse::new();
        r.exit_status = 128 + libc::SIGKILL as u32;
        r.exited_at = containerd_shim::util::timestamp().ok().into();
        Ok(r)
    }

    fn wait(&mut self) {
        self.inner.exit.wait();
        // The crate removes the socket named by the `address` file in the shim's
        // working directory, the first container's bundle, which containerd may have
        // removed already when other containers of the group outlived that one.
        if !self.inner.socket.is_empty() {
            let path = self.inner.socket.trim_start_matches("unix://");
            if let Err(e) = std::fs::remove_file(path) {
                log::debug!("remove socket {path}: {e}");
            }
        }
    }

    fn create_task_service(&self, publisher: RemotePublisher) -> Self::T {
        crate::exits::start();
        let _ = self
            .inner
            .events
            .set(Events::new(publisher, self.inner.namespace.clone()));
        self.clone()
    }
}

impl Service {
    fn do_create(&self, req: &api::CreateTaskRequest) -> Result<u32> {
        if self.tasks().contains_key(&req.id) {
            return Err(ShimError::AlreadyExists(format!("task {}", req.id)));
        }
        let bundle = PathBuf::from(&req.bundle);
        let siloc = self.siloc_with(&bundle, read_options(&req.options)?);
        if !siloc.binary.is_file() {
            return Err(ShimError::SilocMissing {
                path: siloc.binary.clone(),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            });
        }
        std::fs::create_dir_all(&siloc.root).map_err(io_at(&siloc.root))?;
        let mut saved = Saved {
            id: req.id.clone(),
            siloc: siloc.clone(),
            mounted: None,
        };
        saved.save(&bundle)?;
        let fail = |saved: &Saved, e: ShimError| {
            log::error!("create {}: {e}", req.id);
            undo_create(&siloc, &req.id, saved, &bundle);
            e
        };
        let cfg = bundle.join("config.json");
        let mut spec: Value = std::fs::read(&cfg)
            .map_err(io_at(&cfg))
            .and_then(|b| {
                serde_json::from_slice(&b).map_err(|e| ShimError::Bundle {
                    path: cfg.clone(),
                    msg: e.to_string(),
                })
            })
            .map_err(|e| fail(&saved, e))?;
        let handover =
            rootfs::hand_over(&mut spec, &bundle, &req.rootfs).map_err(|e| fail(&saved, e))?;
        if let Handover::Mounted(p) = &handover {
            saved.mounted = Some(p.clone());
            saved.save(&bundle).map_err(|e| fail(&saved, e))?;
        }
        log::info!("create {}: rootfs {handover:?}", req.id);
        crate::pod::join_sandbox(&mut spec, &siloc).map_err(|e| fail(&saved, e))?;
        // containerd 2.x's per-mount ID mappings (uidMappings/gidMappings and the
        // idmap option on a user-namespaced pod's volumes, /etc/hosts, resolv.conf)
        // pass through: siloc makes those idmapped bind mounts itself
        // (src/engine/idmapped_mounts.rs).
        let idmapped = crate::pod::idmapped_mounts(&spec);
        if !idmapped.is_empty() {
            log::info!("idmapped bind mounts passed to siloc: {idmapped:?}");
        }
        let data = serde_json::to_vec_pretty(&spec)
            .map_err(|e| fail(&saved, ShimError::Invalid(e.to_string())))?;
        runtime::write_atomic(&cfg, &data).map_err(|e| fail(&saved, e))?;
        if in_userns(&spec) {
            // The container's init runs as its range's root and reaches root.path
            // through the bundle, which containerd made 0700 (it opens the bundle to
            // the remapped root's group only for user namespaces it knows of): search
            // permission for all, as config.json (the environment) is 0600.
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&bundle, std::fs::Permissions::from_mode(0o711))
                .map_err(|e| fail(&saved, io_at(&bundle)(e)))?;
            let bases = crate::pod::containerd_dirs(&bundle);
            let opened = crate::pod::open_bind_sources(&spec, &req.id, &bases);
            if !opened.is_empty() {
                log::info!("search permission (o+x) for the user namespace on {opened:?}");
            }
        }

        let fifos = Fifos {
            stdin: req.stdin.clone(),
            stdout: req.stdout.clone(),
            stderr: req.stderr.clone(),
            terminal: req.terminal,
        };
        let (mut pio, child) = ProcessIo::new(&fifos).map_err(|e| fail(&saved, e))?;
        let pid_file = bundle.join("init.pid");
        let mut args: Vec<OsString> = vec![
            "create".into(),
            "--bundle".into(),
            bundle.clone().into(),
            "--pid-file".into(),
            pid_file.clone().into(),
        ];
        if let Some(s) = pio.console_socket() {
            args.extend(["--console-socket".into(), s.into()]);
        }
        args.push(req.id.clone().into());
        siloc
            .run_with(&args, None, Some(child))
            .map_err(|e| fail(&saved, e))?;
        pio.receive_console(&fifos).map_err(|e| fail(&saved, e))?;
        let pid = read_pid(&pid_file).map_err(|e| fail(&saved, e))?;
        let owner = container_owner(&siloc, &req.id, &spec);
        if let Some((u, g)) = owner {
            pio.chown_pipes(u, g);
        }
        let init = Process::new("", fifos.clone());
        init.set_pid(pid);
        *init.io.lock().unwrap_or_else(|p| p.into_inner()) = Some(pio);
        {
            let (svc, p, id) = (self.clone(), init.clone(), req.id.clone());
            crate::exits::watch(pid as i32, move |code| {
                p.exited(code);
                let st = p.state();
                svc.send(TaskExit {
                    container_id: id.clone(),
                    id,
                    pid,
                    exit_status: st.exit_status,
                    exited_at: st.exited_at.into(),
                    ..Default::default()
                });
            });
        }
        {
            let (svc, id) = (self.clone(), req.id.clone());
            crate::events::watch_oom(pid, move || {
                log::info!("OOM kill in container {id}");
                svc.send(TaskOOM {
                    container_id: id.clone(),
                    ..Default::default()
                });
            });
        }
        self.tasks().insert(
            req.id.clone(),
            Task {
                id: req.id.clone(),
                bundle: bundle.clone(),
                siloc,
                init,
                execs: HashMap::new(),
                owner,
                saved,
            },
        );
        self.send(TaskCreate {
            container_id: req.id.clone(),
            bundle: req.bundle.clone(),
            rootfs: req.rootfs.clone(),
            io: MessageField::some(TaskIO {
                stdin: req.stdin.clone(),
                stdout: req.stdout.clone(),
                stderr: req.stderr.clone(),
                terminal: req.terminal,
                ..Default::default()
            }),
            pid,
            ..Default::default()
        });
        Ok(pid)
    }

    fn do_start_exec(&self, id: &str, exec_id: &str) -> Result<u32> {
        let (p, siloc, _) = self.process(id, exec_id)?;
        let (bundle, owner) = {
            let g = self.tasks();
            let t = g
                .get(id)
                .ok_or_else(|| ShimError::NotFound(format!("task {id}")))?;
            (t.bundle.clone(), t.owner)
        };
        let spec = p
            .spec
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| {
                ShimError::Precondition(format!("exec {exec_id} was started already"))
            })?;
        let proc_file = bundle.join(format!("exec-{exec_id}.json"));
        let pid_file = bundle.join(format!("exec-{exec_id}.pid"));
        let run = || -> Result<u32> {
            std::fs::write(&proc_file, &spec).map_err(io_at(&proc_file))?;
            let (mut pio, child) = ProcessIo::new(&p.fifos)?;
            let mut args: Vec<OsString> = vec![
                "exec".into(),
                "--process".into(),
                proc_file.clone().into(),
                "--detach".into(),
                "--pid-file".into(),
                pid_file.clone().into(),
            ];
            if let Some(s) = pio.console_socket() {
                args.extend(["--console-socket".into(), s.into()]);
            }
            args.push(id.into());
            siloc.run_with(&args, None, Some(child))?;
            pio.receive_console(&p.fifos)?;
            let pid = read_pid(&pid_file)?;
            if let Some((u, g)) = owner {
                pio.chown_pipes(u, g);
            }
            *p.io.lock().unwrap_or_else(|e| e.into_inner()) = Some(pio);
            Ok(pid)
        };
        let r = run();
        let _ = std::fs::remove_file(&proc_file);
        let _ = std::fs::remove_file(&pid_file);
        let pid = match r {
            Ok(pid) => pid,
            Err(e) => {
                // Nothing runs: a Wait on this exec must end (runc shim: status 255).
                p.exited(255);
                return Err(e);
            }
        };
        p.set_pid(pid);
        p.set_status(Status::RUNNING);
        let (svc, proc_, cid, eid) = (self.clone(), p.clone(), id.to_string(), exec_id.to_string());
        crate::exits::watch(pid as i32, move |code| {
            proc_.exited(code);
            let st = proc_.state();
            svc.send(TaskExit {
                container_id: cid,
                id: eid,
                pid,
                exit_status: st.exit_status,
                exited_at: st.exited_at.into(),
                ..Default::default()
            });
        });
        self.send(TaskExecStarted {
            container_id: id.to_string(),
            exec_id: exec_id.to_string(),
            pid,
            ..Default::default()
        });
        Ok(pid)
    }

    fn do_delete(&self, req: &api::DeleteRequest) -> Result<api::DeleteResponse> {
        let (p, siloc, _) = self.process(&req.id, &req.exec_id)?;
        let st = p.state();
        let mut r = api::DeleteResponse::new();
        r.pid = st.pid;
        if !req.exec_id.is_empty() {
            if st.status == Status::RUNNING {
                return Err(ShimError::Precondition(format!(
                    "exec {} is still running",
                    req.exec_id
                )));
            }
            if let Some(t) = self.tasks().get_mut(&req.id) {
                t.execs.remove(&req.exec_id);
            }
            r.exit_status = st.exit_status;
            r.exited_at = st.exited_at.into();
            return Ok(r);
        }
        if let Err(e) = siloc.delete(&req.id, false) {
            log::warn!("siloc delete {}: {e}; retrying with --force", req.id);
            siloc.delete(&req.id, true)?;
        }
        let t = self.tasks().remove(&req.id);
        if let Some(t) = &t {
            if let Some(m) = &t.saved.mounted {
                rootfs::unmount(m)?;
            }
            let _ = std::fs::remove_file(t.bundle.join(SAVED));
        }
        // A created task that never ran was killed by the delete: wait for its exit.
        let st = if st.status == Status::STOPPED {
            st
        } else {
            p.wait()
        };
        r.exit_status = st.exit_status;
        r.exited_at = st.exited_at.clone().into();
        self.send(TaskDelete {
            container_id: req.id.clone(),
            pid: st.pid,
            exit_status: st.exit_status,
            exited_at: st.exited_at.into(),
            id: req.id.clone(),
            ..Default::default()
        });
        Ok(r)
    }
}

impl containerd_shim::Task for Service {
    fn create(
        &self,
        _ctx: &TtrpcContext,
        req: api::CreateTaskRequest,
    ) -> TtrpcResult<api::CreateTaskResponse> {
        let pid = self.do_create(&req)?;
        let mut r = api::CreateTaskResponse::new();
        r.pid = pid;
        Ok(r)
    }

    fn start(
        &self,
        _ctx: &TtrpcContext,
        req: api::StartRequest,
    ) -> TtrpcResult<api::StartResponse> {
        let pid = if req.exec_id.is_empty() {
            let (p, siloc, id) = self.process(&req.id, "")?;
            siloc.run(&["start".into(), id.clone().into()], None)?;
            p.set_status(Status::RUNNING);
            let pid = p.state().pid;
            self.send(TaskStart {
                container_id: id,
                pid,
                ..Default::default()
            });
            pid
        } else {
            self.do_start_exec(&req.id, &req.exec_id)?
        };
        let mut r = api::StartResponse::new();
        r.pid = pid;
        Ok(r)
    }

    fn delete(
        &self,
        _ctx: &TtrpcContext,
        req: api::DeleteRequest,
    ) -> TtrpcResult<api::DeleteResponse> {
        Ok(self.do_delete(&req)?)
    }

    fn exec(&self, _ctx: &TtrpcContext, req: api::ExecProcessRequest) -> TtrpcResult<api::Empty> {
        let mut g = self.tasks();
        let t = g
            .get_mut(&req.id)
            .ok_or_else(|| ShimError::NotFound(format!("task {}", req.id)))?;
        if t.execs.contains_key(&req.exec_id) {
            return Err(ShimError::Precondition(format!("exec {} exists", req.exec_id)).into());
        }
        let p = Process::new(
            &req.exec_id,
            Fifos {
                stdin: req.stdin.clone(),
                stdout: req.stdout.clone(),
                stderr: req.stderr.clone(),
                terminal: req.terminal,
            },
        );
        *p.spec.lock().unwrap_or_else(|e| e.into_inner()) = Some(
            req.spec
                .as_ref()
                .map(|a| a.value.clone())
                .unwrap_or_default(),
        );
        t.execs.insert(req.exec_id.clone(), p);
        drop(g);
        self.send(TaskExecAdded {
            container_id: req.id,
            exec_id: req.exec_id,
            ..Default::default()
        });
        Ok(api::Empty::new())
    }

    fn state(
        &self,
        _ctx: &TtrpcContext,
        req: api::StateRequest,
    ) -> TtrpcResult<api::StateResponse> {
        let (p, _, id) = self.process(&req.id, &req.exec_id)?;
        let st = p.state();
        let bundle = self
            .tasks()
            .get(&req.id)
            .map(|t| t.bundle.display().to_string())
            .unwrap_or_default();
        let mut r = api::StateResponse::new();
        r.id = if req.exec_id.is_empty() {
            id
        } else {
            req.exec_id.clone()
        };
        r.exec_id = req.exec_id;
        r.bundle = bundle;
        r.pid = st.pid;
        r.status = st.status.into();
        r.stdin = p.fifos.stdin.clone();
        r.stdout = p.fifos.stdout.clone();
        r.stderr = p.fifos.stderr.clone();
        r.terminal = p.fifos.terminal;
        r.exit_status = st.exit_status;
        r.exited_at = st.exited_at.into();
        Ok(r)
    }

    fn kill(&self, _ctx: &TtrpcContext, req: api::KillRequest) -> TtrpcResult<api::Empty> {
        let (p, siloc, id) = self.process(&req.id, &req.exec_id)?;
        let st = p.state();
        if st.status == Status::STOPPED && !req.all {
            return Err(ShimError::NotFound("process already finished".into()).into());
        }
        if req.exec_id.is_empty() {
            let mut a: Vec<OsString> = vec!["kill".into()];
            if req.all {
                a.push("--all".into());
            }
            a.extend([id.into(), req.signal.to_string().into()]);
            siloc.run(&a, None).map_err(crate::error::kill_error)?;
        } else {
            let sig = nix::sys::signal::Signal::try_from(req.signal as i32)
                .map_err(|e| ShimError::Invalid(format!("signal {}: {e}", req.signal)))?;
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(st.pid as i32), sig).map_err(
                |e| ShimError::NotFound(format!("exec {} (pid {}): {e}", req.exec_id, st.pid)),
            )?;
        }
        Ok(api::Empty::new())
    }

    fn pids(&self, _ctx: &TtrpcContext, req: api::PidsRequest) -> TtrpcResult<api::PidsResponse> {
        let (_, siloc, id) = self.process(&req.id, "")?;
        let execs: HashMap<u32, String> = self
            .tasks()
            .get(&req.id)
            .map(|t| {
                t.execs
                    .values()
                    .map(|p| (p.state().pid, p.exec_id.clone()))
                    .collect()
            })
            .unwrap_or_default();
        let mut r = api::PidsResponse::new();
        for pid in siloc.ps(&id)? {
            let mut info = containerd_shim::protos::types::task::ProcessInfo::new();
            info.pid = pid;
            if let Some(e) = execs.get(&pid) {
                let mut d = containerd_shim::protos::shim::oci::ProcessDetails::new();
                d.exec_id = e.clone();
                if let Ok(any) = containerd_shim::util::convert_to_any(Box::new(d)) {
                    info.info = MessageField::some(any);
                }
            }
            r.processes.push(info);
        }
        Ok(r)
    }

    fn pause(&self, _ctx: &TtrpcContext, req: api::PauseRequest) -> TtrpcResult<api::Empty> {
        let (p, siloc, id) = self.process(&req.id, "")?;
        siloc.run(&["pause".into(), id.clone().into()], None)?;
        p.set_status(Status::PAUSED);
        self.send(TaskPaused {
            container_id: id,
            ..Default::default()
        });
        Ok(api::Empty::new())
    }

    fn resume(&self, _ctx: &TtrpcContext, req: api::ResumeRequest) -> TtrpcResult<api::Empty> {
        let (p, siloc, id) = self.process(&req.id, "")?;
        siloc.run(&["resume".into(), id.clone().into()], None)?;
        p.set_status(Status::RUNNING);
        self.send(TaskResumed {
            container_id: id,
            ..Default::default()
        });
        Ok(api::Empty::new())
    }

    fn update(&self, _ctx: &TtrpcContext, req: api::UpdateTaskRequest) -> TtrpcResult<api::Empty> {
        let (_, siloc, id) = self.process(&req.id, "")?;
        let res = req
            .resources
            .as_ref()
            .map(|a| a.value.clone())
            .unwrap_or_default();
        siloc.run(
            &["update".into(), "--resources".into(), "-".into(), id.into()],
            Some(&res),
        )?;
        Ok(api::Empty::new())
    }

    fn stats(
        &self,
        _ctx: &TtrpcContext,
        req: api::StatsRequest,
    ) -> TtrpcResult<api::StatsResponse> {
        let (p, _, _) = self.process(&req.id, "")?;
        let pid = p.state().pid;
        let cg = containerd_shim::cgroup::get_cgroup(pid)?;
        let m = containerd_shim::cgroup::collect_metrics(&cg)?;
        let mut r = api::StatsResponse::new();
        r.stats = MessageField::some(containerd_shim::util::convert_to_any(Box::new(m))?);
        Ok(r)
    }

    fn wait(&self, _ctx: &TtrpcContext, req: api::WaitRequest) -> TtrpcResult<api::WaitResponse> {
        let (p, _, _) = self.process(&req.id, &req.exec_id)?;
        let st = p.wait();
        let mut r = api::WaitResponse::new();
        r.exit_status = st.exit_status;
        r.exited_at = st.exited_at.into();
        Ok(r)
    }

    fn close_io(&self, _ctx: &TtrpcContext, req: api::CloseIORequest) -> TtrpcResult<api::Empty> {
        let (p, _, _) = self.process(&req.id, &req.exec_id)?;
        if let Some(io) = p.io.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            io.close_stdin();
        }
        Ok(api::Empty::new())
    }

    fn resize_pty(
        &self,
        _ctx: &TtrpcContext,
        req: api::ResizePtyRequest,
    ) -> TtrpcResult<api::Empty> {
        let (p, _, _) = self.process(&req.id, &req.exec_id)?;
        if let Some(io) = p.io.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            io.resize(req.width, req.height)?;
        }
        Ok(api::Empty::new())
    }

    fn connect(
        &self,
        _ctx: &TtrpcContext,
        req: api::ConnectRequest,
    ) -> TtrpcResult<api::ConnectResponse> {
        let mut r = api::ConnectResponse::new();
        r.shim_pid = std::process::id();
        r.task_pid = self.tasks().get(&req.id).map_or(0, |t| t.init.state().pid);
        r.version = env!("CARGO_PKG_VERSION").to_string();
        Ok(r)
    }

    fn shutdown(&self, _ctx: &TtrpcContext, _req: api::ShutdownRequest) -> TtrpcResult<api::Empty> {
        // containerd asks after each task's delete; the runc shim stays up while it
        // still serves a container of its group.
        let left = self.tasks().len();
        if left > 0 {
            log::info!("shutdown: {left} task(s) not deleted yet; staying up");
            return Ok(api::Empty::new());
        }
        self.inner.exit.signal();
        Ok(api::Empty::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtime_options_carry_a_config_path() {
        // field 1 type_url "x", field 2 config_path "/etc/s.toml"
        let mut b = vec![0x0a, 1, b'x', 0x12, 11];
        b.extend_from_slice(b"/etc/s.toml");
        assert_eq!(runtime_options(&b), (Some("/etc/s.toml".into()), None));
        assert_eq!(runtime_options(&[0x12, 200]), (None, None));
    }
}
