//! `siloc scenario`: a tiny scenario end to end with siloc and runc (seconds, small
//! files), every report format, `report DIR`, Ctrl-C then `--resume`, and bad
//! scenario files. Container tests need root and skip loudly without it.

use crate::common;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::TestEnv;

/// Scenario runs share the disk and drop the page cache: one at a time.
static SERIAL: Mutex<()> = Mutex::new(());

const REPORTS: [&str; 7] = [
    "report.txt",
    "report.md",
    "report.csv",
    "report.json",
    "iops-drop.svg",
    "p99.svg",
    "tradeoff.svg",
];

/// A scenario of `workloads` x siloc and runc, finishing in seconds.
fn tiny(env: &TestEnv, duration: u32, workloads: &[&str]) -> PathBuf {
    let mut t = format!(
        "[scenario]\ntarget = {:?}\nduration = {duration}\nramp = 0\nwarmup = 1\n\
         [victim]\nfile_size = \"16M\"\n\
         [neighbours]\ncount = 1\nsizes = [\"32M\"]\n\
         [[runtime]]\nname = \"siloc\"\nkind = \"siloc\"\n\
         [[runtime]]\nname = \"runc\"\nkind = \"runc\"\n\
         [[runtime]]\nname = \"absent\"\nkind = \"youki\"\npath = \"no-such-youki\"\n",
        env.dir.path().join("target").display().to_string()
    );
    for w in workloads {
        let (rw, bs) = match *w {
            "seqread" => ("read", "1M"),
            "seqwrite" => ("write", "1M"),
            _ => ("randrw", "4K"),
        };
        t.push_str(&format!(
            "[[workload]]\nname = \"{w}\"\nrw = \"{rw}\"\nbs = \"{bs}\"\n"
        ));
    }
    let p = env.dir.path().join("tiny.toml");
    std::fs::write(&p, t).expect("write scenario");
    p
}

/// What a run must not leave: its state dir (containers' state roots, journal, lock),
/// work directories under the target, cgroups.
fn leftovers(env: &TestEnv) -> Vec<String> {
    let mut left = Vec::new();
    let state = env.root.join("scenario");
    if let Ok(rd) = std::fs::read_dir(&state) {
        left.extend(rd.flatten().map(|e| format!("{}", e.path().display())));
    }
    if let Ok(rd) = std::fs::read_dir(env.dir.path().join("target")) {
        left.extend(
            rd.flatten()
                .map(|e| format!("target entry {:?}", e.file_name())),
        );
    }
    if let Ok(rd) = std::fs::read_dir("/sys/fs/cgroup") {
        for ctrl in rd.flatten() {
            if let Ok(cg) = std::fs::read_dir(ctrl.path().join("siloc-scenario")) {
                left.extend(
                    cg.flatten()
                        .filter(|e| e.file_name().to_string_lossy().starts_with("siloc-scn-"))
                        .map(|e| format!("cgroup {}", e.path().display())),
                );
            }
        }
    }
    left.extend(
        common::mounts_under(env.dir.path())
            .into_iter()
            .map(|m| format!("mount {m}")),
    );
    left
}

