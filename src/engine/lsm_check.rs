//! runc's refusals of LSM labels the host cannot apply, checked before anything is
//! made (libcontainer 0.7 says "io error: No such file or directory (os error 2)" for
//! an AppArmor profile on a host without AppArmor, and ignores an SELinux label).
//!
//! - `process.apparmorProfile` on a host whose AppArmor is not enabled
//!   (`/sys/module/apparmor/parameters/enabled` missing or not `Y`): runc 1.1.5 writes
//!   the profile to `/proc/self/attr/exec` anyway and fails with the kernel's EINVAL;
//!   siloc gives that text and says why.
//! - `process.selinuxLabel` on a host without SELinux (no `/sys/fs/selinux/enforce`):
//!   runc's config validator refuses it (libcontainer/configs/validate/validator.go).

use std::path::Path;

use oci_spec::runtime::Process;

/// Where the kernel says whether AppArmor is enabled (`Y` or `N`).
pub const APPARMOR_ENABLED: &str = "/sys/module/apparmor/parameters/enabled";
/// A file that exists when selinuxfs is mounted (go-selinux looks for selinuxfs).
pub const SELINUX_ENFORCE: &str = "/sys/fs/selinux/enforce";

/// The refusals, in runc's words.
#[derive(Debug, thiserror::Error)]
pub enum LsmError {
    #[error(
        "unable to start container process: error during container init: unable to apply \
         apparmor profile: apparmor failed to apply profile: write /proc/self/attr/exec: \
         invalid argument (process.apparmorProfile {profile:?}: AppArmor is not enabled on \
         this host, {APPARMOR_ENABLED})"
    )]
    AppArmorDisabled { profile: String },
    #[error("selinux label is specified in config, but selinux is disabled or not supported")]
    SelinuxDisabled,
}

/// Checks `process`'s labels against the host (module doc); `sys` is `/` on the host
/// (a test points it at a fixture tree). Reads nothing when no label is given.
///
/// Errors: [`LsmError`].
pub fn check(process: Option<&Process>, sys: &Path) -> Result<(), LsmError> {
    let Some(p) = process else { return Ok(()) };
    let at = |f: &str| sys.join(f.trim_start_matches('/'));
    if let Some(profile) = p.apparmor_profile().as_ref().filter(|s| !s.is_empty()) {
        let enabled =
            std::fs::read_to_string(at(APPARMOR_ENABLED)).is_ok_and(|s| s.starts_with('Y'));
        if !enabled {
            return Err(LsmError::AppArmorDisabled {
                profile: profile.clone(),
            });
        }
    }
    if p.selinux_label().as_ref().is_some_and(|s| !s.is_empty()) && !at(SELINUX_ENFORCE).exists() {
        return Err(LsmError::SelinuxDisabled);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn process(v: serde_json::Value) -> Process {
        let mut base =
            serde_json::json!({"cwd": "/", "args": ["sh"], "user": {"uid": 0, "gid": 0}});
        if let (Some(b), Some(o)) = (base.as_object_mut(), v.as_object()) {
            b.extend(o.clone());
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn labels_the_host_cannot_apply_are_refused() {
        let host = tempfile::tempdir().unwrap();
        let aa = process(serde_json::json!({"apparmorProfile": "p1"}));
        let e = check(Some(&aa), host.path()).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "unable to start container process: error during container init: unable to \
                 apply apparmor profile: apparmor failed to apply profile: write \
                 /proc/self/attr/exec: invalid argument (process.apparmorProfile \"p1\""
            ),
            "{e}"
        );
        let se = process(serde_json::json!({"selinuxLabel": "system_u:system_r:t:s0"}));
        assert_eq!(
            check(Some(&se), host.path()).unwrap_err().to_string(),
            "selinux label is specified in config, but selinux is disabled or not supported"
        );
        check(Some(&process(serde_json::json!({}))), host.path()).unwrap();
        check(None, host.path()).unwrap();
        // enabled: nothing to refuse
        let p = host.path().join("sys/module/apparmor/parameters");
        std::fs::create_dir_all(&p).unwrap();
        std::fs::write(p.join("enabled"), "Y\n").unwrap();
        std::fs::create_dir_all(host.path().join("sys/fs/selinux")).unwrap();
        std::fs::write(host.path().join("sys/fs/selinux/enforce"), "0").unwrap();
        check(Some(&aa), host.path()).unwrap();
        check(Some(&se), host.path()).unwrap();
        std::fs::write(p.join("enabled"), "N\n").unwrap();
        assert!(check(Some(&aa), host.path()).is_err());
    }
}
