//! Host ID ranges for per-container user namespaces (DESIGN.md item 1), unique on the
//! whole host whatever state root (`--root`) a container lives under: podman
//! (`/run/siloc`), containerd's runc shim (`/run/containerd/runc/<namespace>`) and
//! siloc's shim each use their own root, and their containers must not share host IDs.
//!
//! A pool of host IDs (from the config, or the `containers` entry of /etc/subuid and
//! /etc/subgid, see subuid(5)) is cut into ranges; each live container holds one. One
//! table for the host, `<pool_dir>/ranges.json` (`[userns] pool_dir`, default
//! [`DEFAULT_POOL_DIR`]), is read and changed only under an exclusive `flock(2)` of the
//! directory `<pool_dir>` (never removed, so every process locks the same inode), so
//! parallel `create`s of every client never hand out overlapping ranges. An empty table
//! is removed. Ranges start on multiples of [`ALIGN`] IDs within the pool.
//!
//! Each entry names its holder, a state root and a container id, so `delete` under that
//! root releases it, and records host IDs (not pool offsets), so a different pool
//! config of another client cannot misread it. Two kinds of entries:
//! - `auto`: a range siloc handed out (`io.siloc.userns=auto`);
//! - `spec`: the mappings a live siloc container's spec brought (containerd 2.1 and the
//!   kubelet for `hostUsers: false` pods, `podman --uidmap`); siloc never hands out a
//!   range that overlaps them. Before they are recorded, [`super::idpool_spec`] refuses
//!   those that cover more of the pool than `[userns] max_size` or overlap a range
//!   handed out to another container (a pod's app containers joining their sandbox's
//!   namespace may repeat its range exactly).
//!
//! Crash safety: the table is the record of the allocation step (written before the
//! container uses its range), and `delete`, also `delete --force` after a crashed
//! `create`, releases the holder's entries. An entry whose holder has left no state at
//! all under its root (the caller's `alive` check: no record, no container dir; a state
//! root removed, or a tmpfs root cleared) is reclaimed by the next allocation. A holder
//! whose `create` was killed keeps its range until `delete --force`: its init may
//! already run under that range.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::idpool_spec::{self, Refusal};
use super::{DEFAULT_MAX_SIZE, DEFAULT_POOL_SIZE, DEFAULT_POOL_START, IdMap, UsernsConfig};
use crate::sys::fs::{IoAt, io_at, write_atomic};
use crate::sys::lock::{Mode, lock_dir};

/// Ranges start at multiples of this many IDs (the usual container range size).
pub(crate) const ALIGN: u64 = 65_536;

/// The default `[userns] pool_dir`. On /run, a tmpfs that is cleared at boot (FHS 3.0
/// §3.15, "/run: Run-time variable data"; systemd's and Debian's /run is tmpfs): every
/// container dies with the host, so no range may outlive a boot, and ranges of state
/// roots on disk whose containers died at reboot are not carried over. Outside every
/// state root (`/run/siloc` is podman's and the CLI's default root), so no `--root`
/// owns it.
pub(crate) const DEFAULT_POOL_DIR: &str = "/run/siloc-idpool";

/// The table's file name inside the pool directory.
pub(crate) const TABLE_FILE: &str = "ranges.json";

/// The host IDs siloc may hand out: uids from `uid_start`, gids from `gid_start`,
/// `size` of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Pool {
    pub(crate) uid_start: u32,
    pub(crate) gid_start: u32,
    pub(crate) size: u32,
}

/// One container's host IDs: container ID 0 maps to host `uid`/`gid`, `size` IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Range {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) size: u32,
}

/// Who holds an entry: a container id under a state root (canonical path).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Holder {
    pub(crate) root: PathBuf,
    pub(crate) id: String,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (state root {})", self.id, self.root.display())
    }
}

/// What an entry is: a range siloc handed out, or a spec's own mappings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Kind {
    Auto,
    Spec,
}

/// `size` host IDs from `host`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Span {
    pub(crate) host: u32,
    pub(crate) size: u32,
}

/// One line of the table: who holds which host uids and gids.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Entry {
    pub(crate) root: PathBuf,
    pub(crate) id: String,
    pub(crate) kind: Kind,
    pub(crate) uid: Vec<Span>,
    pub(crate) gid: Vec<Span>,
}

impl Entry {
    fn holder_is(&self, root: &Path, id: &str) -> bool {
        self.root == root && self.id == id
    }

    fn holder(&self) -> Holder {
        Holder {
            root: self.root.clone(),
            id: self.id.clone(),
        }
    }
}

