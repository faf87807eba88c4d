//! The cgroups of an `exec`'d process, as runc places them (runc's exec.go
//! `getSubCgroupPaths`, libcontainer/process_linux.go `addIntoCgroupV1`).
//!
//! libcontainer 0.7's tenant builder moves its intermediate process into the
//! container's cgroup through libcgroups, which on cgroup v1 knows only the
//! controller hierarchies: the exec'd process stayed in the caller's named
//! (`name=systemd`) and, on the v1/v2 hybrid, unified cgroups, where the container's
//! init is (engine::cgroup_compat). And `exec --cgroup` was accepted and ignored.
//!
//! - The extra hierarchies: the calling siloc process joins the container's cgroup
//!   there right before libcontainer forks (its children inherit it) and goes back the
//!   moment libcontainer has forked (engine::cgroup_handoff, the mechanism create
//!   uses), so the exec'd process is in them before it runs and the moves share one
//!   RCU grace period with the intermediate's own. [`Join::enter`] only checks and
//!   opens the files; [`Moves`] are the moves themselves.
//! - `--cgroup PATH` (one path for every controller): checked to exist in every
//!   hierarchy below the container's cgroup, and handed to libcontainer's
//!   `with_sub_cgroup`; the extras get it too.
//! - `--cgroup CTRL[,CTRL]:PATH` (cgroup v1, per controller): libcontainer has one
//!   sub-cgroup for all, so siloc moves the process into those controllers' sub-cgroups
//!   right after libcontainer returns; what the process forks before that stays in
//!   the container's cgroup of those controllers (runc moves it before it runs).
//!
//! Errors are runc's texts: "invalid --cgroup argument: ...", "unknown controller X
//! in SubCgroupPaths", "bad sub cgroup path: X", and a sub-cgroup that does not exist
//! is named with its `cgroup.procs`, "no such file or directory".

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use super::cgroup_compat::extra_hierarchies;
use crate::sys::cgroup::{Hierarchy, hierarchies, path_in};

/// Errors in runc's words (module doc).
#[derive(Debug, thiserror::Error)]
pub enum ExecCgroupError {
    #[error("invalid --cgroup argument: {0} (empty <controller> prefix)")]
    EmptyController(String),
    #[error("invalid --cgroup argument(s): controller {0} specified multiple times")]
    Repeated(String),
    #[error("invalid --cgroup argument: {0} (missing <controller>: prefix)")]
    MissingController(String),
    #[error("unknown controller {0} in SubCgroupPaths")]
    UnknownController(String),
    #[error("bad sub cgroup path: {0}")]
    BadPath(String),
    #[error("error adding pid to cgroups: {path}: {msg}")]
    Join { path: PathBuf, msg: String },
}

/// runc's `--cgroup` arguments: controller (`""` for all) → sub path.
///
/// Errors: an empty controller, a controller given twice, a path without controller
/// beside others.
pub fn parse(args: &[String]) -> Result<BTreeMap<String, String>, ExecCgroupError> {
    let mut paths = BTreeMap::new();
    for a in args {
        if let Some((ctrs, path)) = a.split_once(':') {
            for c in ctrs.split(',') {
                if c.is_empty() {
                    return Err(ExecCgroupError::EmptyController(a.clone()));
                }
                if paths.insert(c.to_string(), path.to_string()).is_some() {
                    return Err(ExecCgroupError::Repeated(c.to_string()));
                }
            }
        } else {
            if args.len() != 1 {
                return Err(ExecCgroupError::MissingController(a.clone()));
            }
            paths.insert(String::new(), a.clone());
        }
    }
    Ok(paths)
}

/// `base` joined with `sub`, lexically cleaned; `None` when it leaves `base`.
fn below(base: &Path, sub: &str) -> Option<PathBuf> {
    let mut out = base.to_path_buf();
    for c in Path::new(sub).components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::ParentDir if out == base || !out.pop() => return None,
            _ => {}
        }
    }
    out.starts_with(base).then_some(out)
}