fn results(out: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(out.join("results.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("results line is JSON"))
        .collect()
}

#[test]
fn tiny_scenario_end_to_end_with_every_report() {
    needs_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = TestEnv::new();
    let file = tiny(&env, 1, &["randrw", "seqread"]);
    let out = env.dir.path().join("out");
    let o = env.siloc(&[
        "scenario",
        "run",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "scenario run failed: {stdout}{stderr}");

    let cells = results(&out);
    assert_eq!(cells.len(), 4, "{cells:?}");
    for c in &cells {
        assert!(c["error"].is_null(), "cell failed: {c}");
        for phase in ["baseline", "noise"] {
            let iops = c[phase]["fio"]["total"]["iops"].as_f64().unwrap();
            let p99 = c[phase]["fio"]["total"]["clat_p99_us"].as_f64().unwrap();
            assert!(iops > 0.0 && p99 > 0.0, "{phase} of {c}");
            assert!(c[phase]["disk"]["reads"].as_u64().is_some());
        }
        // O_DIRECT honoured: none of the victim's file stayed in the page cache.
        let cached = &c["baseline"]["victim_file_cached"];
        assert!(
            cached.is_null() || cached == 0,
            "runc/siloc left the file cached: {c}"
        );
        // The neighbour wrote while the victim ran: the disk saw writes.
        assert!(
            c["noise"]["disk"]["write_bytes"].as_u64().unwrap() > 0,
            "{c}"
        );
    }
    for f in REPORTS {
        let p = out.join(f);
        assert!(
            std::fs::metadata(&p).map(|m| m.len() > 0).unwrap_or(false),
            "{f} missing"
        );
    }
    // The terminal table is what the command printed.
    let txt = std::fs::read_to_string(out.join("report.txt")).unwrap();
    assert!(stdout.contains(txt.lines().next().unwrap()));
    for needle in [
        "randrw: randrw 4K",
        "seqread: read 1M",
        "siloc ",
        "runc ",
        "IOPS noisy",
        "p99 ms",
        "skipped absent: not installed",
    ] {
        assert!(txt.contains(needle), "report.txt lacks {needle:?}:\n{txt}");
    }
    let csv = std::fs::read_to_string(out.join("report.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4, "{csv}");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    assert_eq!(json["rows"].as_array().unwrap().len(), 4);
    assert!(
        std::fs::read_to_string(out.join("iops-drop.svg"))
            .unwrap()
            .contains("runc")
    );
    assert!(leftovers(&env).is_empty(), "{:?}", leftovers(&env));

    // `report DIR` rebuilds the same report from the saved results.
    for f in REPORTS {
        std::fs::remove_file(out.join(f)).unwrap();
    }
    let again = env.ok(&["scenario", "report", out.to_str().unwrap()]);
    assert_eq!(
        std::fs::read_to_string(out.join("report.txt")).unwrap(),
        txt
    );
    assert!(again.contains("IOPS noisy"));
    assert!(out.join("p99.svg").exists() && out.join("tradeoff.svg").exists());

    // The same directory again without --resume: refused, results untouched.
    let err = env.fails(&[
        "scenario",
        "run",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(err.contains("--resume"), "{err}");
    assert_eq!(results(&out).len(), 4);
}

#[test]
fn ctrl_c_leaves_nothing_and_resume_finishes() {
    needs_root!();
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = TestEnv::new();
    let file = tiny(&env, 2, &["randrw", "seqwrite"]);
    let out = env.dir.path().join("out");
    let log = std::fs::File::create(env.dir.path().join("run.log")).unwrap();
    let mut child = env
        .cmd(&[
            "scenario",
            "run",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .expect("spawn siloc");
    // Interrupt in the middle of the second cell, containers running.
    let end = Instant::now() + Duration::from_secs(180);
    while results(&out).is_empty() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_secs(3));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    let log = std::fs::read_to_string(env.dir.path().join("run.log")).unwrap();
    assert_eq!(status.code(), Some(130), "{log}");
    assert!(log.contains("--resume"), "{log}");
    let done = results(&out).len();
    assert!((1..4).contains(&done), "{done} cells done at Ctrl-C: {log}");
    assert!(leftovers(&env).is_empty(), "{:?}", leftovers(&env));

    let o = env.siloc(&[
        "scenario",
        "run",
        "--resume",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "resume failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let cells = results(&out);
    let mut keys: Vec<String> = cells
        .iter()
        .map(|c| format!("{}/{}", c["key"]["runtime"], c["key"]["workload"]))
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!((cells.len(), keys.len()), (4, 4), "{keys:?}");
    assert!(leftovers(&env).is_empty(), "{:?}", leftovers(&env));
}

#[test]
fn bad_scenario_files_name_line_and_key() {
    let env = TestEnv::new();
    let cwd = env.dir.path().join("cwd");
    std::fs::create_dir_all(&cwd).unwrap();
    let file = tiny(&env, 1, &["randrw"]);
    let text = std::fs::read_to_string(&file).unwrap();
    for (change, line, key) in [
        (
            text.replace("file_size = \"16M\"", "file_size = \"16Q\""),
            "line 7",
            "victim.file_size",
        ),
        (
            text.replace("kind = \"runc\"", "kind = \"rkt\""),
            "line 16",
            "runtime[2].kind",
        ),
        (
            text.replace("bs = \"4K\"", "bs = \"4K\"\niodepth = 0"),
            "line 25",
            "workload[1].iodepth",
        ),
    ] {
        let bad = env.dir.path().join("bad.toml");
        std::fs::write(&bad, change).unwrap();
        let o = env
            .cmd(&["scenario", "run", bad.to_str().unwrap()])
            .current_dir(&cwd)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains(line) && err.contains(key) && err.contains("bad.toml"),
            "{err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "one-line message: {err}");
    }
    assert_eq!(
        std::fs::read_dir(&cwd).unwrap().count(),
        0,
        "nothing may be left"
    );
    let o = env
        .cmd(&["scenario", "run", "/nonexistent/s.toml"])
        .current_dir(&cwd)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/s.toml"));
    let shown = env.ok(&["scenario", "show-default"]);
    assert!(shown.contains("[[workload]]") && shown.contains("[quick]"));
}
