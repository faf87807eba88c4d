//! Host ID ranges for per-container user namespaces (DESIGN.md item 1).
//!
//! A pool of host IDs (from the config, or the `containers` entry of /etc/subuid and
//! /etc/subgid, see subuid(5)) is cut into ranges; each live container holds one.
//! The table lives at `<state root>/.siloc/idpool.json` and every read and change
//! happens under the state root's exclusive lock (the same `flock(2)` records take), so
//! parallel `create`s never hand out overlapping ranges. An empty table is removed.
//! Ranges start on multiples of [`ALIGN`] IDs within the pool.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{DEFAULT_POOL_SIZE, DEFAULT_POOL_START, UsernsConfig};
use crate::sys::fs::{IoAt, io_at, write_atomic};
use crate::sys::lock::{Mode, lock_dir};

/// Ranges start at multiples of this many IDs (the usual container range size).
const ALIGN: u64 = 65_536;

/// The host IDs siloc may hand out: uids from `uid_start`, gids from `gid_start`,
/// `size` of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Pool {
    uid_start: u32,
    gid_start: u32,
    pub(crate) size: u32,
}

/// One container's host IDs: container ID 0 maps to host `uid`/`gid`, `size` IDs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Range {
    pub(crate) uid: u32,
    pub(crate) gid: u32,
    pub(crate) size: u32,
}

/// Errors from the pool; each names the file or the request.
#[derive(Debug, thiserror::Error)]
pub(crate) enum IdPoolError {
    #[error(
        "ID pool exhausted: no free range of {size} IDs in the pool of {pool_size} IDs \
         ({live} ranges live); delete containers or enlarge [userns] pool_size"
    )]
    Exhausted {
        size: u32,
        pool_size: u32,
        live: usize,
    },
    #[error(
        "user namespace size {size} (io.siloc.userns.size, default [userns] size) does not \
         fit the ID pool ({pool_size} IDs)"
    )]
    TooLarge { size: u32, pool_size: u32 },
    #[error("container {0} already holds an ID range")]
    AlreadyHeld(String),
    #[error("ID pool table {0}")]
    Io(#[from] IoAt),
    #[error("ID pool table {path}: {msg}")]
    Corrupt { path: PathBuf, msg: String },
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Table {
    /// container id → (offset into the pool, size)
    ranges: BTreeMap<String, (u64, u32)>,
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

/// The pool table of one state root.
pub(crate) struct IdPool {
    root: PathBuf,
    dir: PathBuf,
    pool: Pool,
}

impl IdPool {
    /// The table under `<state_root>/.siloc`. Nothing is touched until a call.
    pub(crate) fn new(state_root: &Path, pool: Pool) -> IdPool {
        IdPool {
            root: state_root.to_path_buf(),
            dir: state_root.join(".siloc"),
            pool,
        }
    }

    fn table_path(&self) -> PathBuf {
        self.dir.join("idpool.json")
    }

    /// Runs `f` on the table under the exclusive lock and saves the table if it changed.
    fn with_table<T>(
        &self,
        f: impl FnOnce(&mut Table) -> Result<(T, bool), IdPoolError>,
    ) -> Result<T, IdPoolError> {
        let _lock = lock_dir(&self.root, Mode::Exclusive).map_err(io_at(&self.root))?;
        let path = self.table_path();
        let mut table: Table = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| IdPoolError::Corrupt {
                path: path.clone(),
                msg: e.to_string(),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Table::default(),
            Err(e) => return Err(io_at(&path)(e).into()),
        };
        let (out, changed) = f(&mut table)?;
        if changed && table.ranges.is_empty() {
            match std::fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(io_at(&path)(e).into());
                }
                // An emptied table leaves no directory of its own behind.
                _ => {
                    let _ = std::fs::remove_dir(&self.dir);
                }
            }
        } else if changed {
            // Write-then-rename: a crash leaves the old table or the new one, never half.
            std::fs::create_dir_all(&self.dir).map_err(io_at(&self.dir))?;
            let body = serde_json::to_vec(&table).map_err(|e| IdPoolError::Corrupt {
                path: path.clone(),
                msg: e.to_string(),
            })?;
            write_atomic(&path, &body)?;
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
    /// owners only under that range. Otherwise first fit, as `allocate`.
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
            if t.ranges.contains_key(id) {
                return Err(IdPoolError::AlreadyHeld(id.to_string()));
            }
            let wanted = prefer.and_then(|(u, g)| {
                let off = u64::from(u.checked_sub(pool.uid_start)?);
                (u64::from(g.checked_sub(pool.gid_start)?) == off).then_some(off)
            });
            let offset = wanted
                .filter(|&o| fits_at(&t.ranges, o, size, pool.size))
                .or_else(|| first_fit(&t.ranges, size, pool.size))
                .ok_or(IdPoolError::Exhausted {
                    size,
                    pool_size: pool.size,
                    live: t.ranges.len(),
                })?;
            t.ranges.insert(id.to_string(), (offset, size));
            Ok((range_at(pool, offset, size), true))
        })
    }

    /// Releases container `id`'s range. Returns whether it held one; releasing twice
    /// is not an error, so `delete --force` can always call it.
    pub(crate) fn release(&self, id: &str) -> Result<bool, IdPoolError> {
        self.with_table(|t| {
            let had = t.ranges.remove(id).is_some();
            Ok((had, had))
        })
    }

    /// The range container `id` holds, if any.
    #[cfg(test)]
    pub(crate) fn get(&self, id: &str) -> Result<Option<Range>, IdPoolError> {
        let pool = self.pool;
        self.with_table(|t| Ok((t.ranges.get(id).map(|&(o, s)| range_at(pool, o, s)), false)))
    }

    /// The container whose range holds host uid `uid`, if any.
    ///
    /// Errors: table I/O.
    pub(crate) fn holder_of(&self, uid: u32) -> Result<Option<String>, IdPoolError> {
        Ok(self
            .list()?
            .into_iter()
            .find(|(_, r)| (r.uid..r.uid.saturating_add(r.size)).contains(&uid))
            .map(|(id, _)| id))
    }

    /// Every live allocation, by container id.
    pub(crate) fn list(&self) -> Result<BTreeMap<String, Range>, IdPoolError> {
        let pool = self.pool;
        self.with_table(|t| {
            let m = t
                .ranges
                .iter()
                .map(|(k, &(o, s))| (k.clone(), range_at(pool, o, s)))
                .collect();
            Ok((m, false))
        })
    }
}

