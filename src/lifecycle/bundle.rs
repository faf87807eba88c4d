//! Loading and checking a bundle's `config.json` (runtime-spec "Filesystem Bundle" and
//! "Configuration"), with errors that name the file and the JSON field.
//!
//! libcontainer checks a spec too, but it reports "invalid spec" without saying where;
//! siloc checks the common mistakes first so the message says which field to fix.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use oci_spec::runtime::Spec;

/// Errors from reading a bundle. Each names the file; parse and validation errors also
/// name the field as a JSON path (`process.args`, `mounts[2].destination`).
#[derive(Debug, thiserror::Error)]
pub enum BundleError {
    #[error("bundle {0}: no such directory")]
    MissingBundle(PathBuf),
    #[error("JSON specification file {0} not found")]
    MissingConfig(PathBuf),
    #[error("read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: field {field}: {msg}")]
    Parse {
        path: PathBuf,
        field: String,
        msg: String,
    },
    #[error("{path}: field {field}: {msg}")]
    Invalid {
        path: PathBuf,
        field: String,
        msg: String,
    },
}

/// Reads `<bundle>/config.json` and checks the fields a runtime needs to create a
/// container. Returns the spec as written (relative paths are not resolved).
///
/// Errors: [`BundleError`], naming the file and, for bad content, the field.
pub fn load(bundle: &Path) -> Result<Spec, BundleError> {
    load_with_warnings(bundle).map(|(spec, _)| spec)
}

/// [`load`], also returning the warnings runc gives for the file (unknown
/// capabilities, [`crate::lifecycle::spec_compat`]), for the caller to log once.
pub fn load_with_warnings(bundle: &Path) -> Result<(Spec, Vec<String>), BundleError> {
    if !bundle.is_dir() {
        return Err(BundleError::MissingBundle(bundle.to_path_buf()));
    }
    let path = bundle.join("config.json");
    let text = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(BundleError::MissingConfig(path));
        }
        Err(source) => return Err(BundleError::Read { path, source }),
    };
    let (spec, warnings) = parse_with_warnings(&text);
    let spec = spec.map_err(|(field, msg)| BundleError::Parse {
        path: path.clone(),
        field,
        msg,
    })?;
    validate(&spec).map_err(|(field, msg)| BundleError::Invalid {
        path: path.clone(),
        field,
        msg,
    })?;
    Ok((spec, warnings))
}

/// Whether `<bundle>/config.json` asks for a terminal (`process.terminal`,
/// runtime-spec config.md "Process"). Reads that one field (serde skips the rest),
/// about a tenth of a full [`load`]: `run` and `create` decide their console before
/// `create` loads the whole file. A file that cannot be read or parsed counts as no
/// terminal; `create`'s full load then names the error.
pub fn wants_terminal(bundle: &Path) -> bool {
    #[derive(serde::Deserialize)]
    struct Doc {
        process: Option<Process>,
    }
    #[derive(serde::Deserialize)]
    struct Process {
        terminal: Option<bool>,
    }
    std::fs::read(bundle.join("config.json"))
        .ok()
        .and_then(|text| serde_json::from_slice::<Doc>(&text).ok())
        .and_then(|doc| doc.process?.terminal)
        .unwrap_or(false)
}

/// Parses config.json text. Errors: (field path, message); the path is `(top level)`
/// when the document itself is broken.
#[cfg(test)]
pub fn parse(text: &[u8]) -> Result<Spec, (String, String)> {
    parse_with_warnings(text).0
}

/// [`parse`] after runc's reading of the fields oci-spec reads differently
/// ([`crate::lifecycle::spec_compat::spec_json`]); also returns its warnings.
pub fn parse_with_warnings(text: &[u8]) -> (Result<Spec, (String, String)>, Vec<String>) {
    let Ok(mut doc) = serde_json::from_slice::<serde_json::Value>(text) else {
        // broken JSON: serde's own message, with its line and column
        return (parse_text(text), Vec::new());
    };
    let before = doc.clone();
    let warnings = match crate::lifecycle::spec_compat::spec_json(&mut doc) {
        Ok(w) => w,
        Err(e) => return (Err(e), Vec::new()),
    };
    if doc == before {
        return (parse_text(text), warnings);
    }
    match serde_json::to_vec(&doc) {
        Ok(fixed) => (parse_text(&fixed), warnings),
        Err(e) => (Err(("(top level)".into(), e.to_string())), warnings),
    }
}