/// Errors from the pool; each names the file or the request.
#[derive(Debug, thiserror::Error)]
pub(crate) enum IdPoolError {
    /// No free range: names the pool (its first host uid/gid and size, the
    /// `[userns] pool_start`/`pool_size` in force) and its table file, so that a host
    /// with several siloc configs (the shim's `SILOC_CONFIG`, podman's default) shows
    /// which pool is full.
    #[error(
        "ID pool exhausted: no free range of {size} IDs in the pool of {pool_size} IDs \
         from uid {uid_start}/gid {gid_start} (table {}; {live} ranges or spec mappings \
         live); delete containers or enlarge [userns] pool_size",
        table.display()
    )]
    Exhausted {
        size: u32,
        pool_size: u32,
        uid_start: u32,
        gid_start: u32,
        table: PathBuf,
        live: usize,
    },
    #[error(
        "user namespace size {size} (io.siloc.userns.size, default [userns] size) does not \
         fit the ID pool ({pool_size} IDs)"
    )]
    TooLarge { size: u32, pool_size: u32 },
    #[error("container {0} already holds an ID range")]
    AlreadyHeld(String),
    #[error(transparent)]
    SpecTooWide(Box<SpecTooWide>),
    #[error(transparent)]
    SpecOverlaps(Box<SpecOverlaps>),
    #[error("ID pool table {0}")]
    Io(#[from] IoAt),
    #[error(
        "ID pool table {path}: {msg} (fix or remove the file; with no container running, \
         removing it is safe)"
    )]
    Corrupt { path: PathBuf, msg: String },
}

/// A spec mapping covering more of the pool than the cap ([`super::idpool_spec`]).
#[derive(Debug, thiserror::Error)]
#[error(
    "linux.{field} {maps} covers {covered} IDs of the host ID pool ({pool}), more than \
     the per-container cap of {cap} IDs ([userns] max_size): held, it would block every \
     range siloc hands out there; map IDs outside the pool, or raise [userns] max_size"
)]
pub(crate) struct SpecTooWide {
    pub(crate) field: &'static str,
    pub(crate) maps: String,
    pub(crate) covered: u64,
    pub(crate) pool: String,
    pub(crate) cap: u32,
}

/// A spec mapping overlapping a range handed out to another container.
#[derive(Debug, thiserror::Error)]
#[error(
    "linux.{field} {maps} overlaps the ID range uid={uid},gid={gid},size={size} that \
     container {holder} holds: two user namespaces would share host IDs. Only a \
     container joining that container's user namespace (a user namespace path, as a \
     pod's app containers join their sandbox's) may repeat its range, exactly"
)]
pub(crate) struct SpecOverlaps {
    pub(crate) field: &'static str,
    pub(crate) maps: String,
    pub(crate) holder: Holder,
    pub(crate) uid: String,
    pub(crate) gid: String,
    pub(crate) size: String,
}

/// The table file's contents.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Table {
    pub(super) entries: Vec<Entry>,
}

impl Pool {
    /// The pool from the config, else from /etc/subuid + /etc/subgid (`containers`),
    /// else the built-in default.
    pub(crate) fn from_config(cfg: &UsernsConfig) -> Pool {
        Self::resolve(cfg, Path::new("/etc/subuid"), Path::new("/etc/subgid"))
    }

    fn resolve(cfg: &UsernsConfig, subuid: &Path, subgid: &Path) -> Pool {
        // Host IDs are u32: a pool never reaches past u32::MAX.
        let fit = |start: u32, size: u32| size.min(u32::MAX - start);
        if let Some(start) = cfg.pool_start {
            return Pool {
                uid_start: start,
                gid_start: start,
                size: fit(start, cfg.pool_size.unwrap_or(DEFAULT_POOL_SIZE)),
            };
        }
        let u = sub_id_entry(subuid, "containers");
        let g = sub_id_entry(subgid, "containers");
        if let (Some((us, un)), Some((gs, gn))) = (u, g) {
            return Pool {
                uid_start: us,
                gid_start: gs,
                size: fit(
                    us.max(gs),
                    cfg.pool_size.unwrap_or(u32::MAX).min(un).min(gn),
                ),
            };
        }
        Pool {
            uid_start: DEFAULT_POOL_START,
            gid_start: DEFAULT_POOL_START,
            size: cfg.pool_size.unwrap_or(DEFAULT_POOL_SIZE),
        }
    }

    /// The range at `offset` IDs into the pool.
    pub(super) fn range_at(self, offset: u64, size: u32) -> Range {
        Range {
            uid: self.uid_start + offset as u32,
            gid: self.gid_start + offset as u32,
            size,
        }
    }
}

/// The first `name:start:count` line of a subuid(5)/subgid(5) file.
fn sub_id_entry(path: &Path, name: &str) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let mut f = l.trim().split(':');
        (f.next()? == name).then_some(())?;
        Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
    })
}

/// Whether container `id` under state root `root` still has state (the caller's rule;
/// lifecycle: its record dir or its container dir exists). Entries of holders for
/// which it says `false` are reclaimed.
pub(crate) type HolderAlive = fn(root: &Path, id: &str) -> bool;

/// Whether the user namespace a spec joins by path is that of container `id` under
/// state root `root` (the holder of a pool entry).
pub(crate) type JoinsHolder<'a> = &'a dyn Fn(&Path, &str) -> bool;

