//! File helpers: an I/O error that names its path, and files replaced atomically.

use std::io::Write;
use std::path::{Path, PathBuf};

/// An I/O error with the path it happened at: `<path>: <error>`. Module errors carry it
/// as a variant (`#[error(transparent)] Io(#[from] IoAt)`), so every message names the
/// file.
#[derive(Debug, thiserror::Error)]
#[error("{}: {source}", path.display())]
pub struct IoAt {
    pub path: PathBuf,
    pub source: std::io::Error,
}

/// A `map_err` adapter: `std::fs::read(p).map_err(io_at(p))?`.
pub(crate) fn io_at(path: &Path) -> impl Fn(std::io::Error) -> IoAt + '_ {
    move |source| IoAt {
        path: path.to_path_buf(),
        source,
    }
}

/// Replaces `path` with `body` atomically: written to `<path>.tmp<pid>` in the same
/// directory, then renamed over it, so a reader (or a crash) sees the old contents or
/// the new, never half of them (rename(2)).
///
/// Errors: [`IoAt`] naming the temporary file or `path`; the temporary file is removed.
pub(crate) fn write_atomic(path: &Path, body: &[u8]) -> Result<(), IoAt> {
    write_atomic_mode(path, body, 0o644)
}

/// [`write_atomic`] with the new file's permission bits `mode` (before the umask), e.g.
/// 0o600 for a bundle's config.json that only root may read.
///
/// Errors: as [`write_atomic`].
pub fn write_atomic_mode(path: &Path, body: &[u8], mode: u32) -> Result<(), IoAt> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let tmp = PathBuf::from(tmp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .and_then(|mut f| f.write_all(body));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_at(&tmp)(e));
    }
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        io_at(path)(e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_and_names_the_path() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"two");
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
        let e = write_atomic(&d.path().join("no/such/f"), b"x").unwrap_err();
        assert!(e.to_string().contains("no/such/f"), "{e}");
    }
}
