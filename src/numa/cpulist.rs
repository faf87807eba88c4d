//! The kernel's cpulist syntax (`0-3,8,10-11`), used by sysfs (`cpulist`,
//! `thread_siblings_list`, `online`, `isolated`) and by cpuset (`cpuset.cpus`,
//! `cpuset.mems`, runtime-spec `linux.resources.cpu.cpus`/`mems`). Parsed here only.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Highest CPU or node number accepted: the kernel's largest `NR_CPUS` (x86
/// `CONFIG_MAXSMP`) is 8192, so anything above is a typo, not a machine.
const MAX_ID: u32 = 8191;

/// Errors from [`CpuList::parse`]; each carries the text at fault.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CpuListError {
    #[error("{0:?} is not a cpu list: use numbers and ranges such as 0-3,8,10-11")]
    Syntax(String),
    #[error("{text:?}: range {lo}-{hi} runs backwards")]
    Backwards { text: String, lo: u32, hi: u32 },
    #[error("{text:?}: {id} is above {MAX_ID}")]
    TooLarge { text: String, id: u32 },
}

/// Errors from [`CpuList::parse_lenient`]; each names the comma-separated part at
/// fault, in the words runc's `linux.memoryPolicy` check uses (siloc's
/// `lifecycle::spec_compat`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ListPartError {
    /// A part that is not a number or an `a-b` range of numbers.
    #[error("invalid format: {0}")]
    Format(String),
    /// A range running backwards, or an id at or above the caller's limit.
    #[error("invalid range: {0}")]
    Range(String),
}

/// A set of CPU (or NUMA node) numbers. Shown and serialized in cpulist syntax.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct CpuList(BTreeSet<u32>);

impl CpuList {
    /// Parses cpulist syntax: comma-separated numbers and `a-b` ranges (inclusive);
    /// surrounding whitespace and a trailing newline (sysfs) are ignored; the empty
    /// string is the empty set (sysfs `isolated` on most hosts).
    ///
    /// Errors: [`CpuListError`] for anything else, ranges running backwards, and
    /// numbers above [`MAX_ID`].
    pub fn parse(text: &str) -> Result<CpuList, CpuListError> {
        let t = text.trim();
        let mut set = BTreeSet::new();
        if t.is_empty() {
            return Ok(CpuList(set));
        }
        let syntax = || CpuListError::Syntax(text.to_string());
        let num = |s: &str| -> Result<u32, CpuListError> {
            if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(syntax());
            }
            let id: u32 = s.parse().map_err(|_| syntax())?;
            if id > MAX_ID {
                return Err(CpuListError::TooLarge {
                    text: text.to_string(),
                    id,
                });
            }
            Ok(id)
        };
        for part in t.split(',') {
            let part = part.trim();
            match part.split_once('-') {
                None => {
                    set.insert(num(part)?);
                }
                Some((a, b)) => {
                    let (lo, hi) = (num(a.trim())?, num(b.trim())?);
                    if lo > hi {
                        return Err(CpuListError::Backwards {
                            text: text.to_string(),
                            lo,
                            hi,
                        });
                    }
                    set.extend(lo..=hi);
                }
            }
        }
        Ok(CpuList(set))
    }

    /// Parses a list as runc's `ToCPUSet` reads one (runc libcontainer/utils): empty
    /// parts (extra commas) are skipped and spaces around parts and numbers ignored, so
    /// `""` and `"1,,2,"` are valid; every id must be below `limit` (the kernel's
    /// MAX_NUMNODES, 1024, for NUMA node masks).
    ///
    /// Errors: [`ListPartError::Format`] for a part that is not a decimal number or
    /// `a-b` range, [`ListPartError::Range`] for a backwards range or an id `>= limit`.
    pub fn parse_lenient(text: &str, limit: u32) -> Result<CpuList, ListPartError> {
        let mut set = BTreeSet::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let num = |s: &str| -> Result<u32, ListPartError> {
                let s = s.trim();
                if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(ListPartError::Format(part.to_string()));
                }
                s.parse()
                    .map_err(|_| ListPartError::Range(part.to_string()))
            };
            let (lo, hi) = match part.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => (num(part)?, num(part)?),
            };
            if lo > hi || hi >= limit {
                return Err(ListPartError::Range(part.to_string()));
            }
            set.extend(lo..=hi);
        }
        Ok(CpuList(set))
    }

    /// The set holding exactly `ids`.
    pub(crate) fn from_ids(ids: impl IntoIterator<Item = u32>) -> CpuList {
        CpuList(ids.into_iter().collect())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    #[cfg(test)]
    pub(crate) fn contains(&self, id: u32) -> bool {
        self.0.contains(&id)
    }

    /// Ascending ids.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.0.iter().copied()
    }

    pub(crate) fn intersection(&self, other: &CpuList) -> CpuList {
        CpuList(self.0.intersection(&other.0).copied().collect())
    }

    pub(crate) fn union(&self, other: &CpuList) -> CpuList {
        CpuList(self.0.union(&other.0).copied().collect())
    }

    pub(crate) fn difference(&self, other: &CpuList) -> CpuList {
        CpuList(self.0.difference(&other.0).copied().collect())
    }

    pub(crate) fn is_subset(&self, other: &CpuList) -> bool {
        self.0.is_subset(&other.0)
    }
}

