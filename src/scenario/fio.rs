//! The victim's workload engine: fio's command line for one workload, and its JSON
//! output (`--output-format=json`) reduced to the figures the report needs.
//!
//! Shapes follow fio 3.x's JSON: `jobs[].{read,write,mixed}.{io_bytes, bw_bytes,
//! iops, runtime, clat_ns{mean, percentile{"99.000000": ns}}}`. The runner asks for
//! `unified_rw_reporting=both`, so mixed workloads also carry a `mixed` section whose
//! percentiles cover reads and writes together (fio(1) "unified_rw_reporting").

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::file::{Scenario, Workload};

/// Errors reading fio's JSON output.
#[derive(Debug, thiserror::Error)]
pub enum FioError {
    #[error("fio output {what}: no JSON object (fio said: {head})")]
    NoJson { what: String, head: String },
    #[error("fio output {what}: {source}")]
    Json {
        what: String,
        source: serde_json::Error,
    },
    #[error("fio output {what}: {field} is missing or not a number")]
    Field { what: String, field: String },
    #[error("fio output {what}: fio reported error {code} for job {job}")]
    JobError {
        what: String,
        job: String,
        code: i64,
    },
}

/// The container path of the victim's data file.
pub const VICTIM_FILE: &str = "/work/victim.dat";

/// fio's arguments for `w`, measuring `duration` seconds after `ramp`, writing JSON to
/// `output` (a path inside the container). `direct` and `iodepth` come from the
/// workload; the file size from the scenario (the file is laid out beforehand, so
/// fio does not lay it out inside the measured phase).
pub fn args(s: &Scenario, w: &Workload, output: &str) -> Vec<String> {
    let mut a = vec![
        "fio".to_string(),
        format!("--name={}", w.name),
        format!("--filename={VICTIM_FILE}"),
        format!("--size={}", s.victim_file_size),
        format!("--rw={}", w.rw.as_fio()),
        format!("--bs={}", w.bs),
        format!("--iodepth={}", w.iodepth),
        format!("--ioengine={}", s.ioengine),
        format!("--direct={}", u8::from(w.direct)),
        "--time_based=1".to_string(),
        format!("--runtime={}", s.duration),
        format!("--ramp_time={}", s.ramp),
        "--unified_rw_reporting=both".to_string(),
        "--output-format=json".to_string(),
        format!("--output={output}"),
    ];
    if let Some(m) = w.rwmixread {
        a.push(format!("--rwmixread={m}"));
    }
    a
}

/// Figures of one direction (or of reads and writes together): counts, bandwidth in
/// bytes/s, IOPS, completion latency in µs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Direction {
    pub io_bytes: u64,
    pub bw_bytes: f64,
    pub iops: f64,
    pub clat_mean_us: f64,
    pub clat_p50_us: f64,
    pub clat_p99_us: f64,
    pub clat_p999_us: f64,
}

/// What the report takes from one fio run (summed over jobs; the runner runs one).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FioFigures {
    pub read: Direction,
    pub write: Direction,
    /// Reads and writes together: IOPS and bandwidth summed; latency from fio's
    /// `mixed` section when present, else from the busier direction.
    pub total: Direction,
    /// Measured time in ms (fio's `runtime`, ramp excluded).
    pub runtime_ms: u64,
}

/// Parses fio's JSON output; `what` names it in errors. Text fio printed before the
/// JSON (warnings go to the same stream) is skipped.
pub fn parse(text: &str, what: &str) -> Result<FioFigures, FioError> {
    let start = text
        .find("\n{")
        .map(|i| i + 1)
        .or_else(|| if text.starts_with('{') { Some(0) } else { None });
    let Some(start) = start else {
        return Err(FioError::NoJson {
            what: what.to_string(),
            head: text
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(200)
                .collect(),
        });
    };
    let v: Value = serde_json::from_str(&text[start..]).map_err(|source| FioError::Json {
        what: what.to_string(),
        source,
    })?;
    let field = |f: &str| FioError::Field {
        what: what.to_string(),
        field: f.to_string(),
    };
    let jobs = v["jobs"].as_array().ok_or_else(|| field("jobs"))?;
    if jobs.is_empty() {
        return Err(field("jobs[0]"));
    }
    let mut out = FioFigures::default();
    let mut mixed_seen = false;
    for job in jobs {
        let name = job["jobname"].as_str().unwrap_or("?").to_string();
        let code = job["error"].as_i64().unwrap_or(0);
        if code != 0 {
            return Err(FioError::JobError {
                what: what.to_string(),
                job: name,
                code,
            });
        }
        let read = direction(&job["read"]).ok_or_else(|| field("jobs[].read"))?;
        let write = direction(&job["write"]).ok_or_else(|| field("jobs[].write"))?;
        add(&mut out.read, &read);
        add(&mut out.write, &write);
        if let Some(m) = direction(&job["mixed"]) {
            mixed_seen = true;
            add(&mut out.total, &m);
        }
        let rt = job["read"]["runtime"]
            .as_u64()
            .unwrap_or(0)
            .max(job["write"]["runtime"].as_u64().unwrap_or(0));
        out.runtime_ms = out.runtime_ms.max(rt);
    }
    if !mixed_seen {
        // Older fio or no unified reporting: sum the counts, latency of the busier side.
        let busier = if out.read.io_bytes >= out.write.io_bytes {
            &out.read
        } else {
            &out.write
        };
        out.total = Direction {
            io_bytes: out.read.io_bytes + out.write.io_bytes,
            bw_bytes: out.read.bw_bytes + out.write.bw_bytes,
            iops: out.read.iops + out.write.iops,
            ..busier.clone()
        };
    }
    Ok(out)
}