/// Where the exec'd process goes in each hierarchy.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Targets {
    /// The one sub-cgroup for every controller, for libcontainer.
    pub sub_cgroup: Option<String>,
    /// Extra hierarchies' directories: the caller joins them before libcontainer forks.
    pub pre: Vec<PathBuf>,
    /// Per-controller sub-cgroups libcontainer cannot make: the process moves there
    /// after.
    pub post: Vec<PathBuf>,
}

/// The targets for `subs` ([`parse`]) given the host's hierarchies `all` and the
/// init's /proc/PID/cgroup `init`. Every target must exist.
///
/// Errors: [`ExecCgroupError`] naming the controller or path.
pub fn targets(
    all: &[Hierarchy],
    init: &str,
    subs: &BTreeMap<String, String>,
) -> Result<Targets, ExecCgroupError> {
    let extras = extra_hierarchies(all);
    let uniform = subs.get("").cloned();
    for ctrl in subs.keys().filter(|k| !k.is_empty()) {
        if !all.iter().any(|h| h.controllers.contains(ctrl)) {
            return Err(ExecCgroupError::UnknownController(ctrl.clone()));
        }
    }
    let mut t = Targets {
        sub_cgroup: uniform.clone(),
        ..Targets::default()
    };
    for h in all {
        let Some(rel) = path_in(init, h) else {
            continue;
        };
        let base = h.mount_point.join(rel.trim_start_matches('/'));
        let sub = uniform
            .clone()
            .or_else(|| h.controllers.iter().find_map(|c| subs.get(c).cloned()));
        let dir = match &sub {
            Some(s) => below(&base, s).ok_or_else(|| ExecCgroupError::BadPath(s.clone()))?,
            None => base,
        };
        if sub.is_some() && !dir.is_dir() {
            return Err(ExecCgroupError::Join {
                path: dir.join("cgroup.procs"),
                msg: "no such file or directory".into(),
            });
        }
        if extras.contains(h) {
            t.pre.push(dir);
        } else if uniform.is_none() && sub.is_some() {
            t.post.push(dir);
        }
    }
    Ok(t)
}

/// `dir`'s cgroup.procs, opened for writing now: the kernel checks a migration against
/// the opener's credentials (Linux 5.16+, cgroup_procs_write_permission), so the file
/// still works after the caller joined the container's user namespace.
fn open_procs(dir: &Path) -> Result<std::fs::File, ExecCgroupError> {
    let path = dir.join("cgroup.procs");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .map_err(|e| ExecCgroupError::Join {
            path,
            msg: e.to_string(),
        })
}

fn write_pid(f: &mut impl std::io::Write, dir: &Path, pid: i32) -> Result<(), ExecCgroupError> {
    f.write_all(pid.to_string().as_bytes())
        .map_err(|e| ExecCgroupError::Join {
            path: dir.join("cgroup.procs"),
            msg: e.to_string(),
        })
}

/// What exec does with cgroups besides libcontainer's own moves (module doc): the
/// extra hierarchies' [`Moves`] for engine::cgroup_handoff, the sub-cgroup for
/// libcontainer, and the per-controller moves after it.
pub struct Join {
    sub_cgroup: Option<String>,
    pre: Moves,
    post: Vec<(PathBuf, std::fs::File)>,
}

