//! `hack/bench-lifecycle`: create, start, wait and delete of a `true` container, many
//! times, for siloc and its peers (runc, crun, youki when installed) in one run.
//!
//! The benchmark acts as containerd's shim does: it is the child subreaper, so the
//! container's init is re-parented to it and it waits for the exit directly instead
//! of polling `state`. Runtimes take turns within each round so that load on the
//! machine spreads over all of them. Prints per-phase medians and siloc's ratio to
//! each peer (median of the whole lifecycle).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;

#[derive(Parser, Debug)]
struct Args {
    /// Lifecycles per runtime
    #[arg(long, default_value_t = 200)]
    n: usize,
    /// The siloc binary
    #[arg(long, default_value = "target/release/siloc")]
    siloc: PathBuf,
    /// Peers to compare with, when installed
    #[arg(long, value_delimiter = ',', default_value = "runc,crun,youki")]
    peers: Vec<String>,
}

/// Per-phase durations of one lifecycle.
#[derive(Default, Clone, Copy)]
struct Sample {
    create: Duration,
    start: Duration,
    wait: Duration,
    delete: Duration,
}

impl Sample {
    fn total(&self) -> Duration {
        self.create + self.start + self.wait + self.delete
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

struct Runtime {
    name: String,
    bin: PathBuf,
    root: PathBuf,
}

impl Runtime {
    fn run(&self, args: &[&str]) -> bool {
        Command::new(&self.bin)
            .arg("--root")
            .arg(&self.root)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    fn lifecycle(&self, bundle: &Path, id: &str, pid_file: &Path) -> Option<Sample> {
        let b = bundle.to_str()?;
        let p = pid_file.to_str()?;
        let t0 = Instant::now();
        if !self.run(&["create", "--bundle", b, "--pid-file", p, id]) {
            return None;
        }
        let t1 = Instant::now();
        let pid: i32 = std::fs::read_to_string(pid_file)
            .ok()?
            .trim()
            .parse()
            .ok()?;
        if !self.run(&["start", id]) {
            let _ = self.run(&["delete", "--force", id]);
            return None;
        }
        let t2 = Instant::now();
        // As subreaper we are the init's parent by now.
        let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
        let t3 = Instant::now();
        let ok = self.run(&["delete", id]);
        let t4 = Instant::now();
        let _ = std::fs::remove_file(pid_file);
        ok.then_some(Sample {
            create: t1 - t0,
            start: t2 - t1,
            wait: t3 - t2,
            delete: t4 - t3,
        })
    }
}

fn make_bundle(dir: &Path, siloc: &Path) {
    let rootfs = dir.join("rootfs");
    for d in ["bin", "proc", "sys", "dev", "tmp", "etc"] {
        std::fs::create_dir_all(rootfs.join(d)).expect("mkdir");
    }
    std::fs::copy("/bin/busybox", rootfs.join("bin/busybox")).expect("copy /bin/busybox");
    std::os::unix::fs::symlink("busybox", rootfs.join("bin/true")).expect("symlink");
    let st = Command::new(siloc)
        .args(["spec", "--bundle"])
        .arg(dir)
        .status()
        .expect("siloc spec");
    assert!(st.success(), "siloc spec failed");
    let p = dir.join("config.json");
    let mut spec: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&p).expect("read")).expect("json");
    spec["process"]["terminal"] = false.into();
    spec["process"]["args"] = serde_json::json!(["true"]);
    std::fs::write(&p, serde_json::to_vec_pretty(&spec).expect("json")).expect("write");
}

fn main() {
    let args = Args::parse();
    if !nix::unistd::geteuid().is_root() {
        eprintln!("bench-lifecycle: needs root");
        std::process::exit(1);
    }
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let work = tempfile::Builder::new()
        .prefix("siloc-bench-lifecycle-")
        .tempdir_in("/var/tmp")
        .expect("work dir");
    let bundle = work.path().join("bundle");
    make_bundle(&bundle, &args.siloc);
    let siloc = std::fs::canonicalize(&args.siloc).expect("siloc binary");
    let mut runtimes = vec![Runtime {
        name: "siloc".into(),
        bin: siloc,
        root: work.path().join("root-siloc"),
    }];
    for peer in &args.peers {
        match which(peer) {
            Some(bin) => runtimes.push(Runtime {
                name: peer.clone(),
                bin,
                root: work.path().join(format!("root-{peer}")),
            }),
            None => println!("note: {peer} is not installed; skipped"),
        }
    }
    let mut samples: Vec<Vec<Sample>> = vec![Vec::new(); runtimes.len()];
    let mut failures = vec![0usize; runtimes.len()];
    let pid_file = work.path().join("pid");
    // Warm the page cache and each runtime's first-use paths.
    for r in &runtimes {
        let _ = r.lifecycle(&bundle, &format!("warm-{}", r.name), &pid_file);
    }
    let t0 = Instant::now();
    for i in 0..args.n {
        for (k, r) in runtimes.iter().enumerate() {
            match r.lifecycle(&bundle, &format!("bench-{}-{i}", r.name), &pid_file) {
                Some(s) => samples[k].push(s),
                None => failures[k] += 1,
            }
        }
        if (i + 1) % 20 == 0 {
            eprintln!("  {}/{} rounds, {:.0?}", i + 1, args.n, t0.elapsed());
        }
    }
    println!(
        "\n{:<8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8}",
        "runtime", "create ms", "start ms", "wait ms", "delete ms", "total ms", "failed"
    );
    let totals: Vec<Duration> = samples
        .iter()
        .map(|s| median(s.iter().map(Sample::total).collect()))
        .collect();
    for (k, r) in runtimes.iter().enumerate() {
        let s = &samples[k];
        let m = |f: fn(&Sample) -> Duration| ms(median(s.iter().map(f).collect()));
        println!(
            "{:<8} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>8}",
            r.name,
            m(|x| x.create),
            m(|x| x.start),
            m(|x| x.wait),
            m(|x| x.delete),
            ms(totals[k]),
            failures[k]
        );
    }
    println!();
    for (k, r) in runtimes.iter().enumerate().skip(1) {
        println!(
            "lifecycle median (create+start+wait+delete of `true`): siloc {:.2} ms, {} {:.2} ms, ratio {:.2}",
            ms(totals[0]),
            r.name,
            ms(totals[k]),
            ms(totals[0]) / ms(totals[k]).max(f64::MIN_POSITIVE)
        );
    }
}
