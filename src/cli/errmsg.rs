//! runc's wording for the errors clients parse.
//!
//! podman turns an OCI runtime's error message into its exit codes by matching runc's
//! words: "executable file not found in $PATH" or "no such file or directory" → 127,
//! "permission denied" → 126; anything else is a generic failure (and `podman exec`
//! then answers 255). libcontainer words a command it cannot start its own way
//! ("executable 'x' not found in $PATH"), so those two cases are rewritten to runc's
//! `exec: "x": ...` lines. `runc exec` also says "exec failed: " and exits 255 on any
//! error, so a caller can tell that from the process's own status (runc's exec.go).

/// libcontainer's text when the container process cannot be executed
/// (process/channel.rs and workload/default.rs in libcontainer 0.7).
const EXEC_FAILED: &str = "exec process failed with error error in executing process : ";
const CREATE_FAILED: &str = "failed to create container: ";

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

/// The whole error chain `msg` of a failed command in runc's words; `exec` says whether
/// the command was `exec`, whose errors runc prefixes with "exec failed: " (where
/// libcontainer says "failed to create container: "). Other messages pass unchanged.
pub(crate) fn runc_message(msg: &str, exec: bool) -> String {
    // libcontainer's console-socket errors name youki, its own runtime.
    let msg = &msg.replace(" if youki will ", " if siloc will ");
    let msg = match msg.find(EXEC_FAILED) {
        Some(at) => format!(
            "{}unable to start container process: {}",
            &msg[..at],
            exec_detail(&msg[at + EXEC_FAILED.len()..])
        ),
        None => msg.to_string(),
    };
    if exec {
        format!(
            "exec failed: {}",
            msg.strip_prefix(CREATE_FAILED).unwrap_or(&msg)
        )
    } else {
        msg
    }
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
            true,
        );
        assert_eq!(
            m,
            "exec failed: cannot use console socket if siloc will not detach or allocate tty"
        );
    }

    #[test]
    fn command_not_in_path() {
        assert_eq!(
            runc_message(NOT_FOUND, false),
            "failed to create container: unable to start container process: exec: \"nope\": \
             executable file not found in $PATH"
        );
        assert_eq!(
            runc_message(NOT_FOUND, true),
            "exec failed: unable to start container process: exec: \"nope\": \
             executable file not found in $PATH"
        );
    }

    #[test]
    fn missing_path_is_a_stat_failure() {
        let msg = NOT_FOUND.replace("'nope'", "'/no/such'");
        assert_eq!(
            runc_message(&msg, true),
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
            runc_message(msg, false),
            "failed to create container: unable to start container process: exec: \
             \"/etc/passwd\": permission denied"
        );
    }

    #[test]
    fn other_exec_failures_lose_the_stutter_only() {
        let msg = "failed to create container: exec process failed with error error in \
                   executing process : PATH environment variable is not set";
        assert_eq!(
            runc_message(msg, false),
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
    fn other_messages_pass_unchanged_but_exec_says_so() {
        for m in [
            "container does not exist",
            "config.json: process.args: empty",
        ] {
            assert_eq!(runc_message(m, false), m);
            assert_eq!(runc_message(m, true), format!("exec failed: {m}"));
        }
    }
}