impl FromIterator<u32> for CpuList {
    fn from_iter<I: IntoIterator<Item = u32>>(iter: I) -> Self {
        CpuList::from_ids(iter)
    }
}

/// Shortest cpulist form: ascending, runs of two or more joined as `a-b`.
impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut it = self.0.iter().copied().peekable();
        while let Some(lo) = it.next() {
            let mut hi = lo;
            while it.peek() == Some(&(hi + 1)) {
                hi += 1;
                it.next();
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if hi == lo {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

impl Serialize for CpuList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for CpuList {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        CpuList::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_formats() {
        let l = CpuList::parse("0-3,8,10-11\n").unwrap();
        assert_eq!(l.iter().collect::<Vec<_>>(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(l.to_string(), "0-3,8,10-11");
        assert_eq!(CpuList::parse("5, 4 ,3").unwrap().to_string(), "3-5");
        assert_eq!(CpuList::parse("7-7").unwrap().to_string(), "7");
        assert!(CpuList::parse("").unwrap().is_empty());
        assert!(CpuList::parse(" \n").unwrap().is_empty());
        assert_eq!(CpuList::from_ids([9, 1, 2]).to_string(), "1-2,9");
    }

    #[test]
    fn rejects_bad_lists() {
        for bad in [
            "a", "1,", ",1", "1--2", "-1", "1-", "0x3", "1 2", "1-2-3", "+1",
        ] {
            assert!(
                matches!(CpuList::parse(bad), Err(CpuListError::Syntax(_))),
                "{bad}"
            );
        }
        assert!(matches!(
            CpuList::parse("3-1"),
            Err(CpuListError::Backwards { lo: 3, hi: 1, .. })
        ));
        assert!(matches!(
            CpuList::parse("0-4294967295"),
            Err(CpuListError::TooLarge { .. })
        ));
    }

    #[test]
    fn lenient_lists_as_runc_reads_them() {
        let ids = |t| {
            CpuList::parse_lenient(t, 1024)
                .unwrap()
                .iter()
                .collect::<Vec<_>>()
        };
        assert_eq!(ids("0-2,4"), vec![0, 1, 2, 4]);
        assert_eq!(ids(" 1 ,, 3 - 4 ,"), vec![1, 3, 4]);
        assert_eq!(ids("2,2,1-2"), vec![1, 2]);
        assert!(ids("").is_empty());
        assert_eq!(ids("1023"), vec![1023]);
        for (bad, want) in [
            ("x", ListPartError::Format("x".into())),
            ("0,1-x", ListPartError::Format("1-x".into())),
            ("1-2-3", ListPartError::Format("1-2-3".into())),
            ("+1", ListPartError::Format("+1".into())),
            ("-1", ListPartError::Format("-1".into())),
            ("3-1", ListPartError::Range("3-1".into())),
            ("0,1024", ListPartError::Range("1024".into())),
            (
                "1-99999999999",
                ListPartError::Range("1-99999999999".into()),
            ),
        ] {
            assert_eq!(CpuList::parse_lenient(bad, 1024), Err(want), "{bad}");
        }
        assert_eq!(
            CpuList::parse_lenient("3-1", 1024).unwrap_err().to_string(),
            "invalid range: 3-1"
        );
        assert_eq!(
            CpuList::parse_lenient("a", 1024).unwrap_err().to_string(),
            "invalid format: a"
        );
    }

    #[test]
    fn set_operations() {
        let a = CpuList::parse("0-7").unwrap();
        let b = CpuList::parse("4-11").unwrap();
        assert_eq!(a.intersection(&b).to_string(), "4-7");
        assert_eq!(a.union(&b).to_string(), "0-11");
        assert_eq!(a.difference(&b).to_string(), "0-3");
        assert!(CpuList::parse("5,6").unwrap().is_subset(&a));
        let j = serde_json::to_string(&a).unwrap();
        assert_eq!(j, "\"0-7\"");
        assert_eq!(serde_json::from_str::<CpuList>(&j).unwrap(), a);
    }
}