/// The host's pool table, seen by one state root (the holder of what it allocates).
pub(crate) struct IdPool {
    dir: PathBuf,
    root: PathBuf,
    pool: Pool,
    alive: HolderAlive,
    /// `[userns] max_size`: the most pool IDs a spec mapping may cover.
    cap: u32,
}

impl IdPool {
    /// The table in `pool_dir`, for containers under `state_root` (canonicalized when
    /// it exists, so two spellings of one root are one holder). Nothing is touched
    /// until a call.
    pub(crate) fn new(
        pool_dir: &Path,
        state_root: &Path,
        pool: Pool,
        alive: HolderAlive,
    ) -> IdPool {
        IdPool {
            dir: pool_dir.to_path_buf(),
            root: std::fs::canonicalize(state_root).unwrap_or_else(|_| state_root.to_path_buf()),
            pool,
            alive,
            cap: DEFAULT_MAX_SIZE,
        }
    }

    /// The same pool with `cap` (`[userns] max_size`) as the most pool IDs one spec
    /// mapping may cover (default [`DEFAULT_MAX_SIZE`]).
    pub(crate) fn with_cap(mut self, cap: u32) -> IdPool {
        self.cap = cap;
        self
    }

    /// The table file, `<pool_dir>/ranges.json`.
    fn table_path(&self) -> PathBuf {
        self.dir.join(TABLE_FILE)
    }

    /// Runs `f` on the table under the exclusive lock and saves the table if it changed.
    /// A table an earlier siloc left under this state root is imported first
    /// ([`super::idpool_import`]).
    fn with_table<T>(
        &self,
        f: impl FnOnce(&mut Table) -> Result<(T, bool), IdPoolError>,
    ) -> Result<T, IdPoolError> {
        let _lock = lock_dir(&self.dir, Mode::Exclusive).map_err(io_at(&self.dir))?;
        let path = self.table_path();
        let mut table = read_table(&path)?;
        let legacy = super::idpool_import::import(&self.root, self.pool, self.alive, &mut table)?;
        let (out, changed) = f(&mut table)?;
        if changed || legacy.is_some() {
            save_table(&path, &table)?;
        }
        if let Some(old) = legacy {
            super::idpool_import::remove_old(&self.root, &old);
        }
        Ok(out)
    }

    /// Gives container `id` a free range of `size` IDs (first fit, aligned).
    ///
    /// Errors: [`IdPoolError::Exhausted`], [`IdPoolError::TooLarge`],
    /// [`IdPoolError::AlreadyHeld`], table I/O.
    #[cfg(test)]
    pub(crate) fn allocate(&self, id: &str, size: u32) -> Result<Range, IdPoolError> {
        self.allocate_preferring(id, size, None)
    }

    /// As [`IdPool::allocate`], but the range whose host root is `prefer` (uid, gid)
    /// when that one is aligned, inside the pool and free: a persistent upper dir is
    /// owned by the range of the container that made it, and its files keep their
    /// owners only under that range. Otherwise first fit, as `allocate`. Entries of
    /// holders that left no state are reclaimed first.
    ///
    /// Errors: as [`IdPool::allocate`].
    pub(crate) fn allocate_preferring(
        &self,
        id: &str,
        size: u32,
        prefer: Option<(u32, u32)>,
    ) -> Result<Range, IdPoolError> {
        let pool = self.pool;
        if size == 0 || size > pool.size {
            return Err(IdPoolError::TooLarge {
                size,
                pool_size: pool.size,
            });
        }
        self.with_table(|t| {
            if t.entries.iter().any(|e| e.holder_is(&self.root, id)) {
                return Err(IdPoolError::AlreadyHeld(id.to_string()));
            }
            reclaim(&mut t.entries, self.alive);
            let offset =
                choose(&t.entries, pool, size, prefer).ok_or_else(|| IdPoolError::Exhausted {
                    size,
                    pool_size: pool.size,
                    uid_start: pool.uid_start,
                    gid_start: pool.gid_start,
                    table: self.table_path(),
                    live: t.entries.len(),
                })?;
            let r = pool.range_at(offset, size);
            t.entries.push(Entry {
                root: self.root.clone(),
                id: id.to_string(),
                kind: Kind::Auto,
                uid: vec![Span { host: r.uid, size }],
                gid: vec![Span { host: r.gid, size }],
            });
            Ok((r, true))
        })
    }

