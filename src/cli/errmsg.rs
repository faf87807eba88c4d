//! runc's wording for the errors clients parse: the one place where libcontainer's
//! texts are rewritten into runc's (the checks that refuse a bad spec before
//! libcontainer runs word their own errors in runc's words where runc has some).
//!
//! - The prefix. runc says `runc create failed: ` and `runc run failed: ` before every
//!   error of those commands (create.go, run.go: a fixed "runc <cmd> failed: %w"), and
//!   `exec failed: ` before every error of `exec` (exec.go, which also exits 255, so a
//!   caller can tell that from the process's own status). siloc says `siloc create
//!   failed: `, `siloc run failed: ` and `exec failed: ` in their place, and drops
//!   libcontainer's own "failed to create container: ". siloc's own errors that name
//!   the file and field (`/b/config.json: field process.cwd: ...`) keep their text
//!   after the prefix.
//! - A command that cannot be executed. podman turns an OCI runtime's error message into
//!   its exit codes by matching runc's words: "executable file not found in $PATH" or
//!   "no such file or directory" → 127, "permission denied" → 126; anything else is a
//!   generic failure (and `podman exec` then answers 255). libcontainer words a command
//!   it cannot start its own way ("executable 'x' not found in $PATH"), so those cases
//!   are rewritten to runc's `exec: "x": ...` lines.
//! - cgroup writes refused by the kernel. libcontainer says `intermediate process error
//!   cgroup error: io error: failed to write V to P: Numerical result out of range (os
//!   error 34)`; runc `unable to start container process: unable to apply cgroup
//!   configuration: failed to write "V": write P: numerical result out of range` for the
//!   cpuset files it writes when it joins the cgroup, and `unable to start container
//!   process: error during container init: error setting cgroup config for procHooks
//!   process: ...` for the rest (runc 1.1.5's process_linux.go). Any other
//!   "intermediate process error" is runc's "unable to start container process".
//! - A failure libcontainer's init reports only as "failed to prepare rootfs", "failed
//!   to set sysctl" and the like: the cause it logged is caught and worded as runc words
//!   it ([`crate::engine::init_cause`]) before the message gets here.

/// libcontainer's text when the container process cannot be executed
/// (process/channel.rs and workload/default.rs in libcontainer 0.7).
const EXEC_FAILED: &str = "exec process failed with error error in executing process : ";
const CREATE_FAILED: &str = "failed to create container: ";
/// libcontainer's text for a cgroup its intermediate process could not set up
/// (process/channel.rs, process/container_intermediate_process.rs).
const CGROUP_FAILED: &str = "intermediate process error cgroup error: ";
const INTERMEDIATE_FAILED: &str = "intermediate process error ";
/// runc's words for a failure before its init runs, and for one during it.
const START_FAILED: &str = "unable to start container process: ";
const INIT_FAILED: &str = "unable to start container process: error during container init: ";

/// The command that failed, for the prefix runc gives its error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failed {
    /// `create`: "siloc create failed: ".
    Create,
    /// `run`: "siloc run failed: ".
    Run,
    /// `exec`: "exec failed: ".
    Exec,
    /// Any other command: no prefix (runc's other commands give none).
    Other,
}

/// Exit status of a failed `siloc exec` (runc: 255, so a caller can tell it from the
/// process's own status).
pub(crate) const EXEC_ERROR_STATUS: i32 = 255;