fn range_at(pool: Pool, offset: u64, size: u32) -> Range {
    Range {
        uid: pool.uid_start + offset as u32,
        gid: pool.gid_start + offset as u32,
        size,
    }
}

/// Whether `size` IDs at `offset` are aligned, inside `pool_size` and clear of every
/// taken range. Pure, so the rule is unit-tested.
fn fits_at(taken: &BTreeMap<String, (u64, u32)>, offset: u64, size: u32, pool_size: u32) -> bool {
    let end = offset + u64::from(size);
    offset % ALIGN == 0
        && end <= u64::from(pool_size)
        && taken
            .values()
            .all(|&(o, s)| end <= o || o + u64::from(s) <= offset)
}

/// The lowest aligned offset where `size` IDs fit between the taken ranges and below
/// `pool_size`. Pure, so the packing rule is unit-tested.
fn first_fit(taken: &BTreeMap<String, (u64, u32)>, size: u32, pool_size: u32) -> Option<u64> {
    let mut spans: Vec<(u64, u64)> = taken.values().map(|&(o, s)| (o, o + s as u64)).collect();
    spans.sort_unstable();
    let mut candidate = 0u64;
    for (start, end) in spans {
        if candidate + size as u64 <= start {
            break;
        }
        candidate = candidate.max(end.div_ceil(ALIGN) * ALIGN);
    }
    (candidate + size as u64 <= pool_size as u64).then_some(candidate)
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

    #[test]
    fn first_fit_packs_and_reuses_holes() {
        let mut t = BTreeMap::new();
        assert_eq!(first_fit(&t, 65536, 4 * 65536), Some(0));
        t.insert("a".into(), (0, 65536));
        t.insert("b".into(), (65536, 65536));
        assert_eq!(first_fit(&t, 65536, 4 * 65536), Some(131072));
        t.remove("a");
        assert_eq!(first_fit(&t, 65536, 4 * 65536), Some(0));
        // a small range still starts on an aligned boundary after a taken one
        t.insert("a".into(), (0, 1000));
        assert_eq!(first_fit(&t, 10, 4 * 65536), Some(131072));
        assert_eq!(first_fit(&t, 65536 * 3, 4 * 65536), None);
    }

    #[test]
    fn a_preferred_range_is_taken_only_when_aligned_inside_and_free() {
        let taken: BTreeMap<String, (u64, u32)> = [("a".to_string(), (65536, 65536))].into();
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
        let p = IdPool::new(dir.path(), pool(4 * 65536));
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

    #[test]
    fn allocate_release_exhaust() {
        let d = tempfile::tempdir().unwrap();
        let p = IdPool::new(d.path(), pool(2 * 65536));
        let a = p.allocate("a", 65536).unwrap();
        assert_eq!((a.uid, a.gid, a.size), (100_000, 200_000, 65536));
        let b = p.allocate("b", 65536).unwrap();
        assert_eq!(b.uid, 100_000 + 65536);
        assert!(matches!(
            p.allocate("a", 1),
            Err(IdPoolError::AlreadyHeld(_))
        ));
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
            std::fs::read_dir(d.path()).unwrap().count(),
            0,
            "empty pool leaves nothing"
        );
    }

    #[test]
    fn parallel_allocations_never_overlap() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().to_path_buf();
        let handles: Vec<_> = (0..32)
            .map(|i| {
                let root = root.clone();
                std::thread::spawn(move || {
                    IdPool::new(&root, pool(64 * 65536))
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