/// One direction's figures; `None` when the section is missing.
fn direction(d: &Value) -> Option<Direction> {
    if !d.is_object() {
        return None;
    }
    let num = |v: &Value| v.as_f64().unwrap_or(0.0);
    let pct = |p: &str| num(&d["clat_ns"]["percentile"][p]) / 1000.0;
    Some(Direction {
        io_bytes: d["io_bytes"].as_u64().unwrap_or(0),
        bw_bytes: num(&d["bw_bytes"]),
        iops: num(&d["iops"]),
        clat_mean_us: num(&d["clat_ns"]["mean"]) / 1000.0,
        clat_p50_us: pct("50.000000"),
        clat_p99_us: pct("99.000000"),
        clat_p999_us: pct("99.900000"),
    })
}

/// Adds a job's figures: counts and rates sum; latencies keep the worse job's.
fn add(acc: &mut Direction, d: &Direction) {
    acc.io_bytes += d.io_bytes;
    acc.bw_bytes += d.bw_bytes;
    acc.iops += d.iops;
    acc.clat_mean_us = acc.clat_mean_us.max(d.clat_mean_us);
    acc.clat_p50_us = acc.clat_p50_us.max(d.clat_p50_us);
    acc.clat_p99_us = acc.clat_p99_us.max(d.clat_p99_us);
    acc.clat_p999_us = acc.clat_p999_us.max(d.clat_p999_us);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/fio")
            .join(name);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    #[test]
    fn randrw_has_mixed_percentiles() {
        let f = parse(&fixture("randrw.json"), "randrw.json").unwrap();
        assert!(f.read.iops > 0.0 && f.write.iops > 0.0, "{f:?}");
        assert!((f.total.iops - (f.read.iops + f.write.iops)).abs() / f.total.iops < 0.01);
        assert_eq!(f.total.io_bytes, f.read.io_bytes + f.write.io_bytes);
        assert!(f.total.clat_p99_us >= f.total.clat_p50_us && f.total.clat_p50_us > 0.0);
        assert!(f.total.clat_p999_us >= f.total.clat_p99_us);
        assert!(f.runtime_ms > 0);
    }

    #[test]
    fn sequential_read_and_write() {
        let r = parse(&fixture("seqread.json"), "seqread").unwrap();
        assert!(r.read.bw_bytes > 0.0 && r.write.io_bytes == 0);
        assert_eq!(r.total.iops, r.read.iops);
        assert_eq!(r.total.clat_p99_us, r.read.clat_p99_us);
        let w = parse(&fixture("seqwrite.json"), "seqwrite").unwrap();
        assert!(w.write.bw_bytes > 0.0 && w.read.io_bytes == 0);
        assert_eq!(w.total.clat_p99_us, w.write.clat_p99_us);
    }

    #[test]
    fn warnings_before_json_are_skipped() {
        let text = format!("fio: some warning\n{}", fixture("seqread.json"));
        assert!(parse(&text, "x").is_ok());
    }

    #[test]
    fn bad_outputs_are_named() {
        let e = parse("fio: failed to open\n", "victim.json").unwrap_err();
        assert!(e.to_string().contains("victim.json") && e.to_string().contains("failed to open"));
        assert!(matches!(
            parse("{\"jobs\": 3}", "x"),
            Err(FioError::Field { .. })
        ));
        assert!(matches!(
            parse("{\"jobs\": [", "x"),
            Err(FioError::Json { .. })
        ));
        let failed = r#"{"jobs":[{"jobname":"j","error":5,"read":{},"write":{}}]}"#;
        assert!(matches!(
            parse(failed, "x"),
            Err(FioError::JobError { code: 5, .. })
        ));
    }

    #[test]
    fn args_are_long_form_with_mix() {
        let s = Scenario::builtin(true).unwrap();
        let a = args(&s, &s.workloads[2], "/work/out.json");
        assert_eq!(a[0], "fio");
        assert!(a.contains(&"--rwmixread=70".to_string()));
        assert!(a.contains(&"--direct=1".to_string()));
        assert!(a.contains(&"--bs=4096".to_string()));
        assert!(a.iter().skip(1).all(|x| x.starts_with("--")));
    }
}