/// The error and its causes as one line, `a: b: c` as anyhow's `{:#}` joins them,
/// leaving out a cause whose text the line already holds: siloc's errors show their
/// source in their own message (`{path}: {source}`), which `{:#}` repeated.
pub(crate) fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut line = String::new();
    let mut next = Some(e);
    while let Some(cause) = next {
        next = cause.source();
        let text = cause.to_string();
        if line.is_empty() {
            line = text;
        } else if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

/// The whole error chain `msg` of failed command `cmd` in runc's words (module doc).
pub(crate) fn runc_message(msg: &str, cmd: Failed) -> String {
    // libcontainer's console-socket errors name youki, its own runtime.
    let msg = &msg.replace(" if youki will ", " if siloc will ");
    let msg = if let Some(at) = msg.find(EXEC_FAILED) {
        format!(
            "{}{START_FAILED}{}",
            &msg[..at],
            exec_detail(&msg[at + EXEC_FAILED.len()..])
        )
    } else if let Some(at) = msg.find(CGROUP_FAILED) {
        format!(
            "{}{}",
            &msg[..at],
            cgroup_detail(&msg[at + CGROUP_FAILED.len()..])
        )
    } else if let Some(at) = msg.find(INTERMEDIATE_FAILED) {
        format!(
            "{}{START_FAILED}{}",
            &msg[..at],
            &msg[at + INTERMEDIATE_FAILED.len()..]
        )
    } else {
        msg.to_string()
    };
    let msg = quote_sysctl(&msg);
    let bare = msg.strip_prefix(CREATE_FAILED).unwrap_or(&msg);
    match cmd {
        Failed::Create => format!("siloc create failed: {bare}"),
        Failed::Run => format!("siloc run failed: {bare}"),
        Failed::Exec => format!("exec failed: {bare}"),
        Failed::Other => msg,
    }
}

/// libcgroups' reason a cgroup could not be set up, in runc's words (module doc).
fn cgroup_detail(detail: &str) -> String {
    let detail = detail.strip_prefix("io error: ").unwrap_or(detail);
    let (what, errno) = match detail.rsplit_once(": ") {
        Some((what, err)) => match go_errno_text(err) {
            Some(e) => (what, e),
            None => {
                return format!(
                    "{INIT_FAILED}error setting cgroup config for procHooks process: {detail}"
                );
            }
        },
        None => {
            return format!(
                "{INIT_FAILED}error setting cgroup config for procHooks process: {detail}"
            );
        }
    };
    if let Some(rest) = what.strip_prefix("failed to write ")
        && let Some((data, path)) = rest.rsplit_once(" to /")
    {
        let path = format!("/{path}");
        let file = path.rsplit('/').next().unwrap_or_default();
        let stage = if file.starts_with("cpuset.") {
            format!("{START_FAILED}unable to apply cgroup configuration: ")
        } else {
            format!("{INIT_FAILED}error setting cgroup config for procHooks process: ")
        };
        return format!("{stage}failed to write {data:?}: write {path}: {errno}");
    }
    let what = what
        .strip_prefix("failed to open ")
        .map(|p| format!("open {p}"))
        .unwrap_or_else(|| what.to_string());
    format!("{INIT_FAILED}error setting cgroup config for procHooks process: {what}: {errno}")
}

/// libcontainer's refusals of a sysctl (error.rs, `ErrInvalidSpec`), whose key runc
/// quotes (`sysctl "vm.swappiness" is not in a separate kernel namespace`, runc's
/// configs/validate/validator.go).
const SYSCTL_REFUSALS: [&str; 4] = [
    " is not allowed in the hosts ipc namespace",
    " not allowed in host network namespace",
    " is not allowed as it conflicts with the OCI ",
    " is not in a separate kernel namespace",
];

/// `msg` with the key (and OCI field) of a sysctl refusal quoted as runc quotes them.
fn quote_sysctl(msg: &str) -> String {
    for suffix in SYSCTL_REFUSALS {
        if let Some(end) = msg.find(suffix)
            && let Some(start) = msg[..end].rfind("sysctl ")
        {
            let key = &msg[start + "sysctl ".len()..end];
            if key.is_empty() || key.contains(' ') || key.starts_with('"') {
                continue;
            }
            let mut rest = msg[end..].to_string();
            if let Some(field) = rest
                .strip_prefix(" is not allowed as it conflicts with the OCI ")
                .and_then(|r| r.strip_suffix(" field"))
                .filter(|f| !f.starts_with('"'))
            {
                rest = format!(" is not allowed as it conflicts with the OCI {field:?} field");
            }
            return format!("{}sysctl {key:?}{rest}", &msg[..start]);
        }
    }
    msg.to_string()
}

/// Rust's text of an I/O error, `No such file or directory (os error 2)`, as Go's
/// (`no such file or directory`); `None` for another text.
fn go_errno_text(text: &str) -> Option<String> {
    let n = text
        .strip_suffix(')')?
        .rsplit_once(" (os error ")?
        .1
        .parse::<i32>()
        .ok()?;
    Some(crate::sys::errno::go_text(nix::Error::from_raw(n)))
}

/// libcontainer's reason a command cannot be executed, as runc's `exec: "x": ...`.
fn exec_detail(detail: &str) -> String {
    if let Some(cmd) = detail
        .strip_prefix("executable '")
        .and_then(|r| r.strip_suffix("' not found in $PATH"))
    {
        // runc stats a command with a slash and searches $PATH for one without.
        return if cmd.contains('/') {
            format!("exec: {cmd:?}: stat {cmd}: no such file or directory")
        } else {
            format!("exec: {cmd:?}: executable file not found in $PATH")
        };
    }
    if let Some(rest) = detail.strip_prefix("executable '")
        && rest.ends_with("does not have correct permissions")
        && let Some(end) = rest.find("' at path '")
    {
        return format!("exec: {:?}: permission denied", &rest[..end]);
    }
    detail.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOT_FOUND: &str = "failed to create container: exec process failed with error \
        error in executing process : executable 'nope' not found in $PATH";

    #[test]
    fn libcontainer_naming_youki_names_siloc() {
        let m = runc_message(
            "cannot use console socket if youki will not detach or allocate tty",
            Failed::Exec,
        );
        assert_eq!(
            m,
            "exec failed: cannot use console socket if siloc will not detach or allocate tty"
        );
    }

    #[test]
    fn command_not_in_path() {
        assert_eq!(
            runc_message(NOT_FOUND, Failed::Run),
            "siloc run failed: unable to start container process: exec: \"nope\": \
             executable file not found in $PATH"
        );
        assert_eq!(
            runc_message(NOT_FOUND, Failed::Exec),
            "exec failed: unable to start container process: exec: \"nope\": \
             executable file not found in $PATH"
        );
    }

    #[test]
    fn missing_path_is_a_stat_failure() {
        let msg = NOT_FOUND.replace("'nope'", "'/no/such'");
        assert_eq!(
            runc_message(&msg, Failed::Exec),
            "exec failed: unable to start container process: exec: \"/no/such\": \
             stat /no/such: no such file or directory"
        );
    }

    #[test]
    fn not_executable_is_permission_denied() {
        let msg = "failed to create container: exec process failed with error error in \
                   executing process : executable '/etc/passwd' at path '\"/etc/passwd\"' \
                   does not have correct permissions";
        assert_eq!(
            runc_message(msg, Failed::Create),
            "siloc create failed: unable to start container process: exec: \
             \"/etc/passwd\": permission denied"
        );
    }

    #[test]
    fn other_exec_failures_lose_the_stutter_only() {
        let msg = "failed to create container: exec process failed with error error in \
                   executing process : PATH environment variable is not set";
        assert_eq!(
            runc_message(msg, Failed::Other),
            "failed to create container: unable to start container process: PATH \
             environment variable is not set"
        );
    }

    #[test]
    fn a_source_shown_in_the_message_is_not_repeated() {
        #[derive(Debug, thiserror::Error)]
        #[error("{path}: {source}")]
        struct WithSource {
            path: String,
            source: std::io::Error,
        }
        let io = std::io::Error::from_raw_os_error(libc::ENOENT);
        let e = anyhow::Error::from(WithSource {
            path: "/x/blob".into(),
            source: io,
        });
        assert_eq!(
            chain(&*e),
            "/x/blob: No such file or directory (os error 2)"
        );
        // context and causes the message does not show are kept
        let e = e.context("image unpack");
        assert_eq!(
            chain(&*e),
            "image unpack: /x/blob: No such file or directory (os error 2)"
        );
        let e =
            anyhow::Error::from(std::io::Error::from_raw_os_error(libc::EACCES)).context("open /y");
        assert_eq!(chain(&*e), "open /y: Permission denied (os error 13)");
    }

    #[test]
    fn other_messages_pass_unchanged_but_get_the_commands_prefix() {
        for m in [
            "container does not exist",
            "/b/config.json: field process.args: must name at least the program to run",
        ] {
            assert_eq!(runc_message(m, Failed::Other), m);
            assert_eq!(runc_message(m, Failed::Exec), format!("exec failed: {m}"));
            assert_eq!(
                runc_message(m, Failed::Create),
                format!("siloc create failed: {m}")
            );
            assert_eq!(
                runc_message(m, Failed::Run),
                format!("siloc run failed: {m}")
            );
        }
    }

    #[test]
    fn sysctl_refusals_quote_the_key() {
        assert_eq!(
            runc_message(
                "sysctl vm.swappiness is not in a separate kernel namespace",
                Failed::Run
            ),
            "siloc run failed: sysctl \"vm.swappiness\" is not in a separate kernel namespace"
        );
        assert_eq!(
            runc_message(
                "sysctl kernel.hostname is not allowed as it conflicts with the OCI hostname field",
                Failed::Create
            ),
            "siloc create failed: sysctl \"kernel.hostname\" is not allowed as it conflicts \
             with the OCI \"hostname\" field"
        );
        assert_eq!(
            runc_message(
                "sysctl net.ipv4.ip_forward not allowed in host network namespace",
                Failed::Other
            ),
            "sysctl \"net.ipv4.ip_forward\" not allowed in host network namespace"
        );
    }

    #[test]
    fn cgroup_writes_in_runc_words() {
        let cpus = "failed to create container: intermediate process error cgroup error: io \
                    error: failed to write 99 to /sys/fs/cgroup/cpuset/siloc-x/cpuset.cpus: \
                    Numerical result out of range (os error 34)";
        assert_eq!(
            runc_message(cpus, Failed::Run),
            "siloc run failed: unable to start container process: unable to apply cgroup \
             configuration: failed to write \"99\": write \
             /sys/fs/cgroup/cpuset/siloc-x/cpuset.cpus: numerical result out of range"
        );
        let pids = "failed to create container: intermediate process error cgroup error: io \
                    error: failed to write 5 to /sys/fs/cgroup/pids/x/pids.max: Invalid \
                    argument (os error 22)";
        assert_eq!(
            runc_message(pids, Failed::Create),
            "siloc create failed: unable to start container process: error during container \
             init: error setting cgroup config for procHooks process: failed to write \"5\": \
             write /sys/fs/cgroup/pids/x/pids.max: invalid argument"
        );
        let mem = "failed to create container: intermediate process error cgroup error: \
                   unable to set memory limit to 1 (current usage: 2, peak usage: 3)";
        assert_eq!(
            runc_message(mem, Failed::Run),
            "siloc run failed: unable to start container process: error during container \
             init: error setting cgroup config for procHooks process: unable to set memory \
             limit to 1 (current usage: 2, peak usage: 3)"
        );
        let open = "intermediate process error cgroup error: io error: failed to open \
                    /sys/fs/cgroup/x/y: No such file or directory (os error 2)";
        assert_eq!(
            runc_message(open, Failed::Other),
            "unable to start container process: error during container init: error setting \
             cgroup config for procHooks process: open /sys/fs/cgroup/x/y: no such file or \
             directory"
        );
        assert_eq!(
            runc_message(
                "intermediate process error EPERM: Operation not permitted",
                Failed::Other
            ),
            "unable to start container process: EPERM: Operation not permitted"
        );
    }
}