impl Join {
    /// Checks `args` (runc's `--cgroup`) against container init `init` and opens every
    /// `cgroup.procs` exec writes: the extra hierarchies' targets and the caller's own
    /// cgroups there ([`Moves::open`]), and the per-controller sub-cgroups. Moves
    /// nothing. No init (a stopped container): nothing to open, libcontainer refuses
    /// the exec. Call it before joining the container's user namespace: the files
    /// are opened with the host's credentials, which the kernel checks at the write
    /// (Linux 5.16+, cgroup_procs_write_permission).
    ///
    /// Errors: [`ExecCgroupError`] naming the argument, controller or `cgroup.procs`.
    pub fn enter(init: Option<i32>, args: &[String]) -> Result<Join, ExecCgroupError> {
        let subs = parse(args)?;
        let mut j = Join {
            sub_cgroup: None,
            pre: Moves::default(),
            post: Vec::new(),
        };
        let Some(init) = init else {
            return Ok(j);
        };
        let mounts = crate::sys::cgroup_mounts::read().unwrap_or_default();
        let all = hierarchies(&mounts);
        let init_cg = std::fs::read_to_string(format!("/proc/{init}/cgroup")).unwrap_or_default();
        let t = targets(&all, &init_cg, &subs)?;
        j.sub_cgroup = t.sub_cgroup;
        for dir in t.post {
            let f = open_procs(&dir)?;
            j.post.push((dir, f));
        }
        j.pre = Moves::open(&all, &t.pre)?;
        Ok(j)
    }

    /// The extra hierarchies' moves, for engine::cgroup_handoff (taken once; empty
    /// after).
    pub fn take_moves(&mut self) -> Moves {
        std::mem::take(&mut self.pre)
    }

    /// The sub-cgroup libcontainer's tenant builder gets (`with_sub_cgroup`).
    pub fn sub_cgroup(&self) -> Option<String> {
        self.sub_cgroup.clone()
    }

    /// Moves `pid` into the per-controller `--cgroup` sub-cgroups.
    ///
    /// Errors: `pid` cannot be moved.
    pub fn finish(self, pid: i32) -> Result<(), ExecCgroupError> {
        for (dir, mut f) in self.post {
            write_pid(&mut f, &dir, pid)?;
        }
        Ok(())
    }
}

/// The caller's (the whole process's) moves into cgroup directories and back, every
/// `cgroup.procs` opened beforehand ([`Moves::open`]). Used by exec ([`Join`]) and by
/// create, both through engine::cgroup_handoff.
#[derive(Default)]
pub struct Moves {
    /// Each target directory with its `cgroup.procs`.
    into: Vec<(PathBuf, std::fs::File)>,
    /// The caller's own cgroup in each target's hierarchy, with its `cgroup.procs`.
    back: Vec<(PathBuf, std::fs::File)>,
}

impl Moves {
    /// Opens the `cgroup.procs` of `dirs`, each in one of the hierarchies `all` (a
    /// directory in none is left out), and of the caller's own cgroup in each of
    /// those hierarchies, for the way back. Moves nothing.
    ///
    /// Errors: [`ExecCgroupError::Join`] naming the `cgroup.procs` that cannot be
    /// opened.
    pub fn open(all: &[Hierarchy], dirs: &[PathBuf]) -> Result<Moves, ExecCgroupError> {
        let mut m = Moves::default();
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        for dir in dirs {
            let Some(h) = all.iter().find(|h| dir.starts_with(&h.mount_point)) else {
                continue;
            };
            if let Some(rel) = path_in(&own, h) {
                let mine = h.mount_point.join(rel.trim_start_matches('/'));
                let f = open_procs(&mine)?;
                m.back.push((mine, f));
            }
            let f = open_procs(dir)?;
            m.into.push((dir.clone(), f));
        }
        Ok(m)
    }

    /// Whether there is nothing to move.
    pub fn is_empty(&self) -> bool {
        self.into.is_empty()
    }

