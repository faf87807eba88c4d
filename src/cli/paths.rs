//! Command-line paths made absolute the way runc does (Go's `filepath.Abs`): joined to
//! the working directory and cleaned lexically, so `missing/../pid` names `./pid`
//! even though `missing` does not exist, as it does for runc.

use std::path::{Component, Path, PathBuf};

/// `p` joined to the working directory when relative, with `.` parts dropped and each
/// `..` removing the part before it (never above `/`). Symlinks are not resolved.
///
/// Errors: the working directory cannot be read (only for a relative `p`).
pub fn absolute_clean(p: &Path) -> std::io::Result<PathBuf> {
    let abs = std::path::absolute(p)?;
    let mut out = PathBuf::from("/");
    for c in abs.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    Ok(out)
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
