//! Scenario files: TOML describing what `siloc scenario run` measures, with a built-in
//! default (`default.toml`, printed by `siloc scenario show-default`) and a `[quick]`
//! table that `--quick` applies on top.
//!
//! Errors name the file, the line and the key (`workload[3].rw`), for syntax errors
//! as for values that parse but make no sense together.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::units::{format_size, parse_size};

/// The built-in scenario.
pub const DEFAULT_TOML: &str = include_str!("default.toml");

/// A scenario file that cannot be used. Every variant names the file; `line` is
/// 1-based; `key` is the dotted path of the value at fault (`neighbours.sizes`).
#[derive(Debug, thiserror::Error)]
pub enum ScenarioFileError {
    #[error("read scenario {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("scenario {path}: line {line}: {key}: {msg}")]
    Invalid {
        path: PathBuf,
        line: usize,
        key: String,
        msg: String,
    },
}

/// A size in bytes, written as a number or a string with a K/M/G/T suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Size(pub u64);

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(Size(n)),
            Raw::S(s) => parse_size(&s).map(Size).map_err(serde::de::Error::custom),
        }
    }
}

impl Serialize for Size {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format_size(self.0))
    }
}

impl std::fmt::Display for Size {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&format_size(self.0))
    }
}

/// How the runner drives a runtime: all take runc's command line; the kind decides
/// the default binary and the flags a runtime needs (siloc gets `--config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RuntimeKind {
    Siloc,
    Runc,
    Crun,
    Runsc,
    Youki,
}

impl RuntimeKind {
    /// The binary looked up on PATH when the scenario names no `path`.
    pub fn default_binary(self) -> &'static str {
        match self {
            RuntimeKind::Siloc => "siloc",
            RuntimeKind::Runc => "runc",
            RuntimeKind::Crun => "crun",
            RuntimeKind::Runsc => "runsc",
            RuntimeKind::Youki => "youki",
        }
    }
}

/// fio's `rw` values the runner accepts (fio(1) "rw").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(clippy::enum_variant_names)] // fio's own names: `rw` is one of them
pub enum Rw {
    Read,
    Write,
    Randread,
    Randwrite,
    Rw,
    Randrw,
}

impl Rw {
    /// fio's spelling.
    pub fn as_fio(self) -> &'static str {
        match self {
            Rw::Read => "read",
            Rw::Write => "write",
            Rw::Randread => "randread",
            Rw::Randwrite => "randwrite",
            Rw::Rw => "rw",
            Rw::Randrw => "randrw",
        }
    }

    /// Whether the workload mixes reads and writes (and so takes `rwmixread`).
    pub fn is_mixed(self) -> bool {
        matches!(self, Rw::Rw | Rw::Randrw)
    }
}

/// One victim workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    /// Unique name, used in tables and file names.
    pub name: String,
    pub rw: Rw,
    /// Block size in bytes.
    pub bs: u64,
    pub iodepth: u32,
    /// % reads for mixed workloads (fio's default 50); `None` for pure ones.
    pub rwmixread: Option<u8>,
    /// O_DIRECT for this workload.
    pub direct: bool,
}

/// The neighbours: `count` containers looping `dd bs=bs count=size/bs conv=fsync`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Neighbours {
    pub count: u32,
    /// File sizes in bytes; each is one column of cells.
    pub sizes: Vec<u64>,
    /// dd block size in bytes.
    pub bs: u64,
    /// Measure the neighbours alone (no victim, no policy: what the disk gives them)
    /// in each cell, so the report has the share they kept.
    #[serde(default)]
    pub alone: bool,
    /// Measure the neighbours, under the runtime's policy, beside an idle victim (a
    /// container with the victim's class doing no I/O): a work-conserving class
    /// leaves them the disk.
    #[serde(default)]
    pub idle_victim: bool,
}

/// One I/O class, copied to `[io.class.NAME]` of the siloc config the runner writes.
/// Bandwidths in bytes/s, IOPS plain, weight 1..=10000 (config.rs rules).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClassLimits {
    pub rbps: Option<Size>,
    pub wbps: Option<Size>,
    pub riops: Option<u64>,
    pub wiops: Option<u64>,
    pub weight: Option<u16>,
    /// io.latency target, `"2ms"`, `"500us"` ([`crate::iopolicy::parse_latency`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_target: Option<String>,
}

