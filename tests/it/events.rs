//! `siloc events` in runc 1.1.5's shape (issue 19): the stats document's keys, `oom`
//! lines from the container's memory cgroup, runc's errors.

use std::io::{BufRead, BufReader, Read};
use std::process::Stdio;

use serde_json::Value;

use crate::common::{self, Container, TestEnv};

/// Kills and reaps a background `siloc events` when dropped (a failed assertion too).
struct Events(std::process::Child);

impl Drop for Events {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The keys of a JSON object, in order.
fn keys(v: &Value) -> Vec<&str> {
    v.as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

/// `events --stats` prints runc's document: its top-level keys in runc's order, runc's
/// names inside (`cpu.usage.total`, `memory.usage.limit`), the container's limits in
/// bytes; a zero interval and a missing container fail in runc's words.
#[test]
fn stats_are_runc_shaped() {
    needs_root!();
    let env = TestEnv::new();
    let mut b = env.bundle("b", &["sleep", "100"]);
    b.edit(|s| {
        s["linux"]["resources"]["memory"] = serde_json::json!({"limit": 67108864});
        s["linux"]["resources"]["pids"] = serde_json::json!({"limit": 64});
    });
    let id = env.id("stats");
    let _c = Container::start(&env, &b, &id);
    let out = env.ok(&["events", "--stats", &id]);
    assert_eq!(out.lines().count(), 1, "{out}");
    let ev: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(keys(&ev), ["type", "id", "data"]);
    assert_eq!(ev["type"], "stats");
    assert_eq!(ev["id"], id.as_str());
    let d = &ev["data"];
    assert_eq!(
        keys(d),
        [
            "cpu",
            "cpuset",
            "memory",
            "pids",
            "blkio",
            "hugetlb",
            "intel_rdt",
            "network_interfaces"
        ],
        "{d}"
    );
    assert!(d["cpu"]["usage"]["total"].as_u64().unwrap() > 0, "{d}");
    assert!(d["cpu"]["usage"]["kernel"].is_u64(), "{d}");
    assert!(d["cpu"]["usage"]["user"].is_u64(), "{d}");
    assert!(d["cpu"]["throttling"].is_object(), "{d}");
    assert_eq!(d["memory"]["usage"]["limit"], 67108864, "{d}");
    assert!(d["memory"]["usage"]["usage"].as_u64().unwrap() > 0, "{d}");
    assert!(d["memory"]["raw"].is_object(), "{d}");
    assert_eq!(keys(&d["pids"]), ["current", "limit"], "{d}");
    assert_eq!(d["pids"]["limit"], 64, "{d}");
    assert!(d["network_interfaces"].is_null(), "{d}");
    assert_eq!(d["intel_rdt"], serde_json::json!({}), "{d}");
    if !std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        // v1 cpuset files, as runc reads them
        assert!(!d["cpuset"]["cpus"].as_array().unwrap().is_empty(), "{d}");
        assert_eq!(d["cpuset"]["sched_load_balance"], 1, "{d}");
    }

    let err = env.fails(&["events", "--interval", "0s", &id]);
    assert!(
        err.contains("duration interval must be greater than 0"),
        "{err}"
    );
    let err = env.fails(&["events", "--stats", "no-such-container"]);
    assert!(err.contains("container does not exist"), "{err}");
}

/// A container that goes over its memory limit gives an `{"type":"oom","id":…}` line
/// (runc's, no `data`), and the stream ends when the container does.
#[test]
fn oom_kill_gives_an_oom_line() {
    needs_root!();
    let env = TestEnv::new();
    // dd's 64 MiB buffer does not fit under 32 MiB: the OOM killer takes dd
    let mut b = env.bundle(
        "b",
        &[
            "sh",
            "-c",
            "dd if=/dev/zero of=/dev/null bs=64M count=1; sleep 1",
        ],
    );
    b.edit(|s| {
        s["linux"]["resources"]["memory"] =
            serde_json::json!({"limit": 33554432, "swap": 33554432});
    });
    let id = env.id("oom");
    let c = Container::create(&env, &b, &id);
    let child = env
        .cmd(&["events", "--interval", "300ms", &id])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut ev = Events(child);
    let mut out = BufReader::new(ev.0.stdout.take().unwrap());
    // the first stats line: events is watching, now the container may run
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    assert!(first.contains(r#""type":"stats""#), "{first}");
    env.ok(&["start", &c.id]);
    let status = common::wait_within(&mut ev.0, 20);
    assert!(
        status.is_some_and(|s| s.success()),
        "events did not end with the container: {status:?}"
    );
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let oom = format!(r#"{{"type":"oom","id":"{id}"}}"#);
    assert!(
        rest.lines().any(|l| l == oom),
        "no {oom} in:\n{first}{rest}"
    );
    for l in rest.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        assert!(
            v["type"] == "oom" || v["data"]["cpu"]["usage"].is_object(),
            "{l}"
        );
    }
}
