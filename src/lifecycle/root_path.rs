//! The rootfs a bundle's `root.path` names, checked as runc checks it: runc's specconv
//! joins a relative root.path to the bundle's real path (runc chdirs into the bundle
//! and asks for its working directory), cleans the result as text (Go's
//! `filepath.Join`), and its config validator refuses it unless that is already the
//! real path of the rootfs: no symlink on the way ("not an absolute path, or a
//! symlink").

use std::path::{Component, Path, PathBuf};

use crate::lifecycle::LifecycleError;
use crate::sys::paths::clean;

/// The rootfs of a bundle at `bundle` (absolute, as given: it may pass through
/// symlinks or hold `..`) whose spec says `root_path`. Returns the rootfs's real path
/// and the path as given, cleaned (`bundle/root_path`: for messages).
///
/// The bundle is resolved only when needed: when the path as given is not the real
/// one (a bundle reached through a symlink), or when the bundle's path holds a `..`,
/// which the kernel resolves after the symlink before it and text cleaning would not.
///
/// Errors ([`LifecycleError::Other`], runc's words after the field): `root.path P:
/// invalid rootfs: stat P: ...` when the path cannot be resolved; `root.path P: invalid
/// rootfs: not an absolute path, or a symlink` when it resolves elsewhere.
pub fn resolve(bundle: &Path, root_path: &Path) -> Result<(PathBuf, PathBuf), LifecycleError> {
    let given = clean(&bundle.join(root_path));
    let real_of = |p: &Path| {
        std::fs::canonicalize(p).map_err(|e| {
            LifecycleError::Other(format!(
                "root.path {0}: invalid rootfs: stat {0}: {1}",
                given.display(),
                crate::sys::errno::go_io_text(&e)
            ))
        })
    };
    let via_real_bundle = || real_of(bundle).map(|b| clean(&b.join(root_path)));
    let dotdot = bundle.components().any(|c| c == Component::ParentDir);
    let relative = root_path.is_relative();
    let mut rootfs = if relative && dotdot {
        via_real_bundle()?
    } else {
        given.clone()
    };
    let mut real = real_of(&rootfs)?;
    if real != rootfs && relative && !dotdot {
        rootfs = via_real_bundle()?;
        real = real_of(&rootfs)?;
    }
    if real != rootfs {
        return Err(LifecycleError::Other(format!(
            "root.path {}: invalid rootfs: not an absolute path, or a symlink",
            given.display()
        )));
    }
    Ok((rootfs, given))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    /// A real bundle `b` with `b/rootfs`, `b/sub -> elsewhere/deep`, a link to the
    /// bundle, and a link to the rootfs.
    fn fixture() -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let top = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(top.join("b/rootfs")).unwrap();
        std::fs::create_dir_all(top.join("elsewhere/deep")).unwrap();
        std::fs::create_dir_all(top.join("elsewhere/rootfs")).unwrap();
        symlink(top.join("elsewhere/deep"), top.join("b/sub")).unwrap();
        symlink(top.join("b"), top.join("blink")).unwrap();
        symlink("rootfs", top.join("b/rlink")).unwrap();
        (d, top)
    }

    fn ok(bundle: &Path, root: &str) -> PathBuf {
        resolve(bundle, Path::new(root))
            .unwrap_or_else(|e| panic!("{root}: {e}"))
            .0
    }

    fn refused(bundle: &Path, root: &str) -> String {
        resolve(bundle, Path::new(root)).unwrap_err().to_string()
    }

    #[test]
    fn real_paths_pass_as_runc_passes_them() {
        let (_d, top) = fixture();
        let real = top.join("b/rootfs");
        for root in ["rootfs", "./rootfs", "rootfs/", "x/../rootfs"] {
            assert_eq!(ok(&top.join("b"), root), real, "{root}");
        }
        // `sub/..` is text: runc cleans it away before any symlink is followed.
        assert_eq!(ok(&top.join("b"), "sub/../rootfs"), real);
        assert_eq!(ok(&top.join("b"), real.to_str().unwrap()), real);
        // A bundle reached through a symlink, relative root.path: runc uses the
        // bundle's real path.
        assert_eq!(ok(&top.join("blink"), "rootfs"), real);
        // A bundle path whose `..` follows a symlink: the kernel's meaning, not text's.
        assert_eq!(
            ok(&top.join("b/sub/.."), "rootfs"),
            top.join("elsewhere/rootfs")
        );
    }

    #[test]
    fn symlinks_on_the_way_are_refused_in_runcs_words() {
        let (_d, top) = fixture();
        let b = top.join("b");
        let e = refused(&b, "rlink");
        assert_eq!(
            e,
            format!(
                "root.path {}: invalid rootfs: not an absolute path, or a symlink",
                b.join("rlink").display()
            )
        );
        // An absolute root.path through the bundle's link is refused, as in runc.
        let through = top.join("blink/rootfs");
        assert!(refused(&b, through.to_str().unwrap()).contains("or a symlink"));
        let e = refused(&b, "nope");
        let p = b.join("nope");
        assert_eq!(
            e,
            format!(
                "root.path {0}: invalid rootfs: stat {0}: no such file or directory",
                p.display()
            )
        );
    }
}
