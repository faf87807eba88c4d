//! Paths cleaned lexically the way runc does (Go's `filepath.Clean`/`filepath.Abs`):
//! `.` parts dropped and each `..` removing the part before it, never above `/`, with
//! no symlink resolved. Command-line paths get it, so `missing/../pid` names `./pid`
//! even though `missing` does not exist; so does a process cwd before it is made.

use std::path::{Component, Path, PathBuf};

/// `p` (taken as absolute) with `.` parts dropped and each `..` removing the part
/// before it, never above `/`. Symlinks are not resolved.
pub(crate) fn clean(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// `p` joined to the working directory when relative, then [`clean`]ed.
///
/// Errors: the working directory cannot be read (only for a relative `p`).
pub(crate) fn absolute_clean(p: &Path) -> std::io::Result<PathBuf> {
    Ok(clean(&std::path::absolute(p)?))
}

/// `p` with symlinks resolved, for a path whose last components may not exist yet:
/// the deepest existing ancestor canonicalized, the rest appended.
pub(crate) fn canonical_to_be(p: &Path) -> std::io::Result<PathBuf> {
    let mut rest = Vec::new();
    let mut at = p;
    loop {
        match std::fs::canonicalize(at) {
            Ok(mut c) => {
                c.extend(rest.iter().rev());
                return Ok(c);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let (Some(parent), Some(name)) = (at.parent(), at.file_name()) else {
                    return Err(e);
                };
                rest.push(name);
                at = parent;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleaned_like_filepath_abs() {
        for (given, want) in [
            ("/a/missing/../pid", "/a/pid"),
            ("/a/./b/", "/a/b"),
            ("/../../x", "/x"),
            ("/", "/"),
            ("/a/b/..", "/a"),
        ] {
            assert_eq!(absolute_clean(Path::new(given)).unwrap(), Path::new(want));
        }
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(absolute_clean(Path::new("x/../y")).unwrap(), cwd.join("y"));
    }
}