    /// Records the mappings container `id`'s spec brought (host side of each line), so
    /// no range overlapping them is handed out while it lives, after the checks of
    /// [`idpool_spec`] (`joins`: `Some` when the spec joins a user namespace by path,
    /// saying whether it is the namespace of container `(state root, id)`). Nothing is
    /// recorded for empty mappings, nor when refused. Entries of holders that left no
    /// state are reclaimed first.
    ///
    /// Errors: [`IdPoolError::SpecTooWide`], [`IdPoolError::SpecOverlaps`],
    /// [`IdPoolError::AlreadyHeld`], table I/O.
    pub(crate) fn hold_spec(
        &self,
        id: &str,
        uid: &[IdMap],
        gid: &[IdMap],
        joins: Option<JoinsHolder<'_>>,
    ) -> Result<(), IdPoolError> {
        if uid.is_empty() && gid.is_empty() {
            return Ok(());
        }
        let spans = |m: &[IdMap]| -> Vec<Span> {
            m.iter()
                .map(|m| Span {
                    host: m.host_id,
                    size: m.size,
                })
                .collect()
        };
        let (us, gs) = (spans(uid), spans(gid));
        self.with_table(|t| {
            if t.entries.iter().any(|e| e.holder_is(&self.root, id)) {
                return Err(IdPoolError::AlreadyHeld(id.to_string()));
            }
            reclaim(&mut t.entries, self.alive);
            let owns = |e: &Entry| joins.is_some_and(|f| f(&e.root, &e.id));
            let owns: Option<&dyn Fn(&Entry) -> bool> = joins.map(|_| &owns as _);
            idpool_spec::check(&t.entries, self.pool, self.cap, &us, &gs, owns)
                .map_err(|r| self.refusal(r, uid, gid))?;
            t.entries.push(Entry {
                root: self.root.clone(),
                id: id.to_string(),
                kind: Kind::Spec,
                uid: us,
                gid: gs,
            });
            Ok(((), true))
        })
    }

    /// The error for refusal `r` of mappings `uid`/`gid`.
    fn refusal(&self, r: Refusal, uid: &[IdMap], gid: &[IdMap]) -> IdPoolError {
        let text = |m: &[IdMap]| {
            let lines: Vec<String> = m
                .iter()
                .map(|m| format!("{} {} {}", m.container_id, m.host_id, m.size))
                .collect();
            format!("[{}]", lines.join(", "))
        };
        let which = |is_uid: bool| {
            if is_uid {
                ("uidMappings", text(uid))
            } else {
                ("gidMappings", text(gid))
            }
        };
        match r {
            Refusal::TooWide { uid: u, covered } => {
                let (field, maps) = which(u);
                let start = if u {
                    self.pool.uid_start
                } else {
                    self.pool.gid_start
                };
                IdPoolError::SpecTooWide(Box::new(SpecTooWide {
                    field,
                    maps,
                    covered,
                    pool: format!(
                        "host {}s {start}..={}",
                        if u { "uid" } else { "gid" },
                        u64::from(start) + u64::from(self.pool.size).max(1) - 1
                    ),
                    cap: self.cap,
                }))
            }
            Refusal::Overlaps { uid: u, entry } => {
                let (field, maps) = which(u);
                let list = |v: &[Span]| {
                    v.iter()
                        .map(|s| s.host.to_string())
                        .collect::<Vec<_>>()
                        .join("+")
                };
                let sizes: Vec<String> = entry.uid.iter().map(|s| s.size.to_string()).collect();
                IdPoolError::SpecOverlaps(Box::new(SpecOverlaps {
                    field,
                    maps,
                    holder: entry.holder(),
                    uid: list(&entry.uid),
                    gid: list(&entry.gid),
                    size: sizes.join("+"),
                }))
            }
        }
    }

    /// Releases every entry container `id` of this state root holds. Returns whether
    /// it held one; releasing twice is not an error, so `delete --force` can always
    /// call it.
    pub(crate) fn release(&self, id: &str) -> Result<bool, IdPoolError> {
        self.with_table(|t| {
            let before = t.entries.len();
            t.entries.retain(|e| !e.holder_is(&self.root, id));
            let had = t.entries.len() != before;
            Ok((had, had))
        })
    }

    /// The range container `id` of this state root was handed out, if any.
    #[cfg(test)]
    pub(crate) fn get(&self, id: &str) -> Result<Option<Range>, IdPoolError> {
        self.with_table(|t| {
            let r = t
                .entries
                .iter()
                .find(|e| e.kind == Kind::Auto && e.holder_is(&self.root, id))
                .and_then(auto_range);
            Ok((r, false))
        })
    }

    /// The holder of an entry (of any state root, either kind) that holds host uid
    /// `uid`, other than container `except` of this state root, if any.
    ///
    /// Errors: table I/O.
    pub(crate) fn holder_of(&self, uid: u32, except: &str) -> Result<Option<Holder>, IdPoolError> {
        self.with_table(|t| {
            let h = t
                .entries
                .iter()
                .find(|e| {
                    !e.holder_is(&self.root, except)
                        && e.uid
                            .iter()
                            .any(|s| (u64::from(s.host)..end(s)).contains(&u64::from(uid)))
                })
                .map(Entry::holder);
            Ok((h, false))
        })
    }

    /// Every entry of the host's table (all state roots).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> Result<Vec<Entry>, IdPoolError> {
        self.with_table(|t| Ok((t.entries.clone(), false)))
    }
}

fn end(s: &Span) -> u64 {
    u64::from(s.host) + u64::from(s.size)
}