fn parse_text(text: &[u8]) -> Result<Spec, (String, String)> {
    let de = &mut serde_json::Deserializer::from_slice(text);
    serde_path_to_error::deserialize::<_, Spec>(de).map_err(|e| {
        // serde_path_to_error says "?" or "." when the document itself is broken.
        let field = match e.path().to_string().as_str() {
            "?" | "." => "(top level)".to_string(),
            p => p.to_string(),
        };
        let inner = e.into_inner();
        // serde_json appends " at line L column C"; keep it, it helps find the spot.
        (field, inner.to_string())
    })
}

/// The values of `linux.rootfsPropagation` runc accepts: runtime-spec config-linux.md
/// names the four plain ones, runc (and podman) also pass the recursive `r` forms.
pub const ROOTFS_PROPAGATION: [&str; 8] = [
    "shared",
    "rshared",
    "slave",
    "rslave",
    "private",
    "rprivate",
    "unbindable",
    "runbindable",
];

/// The largest uid or gid a process may ask for: runc's MaxInt32 (a negative Go int32
/// above it, and 4294967295 is (uid_t)-1, "unchanged" to setresuid(2)).
pub const MAX_ID: u32 = i32::MAX as u32;

/// Checks the rules of runtime-spec `config.md` and `config-linux.md` that a runtime
/// must enforce at create time. Errors: (field path, message).
pub fn validate(spec: &Spec) -> Result<(), (String, String)> {
    let bad = |f: &str, m: &str| Err((f.to_string(), m.to_string()));
    let version = spec.version();
    if version.is_empty() {
        return bad("ociVersion", "missing; this runtime supports 1.x");
    }
    if !version.starts_with("1.") {
        return bad(
            "ociVersion",
            &format!("{version:?} is not supported; this runtime supports 1.x"),
        );
    }
    match spec.root() {
        None => return bad("root", "missing; root.path names the root filesystem"),
        Some(r) if r.path().as_os_str().is_empty() => return bad("root.path", "empty"),
        Some(_) => {}
    }
    let Some(process) = spec.process() else {
        return bad("process", "missing; it says what the container runs");
    };
    match process.args() {
        Some(a) if !a.is_empty() && !a[0].is_empty() => {}
        _ => return bad("process.args", "must name at least the program to run"),
    }
    if !process.cwd().is_absolute() {
        return bad("process.cwd", "must be an absolute path");
    }
    if let Err((i, msg)) = check_env(process.env().as_deref().unwrap_or_default()) {
        return bad(&format!("process.env[{i}]"), msg);
    }
    // 4294967295 is (uid_t)-1, which setresuid(2) takes as "leave unchanged": the
    // process stayed root. runc 1.1 refuses above MaxInt32 (init_linux.go setupUser).
    let user = process.user();
    let mut ids = vec![
        ("process.user.uid".to_string(), user.uid()),
        ("process.user.gid".to_string(), user.gid()),
    ];
    for (i, g) in user.additional_gids().iter().flatten().enumerate() {
        ids.push((format!("process.user.additionalGids[{i}]"), *g));
    }
    if let Some((field, id)) = ids.into_iter().find(|(_, id)| *id > MAX_ID) {
        return bad(
            &field,
            &format!(
                "{id} is outside 0..{MAX_ID} (runc: uids and gids must be in range 0-{MAX_ID})"
            ),
        );
    }
    // The kernel's range (proc(5), /proc/PID/oom_score_adj); libcontainer's write
    // failed as "io error", runc's nsexec as below.
    if let Some(adj) = process.oom_score_adj()
        && !(-1000..=1000).contains(&adj)
    {
        return bad(
            "process.oomScoreAdj",
            &format!(
                "{adj} is outside the kernel's -1000..1000 (runc: failed to update \
                 /proc/self/oom_score_adj: Invalid argument)"
            ),
        );
    }
    // A relative mount destination is relative to the rootfs (runc 1.1 takes it with a
    // warning from engine::mount_compat::prepare, which resolves it).
    if let Some(linux) = spec.linux() {
        let mut seen = HashSet::new();
        for (i, ns) in linux.namespaces().iter().flatten().enumerate() {
            if !seen.insert(ns.typ()) {
                return bad(
                    &format!("linux.namespaces[{i}].type"),
                    &format!("{:?} is listed twice", ns.typ()),
                );
            }
        }
        if let Some(p) = linux.rootfs_propagation()
            && !p.is_empty()
            && !ROOTFS_PROPAGATION.contains(&p.as_str())
        {
            return bad(
                "linux.rootfsPropagation",
                &format!("{p:?} is not one of {}", ROOTFS_PROPAGATION.join(", ")),
            );
        }
        let has_userns = seen.contains(&oci_spec::runtime::LinuxNamespaceType::User);
        let has_maps = linux.uid_mappings().as_ref().is_some_and(|m| !m.is_empty())
            || linux.gid_mappings().as_ref().is_some_and(|m| !m.is_empty());
        if has_maps && !has_userns {
            return bad(
                "linux.uidMappings",
                "ID mappings need a user namespace in linux.namespaces",
            );
        }
    }
    Ok(())
}

