//! `[io]` of the host config: the default class and the named I/O classes.

use std::collections::BTreeMap;

use serde::Deserialize;

/// `[io]`: disk I/O policies (DESIGN.md item 4).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IoConfig {
    /// Class applied to containers that name none.
    pub default_class: Option<String>,
    /// Named classes, `[io.class.NAME]`.
    pub class: BTreeMap<String, IoClass>,
}

/// One I/O class as written in the file. Bandwidths are bytes/s (number or string with
/// K/M/G suffix), IOPS are plain numbers, weight is 1..=10000 (cgroup v2 io.weight;
/// cgroup v1 blkio.weight takes 10..=1000 and siloc clamps to it).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct IoClass {
    pub rbps: Option<SizeValue>,
    pub wbps: Option<SizeValue>,
    pub riops: Option<u64>,
    pub wiops: Option<u64>,
    pub weight: Option<u16>,
    /// cgroup v2 `io.latency` target: a number of µs or a string with a `us`/`ms`/`s`
    /// suffix (`"2ms"`); see [`crate::iopolicy::parse_latency`]. Work-conserving: the
    /// container's siblings are held back only while it misses the target.
    pub latency_target: Option<LatencyValue>,
}

/// A latency written as a number of µs or as a string with a suffix (`"2ms"`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum LatencyValue {
    Micros(u64),
    Text(String),
}

impl LatencyValue {
    /// The value in µs. Errors: the text is not a latency, or it is outside
    /// [`crate::iopolicy::LATENCY_RANGE_US`].
    pub fn micros(&self) -> Result<u64, String> {
        match self {
            LatencyValue::Micros(n) => crate::iopolicy::parse_latency(&n.to_string()),
            LatencyValue::Text(t) => crate::iopolicy::parse_latency(t),
        }
    }
}

/// A size written as a number of bytes or as a string with a suffix (`"50M"`).
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum SizeValue {
    Bytes(u64),
    Text(String),
}

impl SizeValue {
    /// The value in bytes. Errors: the text is not a size.
    pub fn bytes(&self) -> Result<u64, crate::units::SizeError> {
        match self {
            SizeValue::Bytes(b) => Ok(*b),
            SizeValue::Text(t) => crate::units::parse_size(t),
        }
    }
}

impl IoConfig {
    /// Checks the section; errors are (key, message).
    pub fn check(&self) -> Result<(), (String, String)> {
        for (name, class) in &self.class {
            for (key, v) in [("rbps", &class.rbps), ("wbps", &class.wbps)] {
                if let Some(v) = v {
                    v.bytes()
                        .map_err(|e| (format!("io.class.{name}.{key}"), e.to_string()))?;
                }
            }
            if let Some(l) = &class.latency_target {
                l.micros()
                    .map_err(|e| (format!("io.class.{name}.latency_target"), e))?;
            }
            if let Some(w) = class.weight
                && !(1..=10_000).contains(&w)
            {
                return Err((
                    format!("io.class.{name}.weight"),
                    format!("{w} is outside 1..=10000"),
                ));
            }
        }
        if let Some(c) = &self.default_class
            && !self.class.contains_key(c)
        {
            return Err((
                "io.default_class".into(),
                format!("no [io.class.{c}] section"),
            ));
        }
        Ok(())
    }
}