    /// Moves the caller into the target directories: the processes it forks next are
    /// born in them (fork copies the parent's cgroups, kernel
    /// Documentation/admin-guide/cgroup-v2.rst "Processes"). Returns the way back:
    /// each of the caller's own cgroup directories with its `cgroup.procs` open for
    /// writing; the caller is then in charge of going back (engine::cgroup_handoff
    /// writes its pid into them).
    ///
    /// Errors: [`ExecCgroupError::Join`] naming the `cgroup.procs` refused; the caller
    /// is back in its own cgroups then.
    pub fn enter(self) -> Result<Vec<(PathBuf, std::fs::File)>, ExecCgroupError> {
        let me = std::process::id() as i32;
        for (dir, f) in &self.into {
            let mut f: &std::fs::File = f;
            if let Err(e) = write_pid(&mut f, dir, me) {
                go_back(&self.back, me);
                return Err(e);
            }
        }
        Ok(self.back)
    }
}

/// Writes `me` into each of `back`'s `cgroup.procs`, warning about a refusal.
fn go_back(back: &[(PathBuf, std::fs::File)], me: i32) {
    for (dir, f) in back {
        let mut f: &std::fs::File = f;
        if let Err(e) = write_pid(&mut f, dir, me) {
            tracing::warn!("back to siloc's own cgroup: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn parse_as_runc() {
        let p = parse(&args(&["pids,memory:a", "cpu:b"])).unwrap();
        assert_eq!(p["pids"], "a");
        assert_eq!(p["memory"], "a");
        assert_eq!(p["cpu"], "b");
        assert_eq!(parse(&args(&["x"])).unwrap()[""], "x");
        for (bad, want) in [
            (
                &[":a"][..],
                "invalid --cgroup argument: :a (empty <controller> prefix)",
            ),
            (
                &["pids:a", "pids:b"],
                "controller pids specified multiple times",
            ),
            (
                &["a", "pids:b"],
                "invalid --cgroup argument: a (missing <controller>: prefix)",
            ),
        ] {
            let e = parse(&args(bad)).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
        }
    }

    #[test]
    fn targets_on_a_hybrid_tree() {
        let root = tempfile::tempdir().unwrap();
        let r = root.path();
        let hs: Vec<Hierarchy> = [("pids", false), ("name=systemd", false), ("", true)]
            .iter()
            .map(|(c, v2)| Hierarchy {
                mount_point: r.join(if *v2 { "unified" } else { c }),
                controllers: if *v2 { vec![] } else { vec![c.to_string()] },
                v2: *v2,
            })
            .collect();
        for h in &hs {
            std::fs::create_dir_all(h.mount_point.join("ctr/sub")).unwrap();
        }
        let init = "3:pids:/ctr\n2:name=systemd:/ctr\n0::/ctr\n";
        let none = targets(&hs, init, &BTreeMap::new()).unwrap();
        assert_eq!(none.sub_cgroup, None);
        assert!(none.post.is_empty());
        assert_eq!(
            none.pre,
            vec![r.join("name=systemd/ctr"), r.join("unified/ctr")]
        );
        let all = targets(&hs, init, &parse(&args(&["sub"])).unwrap()).unwrap();
        assert_eq!(all.sub_cgroup.as_deref(), Some("sub"));
        assert_eq!(
            all.pre,
            vec![r.join("name=systemd/ctr/sub"), r.join("unified/ctr/sub")]
        );
        let per = targets(&hs, init, &parse(&args(&["pids:sub"])).unwrap()).unwrap();
        assert_eq!(per.post, vec![r.join("pids/ctr/sub")]);
        assert_eq!(
            per.pre,
            vec![r.join("name=systemd/ctr"), r.join("unified/ctr")]
        );
        let e = targets(&hs, init, &parse(&args(&["nosuch"])).unwrap()).unwrap_err();
        assert!(
            e.to_string()
                .contains("ctr/nosuch/cgroup.procs: no such file"),
            "{e}"
        );
        let e = targets(&hs, init, &parse(&args(&["../.."])).unwrap()).unwrap_err();
        assert_eq!(e.to_string(), "bad sub cgroup path: ../..");
        let e = targets(&hs, init, &parse(&args(&["blkio:x"])).unwrap()).unwrap_err();
        assert_eq!(e.to_string(), "unknown controller blkio in SubCgroupPaths");
    }
}
