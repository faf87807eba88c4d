//! The image config's `User` as numeric IDs, from the image's own /etc/passwd and
//! /etc/group (image-spec `config.md` "User", `conversion.md` "Config.User"): `user`,
//! `uid`, `user:group`, `uid:gid`, and mixes. Named users get the supplementary
//! groups /etc/group gives them; numeric ones do not (conversion.md says a numeric
//! user leaves additionalGids alone).

use std::path::{Path, PathBuf};

use super::whiteout;

/// A user that does not resolve; names the image's `User` value.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("image config User {user:?}: {msg}")]
pub struct UserError {
    pub user: String,
    pub msg: String,
}

/// The process user for the runtime spec.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct User {
    pub uid: u32,
    pub gid: u32,
    pub additional_gids: Vec<u32>,
}

/// Resolves `spec` (the image's `User`) against `/etc/passwd` and `/etc/group` as the
/// merged `layers` (base first) show them. Empty means root.
///
/// Errors: a name that the files do not list, or a malformed value.
pub fn resolve(spec: &str, layers: &[PathBuf]) -> Result<User, UserError> {
    let passwd = find_file(layers, "etc/passwd").and_then(|p| std::fs::read_to_string(p).ok());
    let group = find_file(layers, "etc/group").and_then(|p| std::fs::read_to_string(p).ok());
    resolve_in(
        spec,
        passwd.as_deref().unwrap_or(""),
        group.as_deref().unwrap_or(""),
    )
}

/// [`resolve`] on file contents.
pub fn resolve_in(spec: &str, passwd: &str, group: &str) -> Result<User, UserError> {
    let err = |msg: String| UserError {
        user: spec.to_string(),
        msg,
    };
    if spec.is_empty() {
        return Ok(User::default());
    }
    let (u, g) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    let users: Vec<Vec<&str>> = passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .filter(|f| f.len() >= 4)
        .collect();
    let groups: Vec<Vec<&str>> = group
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .filter(|f| f.len() >= 3)
        .collect();
    let (uid, name, primary, numeric) = if let Ok(uid) = u.parse::<u32>() {
        let entry = users.iter().find(|f| f[2].parse() == Ok(uid));
        let primary = entry.and_then(|f| f[3].parse::<u32>().ok()).unwrap_or(0);
        (uid, None, primary, true)
    } else {
        let f = users
            .iter()
            .find(|f| f[0] == u)
            .ok_or_else(|| err(format!("no user {u:?} in the image's /etc/passwd")))?;
        let uid = f[2]
            .parse()
            .map_err(|_| err(format!("/etc/passwd: bad uid for {u:?}")))?;
        let gid = f[3]
            .parse()
            .map_err(|_| err(format!("/etc/passwd: bad gid for {u:?}")))?;
        (uid, Some(u), gid, false)
    };
    let gid = match g {
        None => primary,
        Some("") => return Err(err("empty group after ':'".into())),
        Some(g) => match g.parse::<u32>() {
            Ok(n) => n,
            Err(_) => groups
                .iter()
                .find(|f| f[0] == g)
                .and_then(|f| f[2].parse().ok())
                .ok_or_else(|| err(format!("no group {g:?} in the image's /etc/group")))?,
        },
    };
    let mut additional_gids = Vec::new();
    if let (Some(name), false) = (name, numeric) {
        for f in &groups {
            let members = f.get(3).copied().unwrap_or("");
            if members.split(',').any(|m| m == name)
                && let Ok(id) = f[2].parse::<u32>()
                && id != gid
                && !additional_gids.contains(&id)
            {
                additional_gids.push(id);
            }
        }
    }
    Ok(User {
        uid,
        gid,
        additional_gids,
    })
}

/// The file at `rel` as the overlay of `layers` (base first) would show it: the
/// topmost layer that has it, unless a whiteout or an opaque directory above hides
/// the lower ones. `None` for anything but a regular file.
pub fn find_file(layers: &[PathBuf], rel: &str) -> Option<PathBuf> {
    let comps: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
    for layer in layers.iter().rev() {
        let mut p: PathBuf = layer.clone();
        let mut hides_lower = false;
        for (i, c) in comps.iter().enumerate() {
            p.push(c);
            let Ok(m) = std::fs::symlink_metadata(&p) else {
                break;
            };
            if whiteout::is_whiteout(&m) {
                return None;
            }
            if i + 1 == comps.len() {
                return m.is_file().then_some(p);
            }
            if !m.is_dir() {
                return None;
            }
            hides_lower |= whiteout::is_opaque(Path::new(&p));
        }
        if hides_lower {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
                          app:x:1000:1001::/home/app:/bin/sh\n\
                          svc:x:999:999::/:/bin/false\n";
    const GROUP: &str = "root:x:0:\napp:x:1001:\nwheel:x:10:app,svc\naudio:x:29:app\nsvc:x:999:\n";

    fn r(s: &str) -> Result<User, UserError> {
        resolve_in(s, PASSWD, GROUP)
    }

    #[test]
    fn names_and_numbers() {
        assert_eq!(r("").unwrap(), User::default());
        assert_eq!(
            r("app").unwrap(),
            User {
                uid: 1000,
                gid: 1001,
                additional_gids: vec![10, 29]
            }
        );
        assert_eq!(r("app:audio").unwrap().gid, 29);
        assert_eq!(r("app:audio").unwrap().additional_gids, vec![10]);
        // numeric users keep additionalGids empty (conversion.md)
        assert_eq!(
            r("1000").unwrap(),
            User {
                uid: 1000,
                gid: 1001,
                additional_gids: vec![]
            }
        );
        assert_eq!(
            r("4242:77").unwrap(),
            User {
                uid: 4242,
                gid: 77,
                additional_gids: vec![]
            }
        );
        assert_eq!(r("4242:wheel").unwrap().gid, 10);
        assert_eq!(r("svc:5").unwrap().gid, 5);
    }

    #[test]
    fn unknown_names_are_errors() {
        assert!(
            r("nobody")
                .unwrap_err()
                .to_string()
                .contains("no user \"nobody\"")
        );
        assert!(
            r("app:nogroup")
                .unwrap_err()
                .to_string()
                .contains("no group")
        );
        assert!(r("app:").is_err());
    }

    #[test]
    fn files_are_found_through_layers() {
        let d = tempfile::tempdir().unwrap();
        let (l1, l2) = (d.path().join("l1"), d.path().join("l2"));
        std::fs::create_dir_all(l1.join("etc")).unwrap();
        std::fs::create_dir_all(l2.join("etc")).unwrap();
        std::fs::write(l1.join("etc/passwd"), "base").unwrap();
        std::fs::write(l1.join("etc/group"), "base").unwrap();
        std::fs::write(l2.join("etc/passwd"), "top").unwrap();
        let layers = vec![l1.clone(), l2.clone()];
        assert_eq!(
            find_file(&layers, "etc/passwd"),
            Some(l2.join("etc/passwd"))
        );
        assert_eq!(find_file(&layers, "/etc/group"), Some(l1.join("etc/group")));
        assert_eq!(find_file(&layers, "etc/shadow"), None);
        if nix::unistd::geteuid().is_root() {
            whiteout::make_whiteout(&l2.join("etc/group")).unwrap();
            assert_eq!(find_file(&layers, "etc/group"), None);
            std::fs::remove_file(l2.join("etc/group")).unwrap();
            whiteout::make_opaque(&l2.join("etc")).unwrap();
            assert_eq!(find_file(&layers, "etc/group"), None);
            assert_eq!(
                find_file(&layers, "etc/passwd"),
                Some(l2.join("etc/passwd"))
            );
        }
    }
}