#[cfg(test)]
fn auto_range(e: &Entry) -> Option<Range> {
    match (e.uid.as_slice(), e.gid.as_slice()) {
        ([u], [g]) => Some(Range {
            uid: u.host,
            gid: g.host,
            size: u.size,
        }),
        _ => None,
    }
}

/// Reads the table at `path`; a missing file is an empty table.
///
/// Errors: [`IdPoolError::Corrupt`] naming the file, or its I/O error.
pub(super) fn read_table(path: &Path) -> Result<Table, IdPoolError> {
    match std::fs::read(path) {
        Ok(b) => serde_json::from_slice(&b).map_err(|e| IdPoolError::Corrupt {
            path: path.to_path_buf(),
            msg: e.to_string(),
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Table::default()),
        Err(e) => Err(io_at(path)(e).into()),
    }
}

/// Writes the table atomically (a crash leaves the old table or the new one, never
/// half), or removes the file when the table is empty.
fn save_table(path: &Path, table: &Table) -> Result<(), IdPoolError> {
    if table.entries.is_empty() {
        return match std::fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_at(path)(e).into()),
            _ => Ok(()),
        };
    }
    let body = serde_json::to_vec_pretty(table).map_err(|e| IdPoolError::Corrupt {
        path: path.to_path_buf(),
        msg: e.to_string(),
    })?;
    Ok(write_atomic(path, &body)?)
}

/// Drops the entries whose holder `alive` says left no state.
fn reclaim(entries: &mut Vec<Entry>, alive: HolderAlive) {
    entries.retain(|e| {
        let keep = alive(&e.root, &e.id);
        if !keep {
            tracing::info!(
                holder = %e.holder(),
                "ID pool: reclaiming the entry of a container that left no state"
            );
        }
        keep
    });
}

/// The offset spans (IDs from the pool's start, half-open) that `entries` take: each
/// uid span relative to `pool.uid_start` and each gid span relative to
/// `pool.gid_start`, as a range at offset o maps uids and gids from o; clipped below
/// the start. Pure, so the rule is unit-tested.
fn taken(entries: &[Entry], pool: Pool) -> Vec<(u64, u64)> {
    let rel = |spans: &[Span], start: u32| -> Vec<(u64, u64)> {
        let start = u64::from(start);
        spans
            .iter()
            .filter(|s| end(s) > start && s.size > 0)
            .map(|s| (u64::from(s.host).max(start) - start, end(s) - start))
            .collect()
    };
    entries
        .iter()
        .flat_map(|e| {
            let mut v = rel(&e.uid, pool.uid_start);
            v.extend(rel(&e.gid, pool.gid_start));
            v
        })
        .collect()
}

/// The offset of the range to hand out: `prefer`'s when it is a range start of the
/// pool (uid and gid the same offset) and free, else the first fit. Pure.
fn choose(entries: &[Entry], pool: Pool, size: u32, prefer: Option<(u32, u32)>) -> Option<u64> {
    let spans = taken(entries, pool);
    let wanted = prefer.and_then(|(u, g)| {
        let off = u64::from(u.checked_sub(pool.uid_start)?);
        (u64::from(g.checked_sub(pool.gid_start)?) == off).then_some(off)
    });
    wanted
        .filter(|&o| fits_at(&spans, o, size, pool.size))
        .or_else(|| first_fit(&spans, size, pool.size))
}

/// Whether `size` IDs at `offset` are aligned, inside `pool_size` and clear of every
/// taken span. Pure, so the rule is unit-tested.
fn fits_at(taken: &[(u64, u64)], offset: u64, size: u32, pool_size: u32) -> bool {
    let end = offset + u64::from(size);
    offset.is_multiple_of(ALIGN)
        && end <= u64::from(pool_size)
        && taken.iter().all(|&(s, e)| end <= s || e <= offset)
}