impl ClassLimits {
    /// The class as siloc's policy limits (bytes/s, IOPS, weight, µs).
    pub fn limits(&self) -> crate::iopolicy::IoLimits {
        crate::iopolicy::IoLimits {
            rbps: self.rbps.map(|s| s.0),
            wbps: self.wbps.map(|s| s.0),
            riops: self.riops,
            wiops: self.wiops,
            weight: self.weight,
            latency: self
                .latency_target
                .as_deref()
                .and_then(|l| crate::iopolicy::parse_latency(l).ok()),
        }
    }
}

/// What a runtime with `policy = true` asks of siloc through annotations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    /// `io.siloc.io.class` on each neighbour.
    pub neighbour_class: String,
    /// `io.siloc.numa` on the victim.
    pub victim_numa: String,
    pub classes: BTreeMap<String, ClassLimits>,
}

/// One runtime under test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeEntry {
    /// Label in reports; unique.
    pub name: String,
    pub kind: RuntimeKind,
    /// Binary path or name on PATH; `None`: the kind's default (siloc: this binary).
    pub path: Option<PathBuf>,
    /// Global flags put before every command (long forms: runsc rejects short ones).
    pub args: Vec<String>,
    /// siloc only: apply [`Policy`] through annotations.
    pub policy: bool,
    /// Policy runtimes: `io.siloc.io.class` on the victim (`None`: none).
    #[serde(default)]
    pub victim_class: Option<String>,
    /// Policy runtimes: `io.siloc.io.class` on each neighbour: the runtime's own
    /// `neighbour_class`, else `[policy] neighbour_class`; `None` (written `""`): none.
    #[serde(default)]
    pub neighbour_class: Option<String>,
}

/// A validated scenario, `--quick` already applied. Times in seconds, sizes in bytes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// Directory on the disk under test; the run works in a subdirectory of it.
    pub target: PathBuf,
    pub duration: u32,
    pub ramp: u32,
    pub warmup: u32,
    pub repetitions: u32,
    pub victim_file_size: u64,
    pub ioengine: String,
    pub workloads: Vec<Workload>,
    pub neighbours: Neighbours,
    pub policy: Policy,
    pub runtimes: Vec<RuntimeEntry>,
    /// Whether `--quick` was applied.
    pub quick: bool,
}

// ---- the file as written: spans kept for messages about values ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    scenario: RawRun,
    victim: RawVictim,
    #[serde(default)]
    workload: Vec<RawWorkload>,
    neighbours: RawNeighbours,
    #[serde(default)]
    policy: Option<RawPolicy>,
    #[serde(default)]
    runtime: Vec<RawRuntime>,
    #[serde(default)]
    quick: Option<RawQuick>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRun {
    target: Spanned<PathBuf>,
    duration: Spanned<u32>,
    #[serde(default)]
    ramp: u32,
    #[serde(default)]
    warmup: u32,
    #[serde(default = "one")]
    repetitions: Spanned<u32>,
}

