//! Shared helpers for the integration tests: a private state root and data root per
//! test, busybox bundles made from the host's busybox-static, and guards that delete
//! containers and unmount leftovers also when a test fails.
//!
//! Tests that run containers need root: they call [`needs_root!`], which prints a
//! loud SKIPPED line and returns when not root.
#![allow(dead_code)]

pub mod oci;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// Returns from the test with a loud SKIPPED line unless running as root with
/// busybox-static installed.
#[macro_export]
macro_rules! needs_root {
    () => {
        if let Some(why) = $crate::common::missing_prerequisite() {
            eprintln!("SKIPPED {}: {}", module_path!(), why);
            return;
        }
    };
}

/// Returns from the test with a loud SKIPPED line unless siloc was built with the
/// `test-hooks` cargo feature (`hack/test` builds with it): the test needs one of the
/// `SILOC_TEST_*` or `SILOC_UNSAFE_NO_EXE_GUARD` hooks.
#[macro_export]
macro_rules! needs_test_hooks {
    () => {
        if !cfg!(feature = "test-hooks") {
            eprintln!(
                "SKIPPED {}: needs the test-hooks feature (cargo test --features test-hooks)",
                module_path!()
            );
            return;
        }
    };
}

/// The static busybox the bundles are built from (Debian's busybox-static).
pub const BUSYBOX: &str = "/bin/busybox";

/// Why container tests cannot run here, if they cannot.
pub fn missing_prerequisite() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("needs root".into());
    }
    let static_bb = Command::new("file")
        .arg(BUSYBOX)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).contains("statically linked"))
        .unwrap_or(true);
    if !Path::new(BUSYBOX).exists() || !static_bb {
        return Some(format!(
            "needs a static {BUSYBOX} (apt-get install busybox-static)"
        ));
    }
    None
}

/// The siloc binary cargo built for this test run.
pub fn siloc_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_siloc"))
}

/// A private state root, data root, ID pool and config for one test. Dropping it
/// deletes every container still in the state root (`delete --force`), unmounts
/// anything left under its directories, and removes them.
pub struct TestEnv {
    pub dir: tempfile::TempDir,
    pub root: PathBuf,
    pub data: PathBuf,
    pub config: PathBuf,
    /// `[userns] pool_dir`: private, so tests never touch the host's pool (nor each
    /// other's), unless made with [`TestEnv::sharing_pool_of`].
    pub pool: PathBuf,
}

impl TestEnv {
    /// A new environment with an empty host config (data root and ID pool inside the
    /// temp dir).
    pub fn new() -> TestEnv {
        Self::with_config("")
    }

    /// A new environment whose config file has `extra` appended (TOML).
    pub fn with_config(extra: &str) -> TestEnv {
        Self::make(extra, None)
    }

    /// A second state root (its own data root, and a config with `extra` appended)
    /// whose containers take their ranges from `other`'s ID pool, as podman's and
    /// containerd's roots share the host's. Declare it after `other`, so it is dropped
    /// (its containers deleted) first.
    pub fn sharing_pool_of(other: &TestEnv, extra: &str) -> TestEnv {
        Self::make(extra, Some(&other.pool))
    }

    fn make(extra: &str, pool: Option<&Path>) -> TestEnv {
        // On disk, not tmpfs: overlayfs upper dirs and the I/O features need a disk.
        let dir = tempfile::Builder::new()
            .prefix("siloc-test-")
            .tempdir_in("/var/tmp")
            .expect("temp dir");
        let root = dir.path().join("state");
        let data = dir.path().join("data");
        let config = dir.path().join("siloc.toml");
        let pool = pool.map_or_else(|| dir.path().join("idpool"), Path::to_path_buf);
        let pool_line = format!("pool_dir = {:?}\n", pool.display().to_string());
        // One [userns] table: the pool line joins the caller's when it has one, and a
        // caller's own pool_dir wins.
        let extra = match extra.find("[userns]\n") {
            _ if extra.contains("pool_dir") => extra.to_string(),
            Some(i) => format!("{}{pool_line}{}", &extra[..i + 9], &extra[i + 9..]),
            None => format!("{extra}\n[userns]\n{pool_line}"),
        };
        std::fs::write(
            &config,
            format!("data_root = {:?}\n{extra}", data.display().to_string()),
        )
        .expect("write config");
        TestEnv {
            dir,
            root,
            data,
            config,
            pool,
        }
    }

