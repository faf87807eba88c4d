//! Migration from the per-state-root pool tables of siloc before the host-wide pool
//! ([`super::idpool`]): `<root>/.siloc/idpool.json`, `{"ranges": {"<id>": [offset,
//! size]}}`, offsets into the pool of the config then in force.
//!
//! The first command with that `--root` that touches the pool (a `create` or `delete`
//! of a container with a range or spec mappings) imports the table: each range whose
//! holder still has state becomes an `auto` entry of the host table (host IDs computed
//! with today's pool config, the same file the old siloc read), and the old file is
//! removed once the host table is saved. Containers of such a root keep their ranges
//! and are released by `delete` as any other, and new ranges never overlap them. Not
//! imported, but documented (README "ID ranges"): a root no command touches, whose
//! ranges stay invisible to other roots until then; scanning every possible state
//! root is not possible (any directory can be one), and the old tables live on /run
//! like the host table, so a reboot leaves nothing to import. Ranges two roots were
//! both given by the old siloc (the bug the host pool fixes) stay shared until one of
//! them is deleted. Old and new siloc must not run side by side.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::idpool::{Entry, HolderAlive, IdPoolError, Kind, Pool, Span, Table};
use crate::sys::fs::io_at;
use crate::sys::lock::{Mode, lock_dir};

/// The old table's path under state root `root`.
pub(crate) fn old_table(root: &Path) -> PathBuf {
    root.join(".siloc").join("idpool.json")
}

#[derive(Deserialize)]
struct OldTable {
    /// container id → (offset into the pool, size)
    ranges: BTreeMap<String, (u64, u32)>,
}

/// Adds the live entries of `root`'s old table to `table` (none already there for the
/// same holder). Returns the old file's path when there was one, for
/// [`remove_old`] after the host table is saved. Call with the pool lock held.
///
/// Errors: [`IdPoolError::Corrupt`] naming the old file, or its I/O error.
pub(super) fn import(
    root: &Path,
    pool: Pool,
    alive: HolderAlive,
    table: &mut Table,
) -> Result<Option<PathBuf>, IdPoolError> {
    let path = old_table(root);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_at(&path)(e).into()),
    };
    let old: OldTable = serde_json::from_slice(&bytes).map_err(|e| IdPoolError::Corrupt {
        path: path.clone(),
        msg: e.to_string(),
    })?;
    for (id, (offset, size)) in old.ranges {
        let known = table.entries.iter().any(|e| e.root == root && e.id == id);
        let host = |start: u32| u32::try_from(u64::from(start) + offset).ok();
        let (Some(uid), Some(gid)) = (host(pool.uid_start), host(pool.gid_start)) else {
            tracing::warn!(
                id,
                offset,
                "old ID pool entry past the last host ID: skipped"
            );
            continue;
        };
        if known || !alive(root, &id) {
            continue;
        }
        tracing::info!(id, uid, gid, size, root = %root.display(), "ID pool: imported");
        table.entries.push(Entry {
            root: root.to_path_buf(),
            id,
            kind: Kind::Auto,
            uid: vec![Span { host: uid, size }],
            gid: vec![Span { host: gid, size }],
        });
    }
    Ok(Some(path))
}

/// Removes the imported old table and `<root>/.siloc` when that is empty now, under
/// the state root's lock, as record.rs takes it (a `create` there may be making
/// `.siloc`). Best effort: a file left is imported again, which adds nothing.
pub(super) fn remove_old(root: &Path, old: &Path) {
    let Ok(_lock) = lock_dir(root, Mode::Exclusive) else {
        return;
    };
    let _ = std::fs::remove_file(old);
    let _ = std::fs::remove_dir(root.join(".siloc"));
}

#[cfg(test)]
mod tests {
    use super::super::idpool::IdPool;
    use super::*;

    fn has_dir(root: &Path, id: &str) -> bool {
        root.join(id).exists()
    }

    /// A root's old table is imported on first use: live holders keep their ranges
    /// (host IDs from the pool config), dead ones are dropped, the old file is gone,
    /// and new ranges avoid the imported ones.
    #[test]
    fn an_old_root_table_is_imported_once() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("state");
        std::fs::create_dir_all(root.join(".siloc")).unwrap();
        std::fs::create_dir_all(root.join("old")).unwrap();
        std::fs::write(
            old_table(&root),
            r#"{"ranges":{"old":[0,65536],"dead":[65536,65536]}}"#,
        )
        .unwrap();
        let pool = Pool {
            uid_start: 100_000,
            gid_start: 100_000,
            size: 8 * 65536,
        };
        let p = IdPool::new(&d.path().join("pool"), &root, pool, has_dir);
        std::fs::create_dir_all(root.join("new")).unwrap();
        assert_eq!(p.allocate("new", 65536).unwrap().uid, 100_000 + 65536);
        assert!(!old_table(&root).exists());
        assert!(!root.join(".siloc").exists());
        let ids: Vec<_> = p.entries().unwrap().into_iter().map(|e| e.id).collect();
        assert_eq!(ids, ["old", "new"]);
        assert_eq!(
            p.get("old").unwrap().map(|r| (r.uid, r.gid)),
            Some((100_000, 100_000))
        );
        assert!(p.release("old").unwrap());
    }

    #[test]
    fn a_corrupt_old_table_is_named() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("state");
        std::fs::create_dir_all(root.join(".siloc")).unwrap();
        std::fs::write(old_table(&root), "{").unwrap();
        let pool = Pool {
            uid_start: 100_000,
            gid_start: 100_000,
            size: 65536,
        };
        let p = IdPool::new(&d.path().join("pool"), &root, pool, has_dir);
        let e = p.allocate("x", 1).unwrap_err().to_string();
        assert!(e.contains(".siloc/idpool.json"), "{e}");
        assert!(old_table(&root).exists());
    }
}