fn one() -> Spanned<u32> {
    Spanned::new(0..0, 1)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawVictim {
    file_size: Spanned<Size>,
    #[serde(default = "yes")]
    direct: bool,
    #[serde(default = "libaio")]
    ioengine: Spanned<String>,
}

fn yes() -> bool {
    true
}

fn libaio() -> Spanned<String> {
    Spanned::new(0..0, "libaio".to_string())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorkload {
    name: Spanned<String>,
    rw: Rw,
    bs: Spanned<Size>,
    #[serde(default)]
    iodepth: Option<Spanned<u32>>,
    #[serde(default)]
    rwmixread: Option<Spanned<u8>>,
    #[serde(default)]
    direct: Option<bool>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawNeighbours {
    count: Spanned<u32>,
    sizes: Spanned<Vec<Size>>,
    #[serde(default = "one_mib")]
    bs: Spanned<Size>,
    #[serde(default = "yes")]
    alone: bool,
    #[serde(default = "yes")]
    idle_victim: bool,
}

fn one_mib() -> Spanned<Size> {
    Spanned::new(0..0, Size(1 << 20))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    neighbour_class: Spanned<String>,
    #[serde(default = "auto")]
    victim_numa: Spanned<String>,
    #[serde(default)]
    class: BTreeMap<String, Spanned<ClassLimits>>,
}

fn auto() -> Spanned<String> {
    Spanned::new(0..0, "auto".to_string())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRuntime {
    name: Spanned<String>,
    kind: Spanned<RuntimeKind>,
    #[serde(default)]
    path: Option<PathBuf>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    policy: Option<Spanned<bool>>,
    #[serde(default)]
    victim_class: Option<Spanned<String>>,
    #[serde(default)]
    neighbour_class: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQuick {
    duration: Option<Spanned<u32>>,
    ramp: Option<u32>,
    warmup: Option<u32>,
    repetitions: Option<Spanned<u32>>,
    victim_file_size: Option<Spanned<Size>>,
    neighbour_sizes: Option<Spanned<Vec<Size>>>,
    neighbour_count: Option<Spanned<u32>>,
}

impl Scenario {
    /// The built-in scenario, `quick` applied when asked.
    pub fn builtin(quick: bool) -> Result<Scenario, ScenarioFileError> {
        Self::parse(DEFAULT_TOML, Path::new("<built-in default>"), quick)
    }

    /// Reads and validates a scenario file. Errors: [`ScenarioFileError`].
    pub fn load(path: &Path, quick: bool) -> Result<Scenario, ScenarioFileError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioFileError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text, path, quick)
    }

    /// Parses scenario text; `path` names it in messages. With `quick` the file's
    /// `[quick]` table overrides its values. Errors name the line and the key.
    pub fn parse(text: &str, path: &Path, quick: bool) -> Result<Scenario, ScenarioFileError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            let span = e.span().unwrap_or(0..0);
            invalid(text, path, span, None, e.message().trim_end().to_string())
        })?;
        build(raw, text, path, quick)
    }

    /// Number of cells: runtimes x workloads x neighbour sizes x repetitions.
    pub fn cell_count(&self) -> usize {
        self.runtimes.len()
            * self.workloads.len()
            * self.neighbours.sizes.len()
            * self.repetitions as usize
    }
}

/// The error for the value at `span`: its line, and its key unless `key` names one.
fn invalid(
    text: &str,
    path: &Path,
    span: Range<usize>,
    key: Option<&str>,
    msg: String,
) -> ScenarioFileError {
    let (line, found) = locate(text, span.start);
    ScenarioFileError::Invalid {
        path: path.to_path_buf(),
        line,
        key: key.map(str::to_string).unwrap_or(found),
        msg,
    }
}

/// The 1-based line of byte `offset` and the dotted key written there: the table
/// header above it (arrays of tables numbered from 1, `workload[2]`) and the key
/// before `=` on the line itself, if any.
fn locate(text: &str, offset: usize) -> (usize, String) {
    let offset = offset.min(text.len());
    let line_no = text[..offset].matches('\n').count() + 1;
    let mut table = String::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut key = String::new();
    for (i, line) in text.lines().enumerate().take(line_no) {
        let t = line.split('#').next().unwrap_or("").trim();
        if let Some(name) = t.strip_prefix("[[").and_then(|r| r.strip_suffix("]]")) {
            let n = counts.entry(name.trim().to_string()).or_default();
            *n += 1;
            table = format!("{}[{n}]", name.trim());
        } else if let Some(name) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            table = name.trim().to_string();
        }
        if i + 1 == line_no {
            key = match t.split_once('=') {
                Some((k, _)) if !t.starts_with('[') => k.trim().to_string(),
                _ => String::new(),
            };
        }
    }
    let dotted = match (table.is_empty(), key.is_empty()) {
        (true, _) => key,
        (false, true) => table,
        (false, false) => format!("{table}.{key}"),
    };
    (line_no, dotted)
}

/// A name usable in container ids and file names.
fn is_plain_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 32
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !s.starts_with('.')
}