/// Checks `NAME=value` entries of a process's env: a name is required (an entry with
/// no `=` is a name alone) and no NUL may appear; libcontainer's init panics on
/// either. Errors: (index, why).
pub fn check_env(env: &[String]) -> Result<(), (usize, &'static str)> {
    for (i, e) in env.iter().enumerate() {
        let name = e.split_once('=').map_or(e.as_str(), |(n, _)| n);
        if name.is_empty() {
            return Err((i, "has no variable name (use NAME=value)"));
        }
        if e.contains('\0') {
            return Err((i, "contains a NUL byte"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"{"ociVersion":"1.0.2","root":{"path":"rootfs"},
        "process":{"cwd":"/","args":["sh"],"user":{"uid":0,"gid":0}},
        "linux":{"namespaces":[{"type":"pid"},{"type":"mount"}]}}"#;

    fn check(text: &str) -> Result<(), (String, String)> {
        validate(&parse(text.as_bytes())?)
    }

    #[test]
    fn wants_terminal_reads_process_terminal_only() {
        let dir = tempfile::tempdir().unwrap();
        let case = |text: &str| {
            std::fs::write(dir.path().join("config.json"), text).unwrap();
            wants_terminal(dir.path())
        };
        assert!(!case(GOOD));
        assert!(case(
            &GOOD.replace(r#""cwd":"/""#, r#""terminal":true,"cwd":"/""#)
        ));
        assert!(!case(
            &GOOD.replace(r#""cwd":"/""#, r#""terminal":false,"cwd":"/""#)
        ));
        assert!(!case(
            &GOOD.replace(r#""cwd":"/""#, r#""terminal":null,"cwd":"/""#)
        ));
        assert!(!case(r#"{"ociVersion":"1.0.2"}"#));
        // Broken or unreadable: no terminal; create's full load reports it.
        assert!(!case("{"));
        assert!(!case(r#"{"process":{"terminal":"yes"}}"#));
        assert!(!wants_terminal(&dir.path().join("missing")));
    }

    #[test]
    fn good_spec_passes() {
        check(GOOD).unwrap();
    }

    #[test]
    fn ids_above_max_int32_are_named_as_runc_refuses_them() {
        let user = |u: &str| GOOD.replace(r#""uid":0,"gid":0"#, u);
        assert!(check(&user(r#""uid":2147483647,"gid":1,"additionalGids":[5]"#)).is_ok());
        for (u, field) in [
            (r#""uid":4294967295,"gid":0"#, "process.user.uid"),
            (r#""uid":0,"gid":2147483648"#, "process.user.gid"),
            (
                r#""uid":0,"gid":0,"additionalGids":[5,4294967295]"#,
                "process.user.additionalGids[1]",
            ),
        ] {
            let (f, m) = check(&user(u)).unwrap_err();
            assert_eq!(f, field);
            assert!(m.contains("must be in range 0-2147483647"), "{m}");
        }
    }

    #[test]
    fn oom_score_adj_outside_the_kernels_range_is_named() {
        let with = |adj: i32| {
            GOOD.replace(
                r#""cwd":"/","#,
                &format!(r#""cwd":"/","oomScoreAdj":{adj},"#),
            )
        };
        check(&with(1000)).unwrap();
        check(&with(-1000)).unwrap();
        let (field, msg) = check(&with(5000)).unwrap_err();
        assert_eq!(field, "process.oomScoreAdj");
        assert!(
            msg.starts_with("5000 is outside the kernel's -1000..1000"),
            "{msg}"
        );
        assert!(check(&with(-1001)).is_err());
    }

    #[test]
    fn type_error_names_the_field() {
        let t = GOOD.replace(r#""args":["sh"]"#, r#""args":"sh""#);
        let (field, _) = check(&t).unwrap_err();
        assert_eq!(field, "process.args");
    }

    #[test]
    fn broken_json_is_reported() {
        let (field, msg) = check("{").unwrap_err();
        assert_eq!(field, "(top level)");
        assert!(msg.contains("EOF"), "{msg}");
    }

    #[test]
    fn missing_version_and_args_and_relative_paths() {
        let (f, _) = check(&GOOD.replace(r#""ociVersion":"1.0.2","#, "")).unwrap_err();
        assert_eq!(f, "ociVersion");
        let (f, _) =
            check(&GOOD.replace(r#""ociVersion":"1.0.2""#, r#""ociVersion":"2.0.0""#)).unwrap_err();
        assert_eq!(f, "ociVersion");
        let (f, _) = check(&GOOD.replace(r#"["sh"]"#, "[]")).unwrap_err();
        assert_eq!(f, "process.args");
        let (f, _) = check(&GOOD.replace(r#""cwd":"/""#, r#""cwd":"tmp""#)).unwrap_err();
        assert_eq!(f, "process.cwd");
        // runc 1.1 takes a relative mount destination (relative to the rootfs).
        let t = GOOD.replace(
            r#""linux""#,
            r#""mounts":[{"destination":"/proc","type":"proc"},{"destination":"x"}],"linux""#,
        );
        check(&t).unwrap();
    }

    #[test]
    fn env_entries_need_a_name_and_no_nul() {
        // libcontainer's init panicked on these ("failed to set environment variable")
        for bad in [r#""=x""#, r#""""#, r#""A=b\u0000c""#, r#""A\u0000=b""#] {
            let t = GOOD.replace(r#""cwd":"/""#, &format!(r#""cwd":"/","env":["A=1",{bad}]"#));
            assert_eq!(check(&t).unwrap_err().0, "process.env[1]", "{bad}");
        }
        for good in [r#""NOEQ""#, r#""A=""#, r#""A==b""#] {
            let t = GOOD.replace(r#""cwd":"/""#, &format!(r#""cwd":"/","env":[{good}]"#));
            check(&t).unwrap();
        }
    }

    #[test]
    fn duplicate_namespace_and_orphan_mappings() {
        let t = GOOD.replace(r#"{"type":"mount"}"#, r#"{"type":"pid"}"#);
        assert_eq!(check(&t).unwrap_err().0, "linux.namespaces[1].type");
        let t = GOOD.replace(
            r#""namespaces""#,
            r#""uidMappings":[{"containerID":0,"hostID":1000,"size":1}],"namespaces""#,
        );
        assert_eq!(check(&t).unwrap_err().0, "linux.uidMappings");
    }

    #[test]
    fn missing_dir_and_file() {
        let d = tempfile::tempdir().unwrap();
        assert!(matches!(
            load(&d.path().join("nope")),
            Err(BundleError::MissingBundle(_))
        ));
        assert!(matches!(load(d.path()), Err(BundleError::MissingConfig(_))));
    }
}