    /// The ID pool table, `<pool>/ranges.json`, as JSON (`{"entries": []}` when absent
    /// or not JSON).
    pub fn pool_table(&self) -> Value {
        std::fs::read(self.pool.join("ranges.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_else(|| serde_json::json!({"entries": []}))
    }

    /// The ids holding entries of this state root in the ID pool.
    pub fn pool_holders(&self) -> Vec<String> {
        let root = std::fs::canonicalize(&self.root).unwrap_or_else(|_| self.root.clone());
        self.pool_table()["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["root"].as_str() == root.to_str())
            .filter_map(|e| e["id"].as_str().map(str::to_string))
            .collect()
    }

    /// `siloc --root R --config C <args>`, output captured.
    pub fn siloc(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("run siloc")
    }

    /// The command for `siloc --root R --config C <args>`, to add stdin, env, etc.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(siloc_bin());
        c.arg("--root")
            .arg(&self.root)
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .stdin(Stdio::null());
        c
    }

    /// `siloc --root R --config C` as one shell word list, for tests that run siloc
    /// from a script (paths without spaces: the env's temp dirs).
    pub fn siloc_sh(&self) -> String {
        format!(
            "{} --root {} --config {}",
            siloc_bin().display(),
            self.root.display(),
            self.config.display()
        )
    }

    /// Runs siloc and panics with its stderr unless it succeeds; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.siloc(args);
        assert!(
            o.status.success(),
            "siloc {args:?} failed ({}): {}{}",
            o.status,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Runs siloc, expects failure, returns stderr.
    pub fn fails(&self, args: &[&str]) -> String {
        let o = self.siloc(args);
        assert!(
            !o.status.success(),
            "siloc {args:?} should have failed: {}",
            String::from_utf8_lossy(&o.stdout)
        );
        String::from_utf8_lossy(&o.stderr).into_owned()
    }

    /// A container id unique to this environment: cgroup paths are named by id, so
    /// tests running in parallel must not share ids.
    pub fn id(&self, name: &str) -> String {
        let tag = self
            .dir
            .path()
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("t");
        format!("{name}-{}", tag.trim_start_matches("siloc-test-"))
    }

    /// Runs a siloc command whose container inherits stdio (`create`, `run -d`,
    /// `exec -d`): a pipe would stay open in the container, so output goes to files.
    /// Returns (success, stdout, stderr).
    pub fn detached(&self, args: &[&str]) -> (bool, String, String) {
        let out = tempfile::NamedTempFile::new().expect("temp file");
        let err = tempfile::NamedTempFile::new().expect("temp file");
        let status = self
            .cmd(args)
            .stdout(out.reopen().expect("reopen"))
            .stderr(err.reopen().expect("reopen"))
            .status()
            .expect("run siloc");
        let read =
            |f: &tempfile::NamedTempFile| std::fs::read_to_string(f.path()).unwrap_or_default();
        (status.success(), read(&out), read(&err))
    }

    /// `siloc state ID` as JSON.
    pub fn state(&self, id: &str) -> Value {
        serde_json::from_str(&self.ok(&["state", id])).expect("state JSON")
    }

    /// A busybox bundle under this environment, running `args`.
    pub fn bundle(&self, name: &str, args: &[&str]) -> Bundle {
        Bundle::busybox(&self.dir.path().join(name), args)
    }

    /// Asserts that this env left nothing behind ([`Self::leftovers`]) and that no
    /// process, mount or cgroup of container `id` remains ([`traces_of`]).
    pub fn assert_no_trace(&self, id: &str) {
        assert!(self.leftovers().is_empty(), "{:?}", self.leftovers());
        assert!(traces_of(id).is_empty(), "{:?}", traces_of(id));
    }

    /// Whether anything siloc made is still here: containers, records, this state
    /// root's ID pool entries.
    pub fn leftovers(&self) -> Vec<String> {
        let mut left = Vec::new();
        // siloc keeps `.siloc/containers` (as the state root): what is in it counts.
        let keep = |e: &std::fs::DirEntry, name: &str| e.file_name() == name;
        if let Ok(rd) = std::fs::read_dir(&self.root) {
            left.extend(
                rd.flatten()
                    .filter(|e| !keep(e, ".siloc"))
                    .map(|e| format!("state root entry {:?}", e.file_name())),
            );
        }
        if let Ok(rd) = std::fs::read_dir(self.root.join(".siloc")) {
            left.extend(
                rd.flatten()
                    .filter(|e| !keep(e, "containers"))
                    .map(|e| format!("state root entry .siloc/{:?}", e.file_name())),
            );
        }
        if let Ok(rd) = std::fs::read_dir(self.root.join(".siloc/containers")) {
            left.extend(
                rd.flatten()
                    .map(|e| format!("record dir {:?}", e.file_name())),
            );
        }
        left.extend(
            mounts_under(self.dir.path())
                .into_iter()
                .map(|m| format!("mount {m}")),
        );
        if let Ok(rd) = std::fs::read_dir(self.data.join("containers")) {
            left.extend(rd.flatten().map(|e| format!("data dir {:?}", e.path())));
        }
        left.extend(
            self.pool_holders()
                .into_iter()
                .map(|id| format!("ID pool entry of {id}")),
        );
        left
    }
}

impl Drop for TestEnv {
    fn drop(&mut self) {
        let ids = self.siloc(&["list", "-q"]);
        for id in String::from_utf8_lossy(&ids.stdout).lines() {
            let _ = self.siloc(&["delete", "--force", id]);
        }
        // Records of crashed creates have no libcontainer dir, so list misses them.
        if let Ok(rd) = std::fs::read_dir(self.root.join(".siloc/containers")) {
            for e in rd.flatten() {
                let _ = self.siloc(&["delete", "--force", &e.file_name().to_string_lossy()]);
            }
        }
        for m in mounts_under(self.dir.path()).iter().rev() {
            let _ = nix::mount::umount2(m.as_str(), nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

/// Waits up to `secs` seconds for `child` (polled every 50 ms): its exit status, or
/// None when it still runs, for the caller to end it its own way (a hang check).
pub fn wait_within(child: &mut std::process::Child, secs: u64) -> Option<std::process::ExitStatus> {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if let Some(s) = child.try_wait().expect("wait for siloc") {
            return Some(s);
        }
        if std::time::Instant::now() > end {
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// What container `id` left on the host: its default cgroup (`/siloc-<id>` in any
/// hierarchy) and processes whose command line names it.
pub fn traces_of(id: &str) -> Vec<String> {
    let mut left = Vec::new();
    let cg = format!("siloc-{id}");
    if let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") {
        for h in rd.flatten() {
            for p in [h.path().join(&cg), Path::new("/sys/fs/cgroup").join(&cg)] {
                if p.exists() {
                    left.push(format!("cgroup {}", p.display()));
                }
            }
        }
    }
    let me = std::process::id().to_string();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if !name.chars().all(|c| c.is_ascii_digit()) || name == me {
                continue;
            }
            let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.split(' ').any(|w| w == id) {
                left.push(format!("process {name}: {cmd}"));
            }
        }
    }
    left.sort();
    left.dedup();
    left
}

/// Mount points at or under `dir`, in mountinfo order.
pub fn mounts_under(dir: &Path) -> Vec<String> {
    siloc::sys::mountinfo::read(None)
        .unwrap_or_default()
        .into_iter()
        .map(|m| m.mount_point.to_string_lossy().into_owned())
        .filter(|m| m.starts_with(&*dir.to_string_lossy()))
        .collect()
}

/// A bundle directory: `config.json` (from `siloc spec`, terminal off) and a rootfs.
pub struct Bundle {
    pub dir: PathBuf,
    pub spec: Value,
}

impl Bundle {
    /// A busybox rootfs (busybox + applet symlinks + the usual empty dirs) and a
    /// config running `args`.
    pub fn busybox(dir: &Path, args: &[&str]) -> Bundle {
        let rootfs = dir.join("rootfs");
        make_busybox_rootfs(&rootfs);
        Self::with_rootfs(dir, args)
    }

    /// A bundle whose rootfs the caller provides (or mounts) at `dir/rootfs`.
    pub fn with_rootfs(dir: &Path, args: &[&str]) -> Bundle {
        std::fs::create_dir_all(dir.join("rootfs")).expect("rootfs dir");
        let out = Command::new(siloc_bin())
            .args(["spec", "--bundle"])
            .arg(dir)
            .output()
            .expect("siloc spec");
        assert!(out.status.success(), "siloc spec: {out:?}");
        let text = std::fs::read_to_string(dir.join("config.json")).expect("config.json");
        let mut spec: Value = serde_json::from_str(&text).expect("spec JSON");
        spec["process"]["terminal"] = Value::Bool(false);
        spec["process"]["args"] = args.iter().map(|a| Value::from(*a)).collect();
        let b = Bundle {
            dir: dir.to_path_buf(),
            spec,
        };
        b.write();
        b
    }

    /// Changes the spec and writes it back.
    pub fn edit(&mut self, f: impl FnOnce(&mut Value)) -> &mut Self {
        f(&mut self.spec);
        self.write();
        self
    }

    /// Sets an annotation.
    pub fn annotate(&mut self, key: &str, value: &str) -> &mut Self {
        self.edit(|s| {
            if !s["annotations"].is_object() {
                s["annotations"] = serde_json::json!({});
            }
            s["annotations"][key] = Value::from(value);
        })
    }

    pub fn write(&self) {
        std::fs::write(
            self.dir.join("config.json"),
            serde_json::to_vec_pretty(&self.spec).expect("serialize"),
        )
        .expect("write config.json");
    }

    pub fn path(&self) -> &str {
        self.dir.to_str().expect("utf-8 path")
    }
}

/// Fills `rootfs` with a static busybox and its applets.
pub fn make_busybox_rootfs(rootfs: &Path) {
    for d in ["bin", "proc", "sys", "dev", "tmp", "etc", "root", "var"] {
        std::fs::create_dir_all(rootfs.join(d)).expect("mkdir");
    }
    std::fs::copy(BUSYBOX, rootfs.join("bin/busybox")).expect("copy busybox");
    let list = Command::new(BUSYBOX)
        .arg("--list")
        .output()
        .expect("busybox --list");
    for applet in String::from_utf8_lossy(&list.stdout).lines() {
        let _ = std::os::unix::fs::symlink("busybox", rootfs.join("bin").join(applet));
    }
    std::fs::write(
        rootfs.join("etc/passwd"),
        "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n",
    )
    .expect("passwd");
    std::fs::write(rootfs.join("etc/group"), "root:x:0:\nnogroup:x:65534:\n").expect("group");
}

/// `siloc run --bundle B ID` in the foreground: (exit code, stdout, stderr).
pub fn run(env: &TestEnv, b: &Bundle, name: &str) -> (i32, String, String) {
    let o = env.siloc(&["run", "--bundle", b.path(), &env.id(name)]);
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Deletes container `id` when dropped (also when the test panics).
pub struct Container<'a> {
    pub env: &'a TestEnv,
    pub id: String,
}

impl<'a> Container<'a> {
    /// `siloc create --bundle B ID`, panicking with stderr on failure.
    pub fn create(env: &'a TestEnv, bundle: &Bundle, id: &str) -> Container<'a> {
        let (ok, _, err) = env.detached(&["create", "--bundle", bundle.path(), id]);
        assert!(ok, "siloc create {id} failed: {err}");
        Container {
            env,
            id: id.to_string(),
        }
    }

    /// Creates and starts.
    pub fn start(env: &'a TestEnv, bundle: &Bundle, id: &str) -> Container<'a> {
        let c = Self::create(env, bundle, id);
        env.ok(&["start", id]);
        c
    }

    /// `siloc exec ID args...`: (exit code, stdout, stderr).
    pub fn exec(&self, args: &[&str]) -> (i32, String, String) {
        let mut a = vec!["exec", self.id.as_str()];
        a.extend_from_slice(args);
        let o = self.env.siloc(&a);
        (
            o.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    /// Waits (up to `secs`) until the container's status is `status`.
    pub fn wait_status(&self, status: &str, secs: u64) -> bool {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        while std::time::Instant::now() < end {
            if self.env.state(&self.id)["status"] == status {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        false
    }
}

impl Drop for Container<'_> {
    fn drop(&mut self) {
        let _ = self.env.siloc(&["delete", "--force", &self.id]);
    }
}

/// Accepts one connection on `l` and returns the first fd sent on it with SCM_RIGHTS
/// (a pty master on a `--console-socket`, a pidfd on a `--pidfd-socket`, as runc
/// sends them). Panics naming `what` when the message carries no fd.
pub fn accept_fd(l: &std::os::unix::net::UnixListener, what: &str) -> std::os::fd::OwnedFd {
    accept_fd_with_data(l, what).0
}

/// [`accept_fd`], also returning the message's bytes (up to 64 KiB: the seccomp
/// agent's container state JSON rides with its fd).
pub fn accept_fd_with_data(
    l: &std::os::unix::net::UnixListener,
    what: &str,
) -> (std::os::fd::OwnedFd, Vec<u8>) {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
    let (conn, _) = l.accept().unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut iov = [std::io::IoSliceMut::new(&mut buf)];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let msg = recvmsg::<()>(
        conn.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::empty(),
    )
    .unwrap();
    let fd = msg
        .cmsgs()
        .unwrap()
        .find_map(|c| match c {
            ControlMessageOwned::ScmRights(fds) => fds.first().copied(),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no fd on the {what}"));
    let n = msg.bytes;
    buf.truncate(n);
    // SAFETY: SCM_RIGHTS just installed this fd; the test owns it.
    (unsafe { OwnedFd::from_raw_fd(fd) }, buf)
}