/// The lowest aligned offset where `size` IDs fit between the taken spans (which may
/// overlap each other) and below `pool_size`. Pure, so the packing rule is unit-tested.
fn first_fit(taken: &[(u64, u64)], size: u32, pool_size: u32) -> Option<u64> {
    let mut spans = taken.to_vec();
    spans.sort_unstable();
    let mut candidate = 0u64;
    for (start, end) in spans {
        if candidate + u64::from(size) <= start {
            break;
        }
        candidate = candidate.max(end.div_ceil(ALIGN) * ALIGN);
    }
    (candidate + u64::from(size) <= u64::from(pool_size)).then_some(candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(size: u32) -> Pool {
        Pool {
            uid_start: 100_000,
            gid_start: 200_000,
            size,
        }
    }

    fn always(_: &Path, _: &str) -> bool {
        true
    }

    /// Alive while `<root>/<id>` exists, as lifecycle's rule.
    fn has_dir(root: &Path, id: &str) -> bool {
        root.join(id).exists()
    }

    fn entry(root: &str, id: &str, kind: Kind, uid: (u32, u32), gid: (u32, u32)) -> Entry {
        Entry {
            root: root.into(),
            id: id.into(),
            kind,
            uid: vec![Span {
                host: uid.0,
                size: uid.1,
            }],
            gid: vec![Span {
                host: gid.0,
                size: gid.1,
            }],
        }
    }

    /// A pool table in a temp dir, for state root `root`.
    fn at(d: &Path, root: &str, size: u32, alive: HolderAlive) -> IdPool {
        IdPool::new(&d.join("pool"), Path::new(root), pool(size), alive)
    }

    #[test]
    fn first_fit_packs_and_reuses_holes() {
        let mut t = vec![];
        assert_eq!(first_fit(&t, 65536, 4 * 65536), Some(0));
        t.push((0, 65536));
        t.push((65536, 131072));
        assert_eq!(first_fit(&t, 65536, 4 * 65536), Some(131072));
        t.remove(0);
        assert_eq!(first_fit(&t, 65536, 4 * 65536), Some(0));
        // a small range still starts on an aligned boundary after a taken one
        t.push((0, 1000));
        assert_eq!(first_fit(&t, 10, 4 * 65536), Some(131072));
        assert_eq!(first_fit(&t, 65536 * 3, 4 * 65536), None);
        // overlapping spans (a pod's app containers repeat the sandbox's range)
        assert_eq!(
            first_fit(&[(0, 65536), (0, 65536), (10, 20)], 65536, 4 * 65536),
            Some(65536)
        );
    }

    #[test]
    fn a_preferred_range_is_taken_only_when_aligned_inside_and_free() {
        let taken = [(65536, 131072)];
        let pool_size = 4 * 65536;
        assert!(fits_at(&taken, 0, 65536, pool_size));
        assert!(fits_at(&taken, 2 * 65536, 65536, pool_size));
        assert!(!fits_at(&taken, 65536, 65536, pool_size), "taken");
        assert!(!fits_at(&taken, 0, 65537, pool_size), "runs into a");
        assert!(!fits_at(&taken, 1000, 1, pool_size), "unaligned");
        assert!(
            !fits_at(&taken, 3 * 65536, 65537, pool_size),
            "past the pool"
        );
        let dir = tempfile::tempdir().unwrap();
        let p = at(dir.path(), "/r", 4 * 65536, always);
        p.allocate("x", 65536).unwrap();
        let want = (100_000 + 2 * 65536, 200_000 + 2 * 65536);
        let r = p.allocate_preferring("a", 65536, Some(want)).unwrap();
        assert_eq!((r.uid, r.gid), want);
        // Held now, or not a range start, or uid and gid apart: first fit instead.
        for prefer in [want, (100_005, 200_005), (want.0, 200_000)] {
            let r = p.allocate_preferring("b", 65536, Some(prefer)).unwrap();
            assert_eq!(r.uid, 100_000 + 65536, "{prefer:?}");
            p.release("b").unwrap();
        }
    }

    /// Spec mappings are taken in host-ID space: a uid mapping blocks the range whose
    /// uids it overlaps, a gid mapping the range whose gids it overlaps, whatever their
    /// alignment; mappings below or beyond the pool block nothing.
    #[test]
    fn spec_mappings_block_the_ranges_they_overlap() {
        let p = pool(8 * 65536);
        let spec = |uid, gid| entry("/other", "pod", Kind::Spec, uid, gid);
        // uids 100000+65536+5.. : the second range's uids
        let e = [spec((100_000 + 65_541, 10), (0, 65536))];
        assert_eq!(choose(&e, p, 65536, None), Some(0));
        let e = [
            spec((100_000, 10), (0, 1)),
            spec((0, 1), (200_000 + 65_536, 3 * 65_536)),
        ];
        assert_eq!(choose(&e, p, 65536, None), Some(4 * 65536));
        // a preferred range overlapping a spec mapping is not handed out
        assert_eq!(
            choose(&e, p, 65536, Some((100_000 + 65_536, 200_000 + 65_536))),
            Some(4 * 65536)
        );
        // below the pool start / past its end: no effect
        let e = [spec((1000, 99_000), (u32::MAX - 10, 10))];
        assert!(taken(&e, p).iter().all(|&(s, _)| s >= u64::from(p.size)));
        assert_eq!(choose(&e, p, 65536, None), Some(0));
        // straddling the start: clipped
        assert_eq!(taken(&[spec((99_000, 2000), (0, 0))], p), vec![(0, 1000)]);
        // the whole pool mapped by a spec: exhausted
        let e = [spec((0, u32::MAX), (0, 1))];
        assert_eq!(choose(&e, p, 1, None), None);
    }

    /// Two state roots share one table: the second root's container gets the next
    /// range, releases only touch their own root's entries.
    #[test]
    fn two_roots_get_disjoint_ranges_and_release_their_own() {
        let d = tempfile::tempdir().unwrap();
        let a = at(d.path(), "/root-a", 4 * 65536, always);
        let b = at(d.path(), "/root-b", 4 * 65536, always);
        let ra = a.allocate("c", 65536).unwrap();
        let rb = b.allocate("c", 65536).unwrap();
        assert_eq!((ra.uid, rb.uid), (100_000, 100_000 + 65536));
        assert!(matches!(
            a.allocate("c", 1),
            Err(IdPoolError::AlreadyHeld(_))
        ));
        assert_eq!(b.get("c").unwrap(), Some(rb));
        assert!(b.release("c").unwrap());
        assert_eq!(a.get("c").unwrap(), Some(ra), "a's entry stays");
        let h = b.holder_of(100_005, "c").unwrap().unwrap();
        assert_eq!(
            (h.root.as_path(), h.id.as_str()),
            (Path::new("/root-a"), "c")
        );
        assert_eq!(a.holder_of(100_005, "c").unwrap(), None, "itself");
        assert!(a.release("c").unwrap());
        assert_eq!(std::fs::read_dir(d.path().join("pool")).unwrap().count(), 0);
    }

    #[test]
    fn spec_entries_are_held_and_released_by_holder() {
        let d = tempfile::tempdir().unwrap();
        let a = at(d.path(), "/a", 4 * 65536, always);
        let m = |h| {
            vec![IdMap {
                container_id: 0,
                host_id: h,
                size: 65536,
            }]
        };
        a.hold_spec("pod", &m(100_000), &m(200_000), None).unwrap();
        a.hold_spec("none", &[], &[], None).unwrap();
        assert_eq!(a.entries().unwrap().len(), 1, "empty mappings: no entry");
        assert_eq!(a.allocate("c", 65536).unwrap().uid, 100_000 + 65536);
        assert!(a.release("pod").unwrap());
        assert_eq!(a.allocate("d", 65536).unwrap().uid, 100_000);
    }

    /// A refused spec mapping names the mapping, the other container and its range,
    /// and leaves the table as it was.
    #[test]
    fn a_refused_spec_mapping_is_named_and_not_recorded() {
        let d = tempfile::tempdir().unwrap();
        let a = at(d.path(), "/a", 8 * 65536, always);
        let b = at(d.path(), "/b", 8 * 65536, always).with_cap(2 * 65536);
        a.allocate("sandbox", 65536).unwrap();
        let m = |h, n| {
            vec![IdMap {
                container_id: 0,
                host_id: h,
                size: n,
            }]
        };
        let e = b
            .hold_spec("c", &m(100_000 + 5, 10), &m(900_000, 10), None)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "linux.uidMappings [0 100005 10] overlaps the ID range \
             uid=100000,gid=200000,size=65536 that container sandbox (state root /a) holds: \
             two user namespaces would share host IDs. Only a container joining that \
             container's user namespace (a user namespace path, as a pod's app containers \
             join their sandbox's) may repeat its range, exactly"
        );
        // the pod's app container, joining with the sandbox's range
        let sandboxs = |r: &Path, id: &str| r == Path::new("/a") && id == "sandbox";
        b.hold_spec(
            "app",
            &m(100_000, 65536),
            &m(200_000, 65536),
            Some(&sandboxs),
        )
        .unwrap();
        // the same range joining a namespace that is not the sandbox's
        assert!(
            b.hold_spec(
                "other",
                &m(100_000, 65536),
                &m(200_000, 65536),
                Some(&|_, _| false)
            )
            .is_err()
        );
        let e = b
            .hold_spec("huge", &m(1, u32::MAX - 1), &m(1, u32::MAX - 1), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(
                "linux.uidMappings [0 1 4294967294] covers 524288 IDs of the host ID pool \
                 (host uids 100000..=624287), more than the per-container cap of 131072 IDs \
                 ([userns] max_size)"
            ),
            "{e}"
        );
        let ids: Vec<_> = a.entries().unwrap().into_iter().map(|e| e.id).collect();
        assert_eq!(ids, ["sandbox", "app"]);
    }

    /// An entry whose holder left no state under its root is reclaimed by the next
    /// allocation, from any root; one whose holder has state is kept.
    #[test]
    fn entries_of_holders_without_state_are_reclaimed() {
        let d = tempfile::tempdir().unwrap();
        let ra = d.path().join("a");
        let rb = d.path().join("b");
        for r in [&ra, &rb] {
            std::fs::create_dir_all(r.join("live")).unwrap();
        }
        let a = IdPool::new(&d.path().join("pool"), &ra, pool(4 * 65536), has_dir);
        let b = IdPool::new(&d.path().join("pool"), &rb, pool(4 * 65536), has_dir);
        assert_eq!(a.allocate("live", 65536).unwrap().uid, 100_000);
        std::fs::create_dir_all(ra.join("gone")).unwrap();
        assert_eq!(a.allocate("gone", 65536).unwrap().uid, 100_000 + 65536);
        std::fs::remove_dir(ra.join("gone")).unwrap();
        assert_eq!(b.allocate("live", 65536).unwrap().uid, 100_000 + 65536);
        // a whole state root removed
        std::fs::remove_dir_all(&ra).unwrap();
        std::fs::create_dir_all(rb.join("x")).unwrap();
        assert_eq!(b.allocate("x", 65536).unwrap().uid, 100_000);
        let held: Vec<_> = b.entries().unwrap().into_iter().map(|e| e.id).collect();
        assert_eq!(held, ["live", "x"]);
    }

    /// The exhaustion error names which pool is full (first IDs, size, table file):
    /// a node with the shim's SILOC_CONFIG and podman's default has two.
    #[test]
    fn exhausted_names_the_pool_and_its_table() {
        let d = tempfile::tempdir().unwrap();
        let p = at(d.path(), "/r", 65536, always);
        p.allocate("a", 65536).unwrap();
        let e = p.allocate("b", 65536).unwrap_err().to_string();
        let table = d.path().join("pool").join(TABLE_FILE);
        assert!(e.contains("ID pool exhausted"), "{e}");
        assert!(
            e.contains("the pool of 65536 IDs from uid 100000/gid 200000"),
            "{e}"
        );
        assert!(e.contains(&format!("table {}", table.display())), "{e}");
        assert!(e.contains("[userns] pool_size"), "{e}");
    }

    #[test]
    fn allocate_release_exhaust() {
        let d = tempfile::tempdir().unwrap();
        let p = at(d.path(), "/r", 2 * 65536, always);
        let a = p.allocate("a", 65536).unwrap();
        assert_eq!((a.uid, a.gid, a.size), (100_000, 200_000, 65536));
        let b = p.allocate("b", 65536).unwrap();
        assert_eq!(b.uid, 100_000 + 65536);
        let e = p.allocate("c", 65536).unwrap_err();
        assert!(e.to_string().contains("exhausted"), "{e}");
        assert!(p.release("a").unwrap());
        assert!(!p.release("a").unwrap());
        assert_eq!(p.allocate("c", 65536).unwrap().uid, 100_000);
        assert_eq!(p.get("b").unwrap(), Some(b));
        let e = p.allocate("d", 3 * 65536).unwrap_err();
        assert!(e.to_string().contains("io.siloc.userns.size"), "{e}");
        assert!(matches!(
            p.allocate("d", 3 * 65536),
            Err(IdPoolError::TooLarge { .. })
        ));
        p.release("b").unwrap();
        p.release("c").unwrap();
        assert_eq!(
            std::fs::read_dir(d.path().join("pool")).unwrap().count(),
            0,
            "empty pool leaves no table"
        );
    }

    #[test]
    fn a_corrupt_table_is_named_and_left_alone() {
        let d = tempfile::tempdir().unwrap();
        let p = at(d.path(), "/r", 2 * 65536, always);
        std::fs::create_dir_all(d.path().join("pool")).unwrap();
        let file = d.path().join("pool").join(TABLE_FILE);
        std::fs::write(&file, b"{\"entries\": [tru").unwrap();
        let e = p.allocate("a", 65536).unwrap_err().to_string();
        assert!(e.contains(&*file.to_string_lossy()), "{e}");
        let e = p.release("a").unwrap_err().to_string();
        assert!(e.contains(&*file.to_string_lossy()), "{e}");
        assert_eq!(std::fs::read(&file).unwrap(), b"{\"entries\": [tru");
        // a pool dir that is a file
        let p = IdPool::new(&file, Path::new("/r"), pool(65536), always);
        let e = p.allocate("a", 1).unwrap_err().to_string();
        assert!(e.contains(&*file.to_string_lossy()), "{e}");
    }

    #[test]
    fn parallel_allocations_never_overlap() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().to_path_buf();
        let handles: Vec<_> = (0..32)
            .map(|i| {
                let dir = dir.clone();
                std::thread::spawn(move || {
                    // half the threads in one state root, half in another
                    let root = format!("/root-{}", i % 2);
                    at(&dir, &root, 64 * 65536, always)
                        .allocate(&format!("c{i}"), 65536)
                        .unwrap()
                })
            })
            .collect();
        let mut starts: Vec<u32> = handles.into_iter().map(|h| h.join().unwrap().uid).collect();
        starts.sort_unstable();
        starts.dedup();
        assert_eq!(starts.len(), 32);
    }

    #[test]
    fn subuid_containers_entry_is_the_default_pool() {
        let d = tempfile::tempdir().unwrap();
        let su = d.path().join("subuid");
        let sg = d.path().join("subgid");
        std::fs::write(
            &su,
            "alice:100000:65536\ncontainers:2147483647:2147483648\n",
        )
        .unwrap();
        std::fs::write(&sg, "containers:3000000:1000000\n").unwrap();
        let p = Pool::resolve(&UsernsConfig::default(), &su, &sg);
        assert_eq!(p.uid_start, 2147483647);
        assert_eq!(p.gid_start, 3000000);
        assert_eq!(p.size, 1000000);
        let p = Pool::resolve(&UsernsConfig::default(), &d.path().join("x"), &sg);
        assert_eq!(p.uid_start, DEFAULT_POOL_START);
    }
}
