//! Log output in runc's two formats, configured once from `--log`, `--log-format`
//! and `--debug`.
//!
//! Shapes (logrus, as runc writes them and containerd's shim reads them):
//! - text: `time="2026-11-30T12:46:18.123456789Z" level=error msg="container not found"`
//! - json: `{"level":"error","msg":"container not found","time":"2026-11-30T12:46:18.123456789Z"}`
//!
//! Without `--debug` only siloc's own warnings and errors are written: libcontainer logs
//! handled conditions at error level, and runc prints nothing but the final error.
//! While a container is built, libcontainer's errors also go to
//! [`crate::engine::init_cause`], which words the cause of a failed init for the final
//! error.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

use tracing::field::{Field, Visit};
use tracing::subscriber::Interest;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Layer};
use tracing_subscriber::prelude::*;

/// `--log-format`: runc accepts `text` (default) and `json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum LogFormat {
    Text,
    Json,
}

/// Where log lines go: stderr unless `--log FILE` names a file (opened for append).
enum Sink {
    Stderr,
    File(Mutex<File>),
}

struct RuncLayer {
    sink: Sink,
    format: LogFormat,
    debug: bool,
    /// `siloc: warning: MSG` on stderr: siloc's own commands for people (`scenario`,
    /// `image`, `check`), where nothing parses runc's logfmt.
    human: bool,
}

/// Installs the global subscriber. Returns whether log lines go to stderr, which the
/// caller needs to know: runc repeats a fatal error on stderr when the log is a file.
/// `human`: lines for stderr in `text` format read `siloc: LEVEL: MSG` (siloc's own
/// commands); a log file and `json` keep runc's shapes.
///
/// Errors: the log file cannot be opened (the message names it).
pub(crate) fn init(
    log: Option<&Path>,
    format: LogFormat,
    debug: bool,
    human: bool,
) -> anyhow::Result<bool> {
    let sink = match log {
        // runc treats `--log /dev/stderr` like no flag.
        Some(p) if p != Path::new("/dev/stderr") => {
            let file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| anyhow::anyhow!("open log file {}: {e}", p.display()))?;
            Sink::File(Mutex::new(file))
        }
        _ => Sink::Stderr,
    };
    let to_stderr = matches!(sink, Sink::Stderr);
    let layer = RuncLayer {
        sink,
        format,
        debug,
        human: human && to_stderr && format == LogFormat::Text,
    };
    // A second init (tests calling twice) keeps the first subscriber; that is harmless.
    let _ = tracing_subscriber::registry().with(layer).try_init();
    Ok(to_stderr)
}

impl RuncLayer {
    fn wanted(&self, meta: &Metadata<'_>) -> bool {
        if self.debug {
            return *meta.level() <= Level::DEBUG;
        }
        meta.target().starts_with("siloc") && *meta.level() <= Level::WARN
    }
}

impl<S: Subscriber> Layer<S> for RuncLayer {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if self.wanted(meta) {
            Interest::always()
        } else if crate::engine::init_cause::may_want(meta.target(), *meta.level()) {
            // Wanted only while a create is under way: asked each time.
            Interest::sometimes()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        self.wanted(meta) || crate::engine::init_cause::wants(meta.target(), *meta.level())
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let cause = crate::engine::init_cause::wants(meta.target(), *meta.level());
        if !cause && !self.wanted(meta) {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        // libcontainer's init reports only the top of its errors: the cause it logs
        // is caught for the caller's message (engine::init_cause).
        if cause {
            crate::engine::init_cause::note(*meta.level(), &fields.msg, &fields.extra);
        }
        if !self.wanted(meta) {
            return;
        }
        let level = level_name(*event.metadata().level());
        let line = if self.human {
            render_human(level, &fields)
        } else {
            render(self.format, level, &now_rfc3339(), &fields)
        };
        match &self.sink {
            Sink::Stderr => crate::scenario::progress::above_bar(|| {
                let _ = std::io::stderr().lock().write_all(line.as_bytes());
            }),
            Sink::File(f) => {
                if let Ok(mut f) = f.lock() {
                    let _ = f.write_all(line.as_bytes());
                }
            }
        }
    }
}

fn level_name(level: Level) -> &'static str {
    match level {
        Level::ERROR => "error",
        Level::WARN => "warning",
        Level::INFO => "info",
        Level::DEBUG => "debug",
        Level::TRACE => "trace",
    }
}

fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

/// The message and the other fields of one event, in recording order.
#[derive(Default)]
struct Fields {
    msg: String,
    extra: Vec<(String, String)>,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.msg = value.to_string();
        } else {
            self.extra
                .push((field.name().to_string(), value.to_string()));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.msg = format!("{value:?}");
        } else {
            self.extra
                .push((field.name().to_string(), format!("{value:?}")));
        }
    }
}

/// One line for a person: `siloc: warning: MSG (key=value ...)`, newline-terminated.
fn render_human(level: &str, fields: &Fields) -> String {
    let mut s = format!("siloc: {level}: {}", fields.msg);
    if !fields.extra.is_empty() {
        let extra: Vec<String> = fields
            .extra
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let _ = write!(s, " ({})", extra.join(" "));
    }
    s.push('\n');
    s
}

/// One log line, newline-terminated, in the given format.
fn render(format: LogFormat, level: &str, time: &str, fields: &Fields) -> String {
    match format {
        LogFormat::Json => {
            let mut obj = serde_json::Map::new();
            obj.insert("level".into(), level.into());
            obj.insert("msg".into(), fields.msg.clone().into());
            obj.insert("time".into(), time.into());
            for (k, v) in &fields.extra {
                obj.insert(k.clone(), v.clone().into());
            }
            let mut s = serde_json::Value::Object(obj).to_string();
            s.push('\n');
            s
        }
        LogFormat::Text => {
            let mut s = format!("time={time:?} level={level} msg={:?}", fields.msg);
            for (k, v) in &fields.extra {
                let _ = write!(s, " {k}={v:?}");
            }
            s.push('\n');
            s
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(msg: &str) -> Fields {
        Fields {
            msg: msg.into(),
            extra: vec![("id".into(), "c1".into())],
        }
    }

    #[test]
    fn json_line_has_level_msg_time() {
        let line = render(LogFormat::Json, "error", "T", &fields("bad \"x\""));
        let v: serde_json::Value = serde_json::from_str(line.trim_end()).unwrap();
        assert_eq!(v["level"], "error");
        assert_eq!(v["msg"], "bad \"x\"");
        assert_eq!(v["time"], "T");
        assert_eq!(v["id"], "c1");
        assert!(line.ends_with('\n'));
    }

    #[test]
    fn text_line_is_logrus_shaped() {
        let line = render(LogFormat::Text, "warning", "T", &fields("a b"));
        assert_eq!(line, "time=\"T\" level=warning msg=\"a b\" id=\"c1\"\n");
    }

    #[test]
    fn a_line_for_people_names_siloc_and_the_level() {
        assert_eq!(
            render_human("warning", &fields("runtime youki skipped")),
            "siloc: warning: runtime youki skipped (id=c1)\n"
        );
        let plain = Fields {
            msg: "m".into(),
            extra: Vec::new(),
        };
        assert_eq!(render_human("error", &plain), "siloc: error: m\n");
    }
}