fn build(
    raw: RawFile,
    text: &str,
    path: &Path,
    quick: bool,
) -> Result<Scenario, ScenarioFileError> {
    let bad = |span: Range<usize>, msg: String| invalid(text, path, span, None, msg);
    let mut duration = raw.scenario.duration.clone();
    let mut ramp = raw.scenario.ramp;
    let mut warmup = raw.scenario.warmup;
    let mut repetitions = raw.scenario.repetitions.clone();
    let mut file_size = raw.victim.file_size.clone();
    let mut sizes = raw.neighbours.sizes.clone();
    let mut count = raw.neighbours.count.clone();
    if quick {
        let Some(q) = &raw.quick else {
            return Err(invalid(
                text,
                path,
                0..0,
                Some("quick"),
                "--quick needs a [quick] table in the scenario".into(),
            ));
        };
        duration = q.duration.clone().unwrap_or(duration);
        ramp = q.ramp.unwrap_or(ramp);
        warmup = q.warmup.unwrap_or(warmup);
        repetitions = q.repetitions.clone().unwrap_or(repetitions);
        file_size = q.victim_file_size.clone().unwrap_or(file_size);
        sizes = q.neighbour_sizes.clone().unwrap_or(sizes);
        count = q.neighbour_count.clone().unwrap_or(count);
    }

    let target = raw.scenario.target.get_ref().clone();
    if !target.is_absolute() {
        return Err(bad(
            raw.scenario.target.span(),
            "must be an absolute path".into(),
        ));
    }
    if *duration.get_ref() == 0 {
        return Err(bad(duration.span(), "must be at least 1 second".into()));
    }
    if *repetitions.get_ref() == 0 {
        return Err(bad(repetitions.span(), "must be at least 1".into()));
    }
    let ioengine = raw.victim.ioengine.get_ref().clone();
    if !is_plain_name(&ioengine) {
        return Err(bad(
            raw.victim.ioengine.span(),
            format!("{ioengine:?} is not an fio ioengine name"),
        ));
    }

    if raw.workload.is_empty() {
        return Err(invalid(
            text,
            path,
            0..0,
            Some("workload"),
            "no [[workload]] given".into(),
        ));
    }
    let mut workloads = Vec::new();
    for w in &raw.workload {
        let name = w.name.get_ref().clone();
        if !is_plain_name(&name) {
            return Err(bad(
                w.name.span(),
                format!("{name:?}: use letters, digits, '-', '_' or '.' (at most 32)"),
            ));
        }
        if workloads.iter().any(|x: &Workload| x.name == name) {
            return Err(bad(
                w.name.span(),
                format!("workload {name:?} is given twice"),
            ));
        }
        let direct = w.direct.unwrap_or(raw.victim.direct);
        let bs = w.bs.get_ref().0;
        if bs == 0 || (direct && bs % 512 != 0) {
            return Err(bad(
                w.bs.span(),
                format!("{bs} bytes: direct I/O needs a non-zero multiple of 512"),
            ));
        }
        if bs > file_size.get_ref().0 {
            return Err(bad(
                w.bs.span(),
                format!("larger than victim.file_size ({})", file_size.get_ref()),
            ));
        }
        let iodepth = w.iodepth.as_ref().map(|d| *d.get_ref()).unwrap_or(1);
        if let Some(d) = &w.iodepth
            && !(1..=4096).contains(d.get_ref())
        {
            return Err(bad(
                d.span(),
                format!("{} is outside 1..=4096", d.get_ref()),
            ));
        }
        let rwmixread = match &w.rwmixread {
            Some(m) if !w.rw.is_mixed() => {
                return Err(bad(
                    m.span(),
                    format!(
                        "only mixed workloads (rw, randrw) take a mix, not {}",
                        w.rw.as_fio()
                    ),
                ));
            }
            Some(m) if *m.get_ref() > 100 => {
                return Err(bad(m.span(), format!("{}% is more than 100%", m.get_ref())));
            }
            Some(m) => Some(*m.get_ref()),
            None if w.rw.is_mixed() => Some(50),
            None => None,
        };
        workloads.push(Workload {
            name,
            rw: w.rw,
            bs,
            iodepth,
            rwmixread,
            direct,
        });
    }

    if *count.get_ref() == 0 {
        return Err(bad(
            count.span(),
            "at least one neighbour is needed for interference".into(),
        ));
    }
    let nbs = raw.neighbours.bs.get_ref().0;
    if nbs < 4096 || !nbs.is_multiple_of(4096) {
        return Err(bad(
            raw.neighbours.bs.span(),
            "must be a multiple of 4K".into(),
        ));
    }
    if sizes.get_ref().is_empty() {
        return Err(bad(sizes.span(), "give at least one size".into()));
    }
    for s in sizes.get_ref() {
        if s.0 < nbs || s.0 % nbs != 0 {
            return Err(bad(
                sizes.span(),
                format!("{s} is not a whole number of neighbours.bs ({})", Size(nbs)),
            ));
        }
    }
    if file_size.get_ref().0 < (1 << 20) {
        return Err(bad(file_size.span(), "must be at least 1M".into()));
    }

    let mut runtimes: Vec<RuntimeEntry> = Vec::new();
    for r in &raw.runtime {
        let name = r.name.get_ref().clone();
        if !is_plain_name(&name) {
            return Err(bad(
                r.name.span(),
                format!("{name:?}: use letters, digits, '-', '_' or '.' (at most 32)"),
            ));
        }
        if runtimes.iter().any(|x| x.name == name) {
            return Err(bad(
                r.name.span(),
                format!("runtime {name:?} is given twice"),
            ));
        }
        let kind = *r.kind.get_ref();
        let policy = r.policy.as_ref().is_some_and(|p| *p.get_ref());
        if let Some(p) = &r.policy
            && policy
            && kind != RuntimeKind::Siloc
        {
            return Err(bad(
                p.span(),
                "only siloc reads the io.siloc.* annotations a policy is made of".into(),
            ));
        }
        if let Some(a) = r
            .args
            .iter()
            .find(|a| a.starts_with('-') && !a.starts_with("--"))
        {
            return Err(bad(
                r.name.span(),
                format!("args: {a:?}: use long flags (runsc rejects short ones)"),
            ));
        }
        if !policy && let Some(c) = r.victim_class.as_ref().or(r.neighbour_class.as_ref()) {
            return Err(bad(
                c.span(),
                "a class needs policy = true (siloc reads it from io.siloc.io.class)".into(),
            ));
        }
        runtimes.push(RuntimeEntry {
            name,
            kind,
            path: r.path.clone(),
            args: r.args.clone(),
            policy,
            victim_class: None,
            neighbour_class: None,
        });
    }
    if runtimes.is_empty() {
        return Err(invalid(
            text,
            path,
            0..0,
            Some("runtime"),
            "no [[runtime]] given".into(),
        ));
    }

    let policy = match &raw.policy {
        Some(p) => {
            let numa = p.victim_numa.get_ref();
            let numa_ok = matches!(numa.as_str(), "auto" | "off")
                || numa
                    .strip_prefix("node:")
                    .is_some_and(|n| n.parse::<u32>().is_ok());
            if !numa_ok {
                return Err(bad(
                    p.victim_numa.span(),
                    format!("{numa:?}: use auto, off or node:N"),
                ));
            }
            let class = p.neighbour_class.get_ref();
            if !p.class.contains_key(class) {
                return Err(bad(
                    p.neighbour_class.span(),
                    format!("no [policy.class.{class}] table"),
                ));
            }
            for (name, c) in &p.class {
                if !is_plain_name(name) {
                    return Err(bad(c.span(), format!("class name {name:?}")));
                }
                if let Some(l) = &c.get_ref().latency_target
                    && let Err(m) = crate::iopolicy::parse_latency(l)
                {
                    return Err(bad(c.span(), format!("latency_target: {m}")));
                }
                if let Some(w) = c.get_ref().weight
                    && !(1..=10_000).contains(&w)
                {
                    return Err(bad(c.span(), format!("weight {w} is outside 1..=10000")));
                }
            }
            Policy {
                neighbour_class: class.clone(),
                victim_numa: numa.clone(),
                classes: p
                    .class
                    .iter()
                    .map(|(k, v)| (k.clone(), v.get_ref().clone()))
                    .collect(),
            }
        }
        None => {
            if let Some(r) = raw
                .runtime
                .iter()
                .find(|r| r.policy.as_ref().is_some_and(|p| *p.get_ref()))
            {
                return Err(bad(
                    r.name.span(),
                    "policy = true needs a [policy] table".into(),
                ));
            }
            Policy {
                neighbour_class: String::new(),
                victim_numa: "off".into(),
                classes: BTreeMap::new(),
            }
        }
    };

    // Each policy runtime's classes: its own, else the [policy] default for neighbours.
    for (entry, r) in runtimes.iter_mut().zip(&raw.runtime) {
        if !entry.policy {
            continue;
        }
        let pick = |c: &Option<Spanned<String>>, default: Option<&str>| match c {
            Some(c) if c.get_ref().is_empty() => Ok(None),
            Some(c) if !policy.classes.contains_key(c.get_ref()) => Err(bad(
                c.span(),
                format!("no [policy.class.{}] table", c.get_ref()),
            )),
            Some(c) => Ok(Some(c.get_ref().clone())),
            None => Ok(default.filter(|d| !d.is_empty()).map(str::to_string)),
        };
        entry.victim_class = pick(&r.victim_class, None)?;
        entry.neighbour_class = pick(&r.neighbour_class, Some(&policy.neighbour_class))?;
    }

    Ok(Scenario {
        target,
        duration: *duration.get_ref(),
        ramp,
        warmup,
        repetitions: *repetitions.get_ref(),
        victim_file_size: file_size.get_ref().0,
        ioengine,
        workloads,
        neighbours: Neighbours {
            count: *count.get_ref(),
            sizes: sizes.get_ref().iter().map(|s| s.0).collect(),
            bs: nbs,
            alone: raw.neighbours.alone,
            idle_victim: raw.neighbours.idle_victim,
        },
        policy,
        runtimes,
        quick,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(t: &str) -> Result<Scenario, ScenarioFileError> {
        Scenario::parse(t, Path::new("s.toml"), false)
    }

    const MINIMAL: &str = r#"[scenario]
target = "/var/tmp/t"
duration = 2
[victim]
file_size = "16M"
[[workload]]
name = "rr"
rw = "randrw"
bs = "4K"
[neighbours]
count = 1
sizes = ["32M"]
[[runtime]]
name = "runc"
kind = "runc"
"#;

    #[test]
    fn builtin_parses_and_quick_scales_down() {
        let full = Scenario::builtin(false).unwrap();
        let quick = Scenario::builtin(true).unwrap();
        assert_eq!(full.workloads.len(), 3);
        assert_eq!(full.neighbours.sizes, vec![4 << 30, 8 << 30, 16 << 30]);
        assert_eq!(full.runtimes.len(), 8);
        assert!(full.runtimes.iter().any(|r| r.policy));
        let by = |n: &str| full.runtimes.iter().find(|r| r.name == n).unwrap();
        assert_eq!(
            (
                by("siloc-policy").victim_class.as_deref(),
                by("siloc-policy").neighbour_class.as_deref()
            ),
            (None, Some("noisy"))
        );
        assert_eq!(
            (
                by("siloc-latency").victim_class.as_deref(),
                by("siloc-latency").neighbour_class.as_deref()
            ),
            (Some("latency-critical"), None)
        );
        assert_eq!(
            (
                by("siloc-weight").victim_class.as_deref(),
                by("siloc-weight").neighbour_class.as_deref()
            ),
            (Some("critical"), Some("besteffort"))
        );
        assert_eq!(by("runc").neighbour_class, None);
        assert_eq!(
            full.policy.classes["latency-critical"].limits().latency,
            Some(2000)
        );
        assert!(full.neighbours.alone && full.neighbours.idle_victim);
        assert_eq!(quick.neighbours.sizes, vec![4 << 30]);
        assert!(quick.duration < full.duration && quick.repetitions == 1);
        assert!(quick.cell_count() < full.cell_count());
        let randrw = &full.workloads[2];
        assert_eq!(
            (randrw.rw, randrw.rwmixread, randrw.bs),
            (Rw::Randrw, Some(70), 4096)
        );
        assert_eq!(full.policy.classes["noisy"].wbps, Some(Size(50 << 20)));
    }

    #[test]
    fn minimal_file_takes_defaults() {
        let s = parse(MINIMAL).unwrap();
        assert_eq!(s.repetitions, 1);
        assert_eq!(s.ioengine, "libaio");
        assert_eq!(s.workloads[0].rwmixread, Some(50));
        assert!(s.workloads[0].direct);
        assert_eq!(s.neighbours.bs, 1 << 20);
        assert_eq!(s.cell_count(), 1);
        let e = Scenario::parse(MINIMAL, Path::new("s.toml"), true).unwrap_err();
        assert!(e.to_string().contains("[quick]"), "{e}");
    }

    fn err(t: &str) -> String {
        parse(t).unwrap_err().to_string()
    }

    #[test]
    fn errors_name_line_and_key() {
        let e = err(&MINIMAL.replace("bs = \"4K\"", "bs = \"4X\""));
        assert!(e.contains("line 9") && e.contains("workload[1].bs"), "{e}");
        let e = err(&MINIMAL.replace("rw = \"randrw\"", "rw = \"random\""));
        assert!(
            e.contains("line 8") && e.contains("workload[1].rw") && e.contains("randrw"),
            "{e}"
        );
        let e = err(&MINIMAL.replace("count = 1", "count = 1\ncolour = 2"));
        assert!(
            e.contains("line 12") && e.contains("neighbours.colour"),
            "{e}"
        );
        let e = err(&MINIMAL.replace("kind = \"runc\"", "kind = \"runc\"\npolicy = true"));
        assert!(
            e.contains("line 16") && e.contains("runtime[1].policy"),
            "{e}"
        );
        let e = err(&MINIMAL.replace("target = \"/var/tmp/t\"", "target = \"rel\""));
        assert!(e.contains("line 2") && e.contains("scenario.target"), "{e}");
        let e = err(&MINIMAL.replace("sizes = [\"32M\"]", "sizes = [\"32M\", \"1000K\"]"));
        assert!(
            e.contains("line 12") && e.contains("neighbours.sizes"),
            "{e}"
        );
        let e = err(&format!(
            "{MINIMAL}[[runtime]]\nname = \"runc\"\nkind = \"crun\"\n"
        ));
        assert!(e.contains("line 17") && e.contains("twice"), "{e}");
        let e = err(&MINIMAL.replace("duration = 2", "duration = 2\n[oops"));
        assert!(e.contains("s.toml: line 4"), "{e}");
    }

    #[test]
    fn mix_only_on_mixed_workloads() {
        let t = MINIMAL.replace("rw = \"randrw\"", "rw = \"read\"\nrwmixread = 70");
        let e = err(&t);
        assert!(
            e.contains("workload[1].rwmixread") && e.contains("mixed"),
            "{e}"
        );
        let e = err(&MINIMAL.replace("bs = \"4K\"", "bs = \"4K\"\nrwmixread = 170"));
        assert!(e.contains("100%"), "{e}");
    }

    #[test]
    fn policy_class_must_exist_and_short_flags_are_refused() {
        let t = format!(
            "{MINIMAL}[[runtime]]\nname = \"sp\"\nkind = \"siloc\"\npolicy = true\n[policy]\nneighbour_class = \"x\"\n"
        );
        let e = err(&t);
        assert!(
            e.contains("policy.neighbour_class") && e.contains("[policy.class.x]"),
            "{e}"
        );
        let t = MINIMAL.replace("kind = \"runc\"", "kind = \"runc\"\nargs = [\"-d\"]");
        assert!(err(&t).contains("long flags"));
        let t = format!(
            "{MINIMAL}[[runtime]]\nname = \"sp\"\nkind = \"siloc\"\npolicy = true\nvictim_class = \"gold\"\n[policy]\nneighbour_class = \"x\"\n[policy.class.x]\nwbps = \"1M\"\n"
        );
        let e = err(&t);
        assert!(
            e.contains("runtime[2].victim_class") && e.contains("[policy.class.gold]"),
            "{e}"
        );
        let t = MINIMAL.replace("kind = \"runc\"", "kind = \"runc\"\nvictim_class = \"x\"");
        assert!(err(&t).contains("policy = true"), "{}", err(&t));
        let t = format!(
            "{MINIMAL}[policy]\nneighbour_class = \"x\"\n[policy.class.x]\nlatency_target = \"soon\"\n"
        );
        assert!(err(&t).contains("latency_target"), "{}", err(&t));
    }

    #[test]
    fn sizes_print_back() {
        assert_eq!(Size(4 << 30).to_string(), "4G");
        let s = Scenario::builtin(true).unwrap();
        let json = serde_json::to_string(&s).unwrap();
        let back: Scenario = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
    }
}
