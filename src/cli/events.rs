//! `siloc events` (runc 1.1.5 events.go): `{"type":"stats","id":…,"data":…}` lines in
//! runc's stats shape ([`super::runc_stats`]) every `--interval`, and
//! `{"type":"oom","id":…}` lines when the container's memory cgroup has an OOM kill
//! (siloc's one OOM watch, `sys::oom`), until the container stops; with `--stats`
//! one stats line at once.
//!
//! runc goes on after the container has stopped, until its cgroup is removed (v1) or
//! emptied (v2); siloc ends when the init exits, after the OOM kills seen until then.

use std::io::Write;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use libcontainer::container::ContainerStatus;
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::unistd::Pid;
use serde::Serialize;

use super::Ctx;
use super::runc_stats::{self, Stats};
use crate::engine;
use crate::sys::oom::{Oom, OomWatch};

#[derive(clap::Args, Debug)]
pub(crate) struct EventsArgs {
    /// The container id
    pub(crate) id: String,
    /// Display the container's stats then exit
    #[arg(long)]
    pub(crate) stats: bool,
    /// Set the stats collection interval (Go durations: 5s, 500ms, 1m30s)
    #[arg(long, default_value = "5s", value_parser = parse_duration, allow_hyphen_values = true)]
    interval: Interval,
}

/// An `--interval`; `None` when it is zero or negative (refused after the container
/// is found, as runc does).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Interval(Option<Duration>);

/// Durations as Go's `time.ParseDuration` reads them (what runc takes): a sign, then
/// numbers with units `ns`, `us` (`µs`), `ms`, `s`, `m`, `h` (`1m30s`, `1.5h`); also a
/// bare number of seconds.
fn parse_duration(s: &str) -> Result<Interval, String> {
    let t = s.trim();
    let (neg, body) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let bad = || format!("{s:?} is not a duration (such as 5s, 500ms, 1m30s)");
    let secs = if let Ok(n) = body.parse::<f64>() {
        n
    } else {
        let mut rest = body;
        let mut total = 0.0;
        if rest.is_empty() {
            return Err(bad());
        }
        while !rest.is_empty() {
            let num_end = rest
                .find(|c: char| !c.is_ascii_digit() && c != '.')
                .unwrap_or(rest.len());
            let n: f64 = rest[..num_end].parse().map_err(|_| bad())?;
            rest = &rest[num_end..];
            let unit_end = rest
                .find(|c: char| c.is_ascii_digit() || c == '.')
                .unwrap_or(rest.len());
            total += n * match &rest[..unit_end] {
                "ns" => 1e-9,
                "us" | "µs" | "μs" => 1e-6,
                "ms" => 1e-3,
                "s" => 1.0,
                "m" => 60.0,
                "h" => 3600.0,
                _ => return Err(bad()),
            };
            rest = &rest[unit_end..];
        }
        total
    };
    if !secs.is_finite() {
        return Err(bad());
    }
    if neg || secs <= 0.0 {
        return Ok(Interval(None));
    }
    // Go's ParseDuration refuses what overflows its int64 nanoseconds; a Duration
    // holds more, but not everything an f64 does (1e30s, inf: from_secs_f64 panics).
    Duration::try_from_secs_f64(secs)
        .map(|d| Interval(Some(d)))
        .map_err(|_| bad())
}

/// runc's `types.Event`.
#[derive(Serialize)]
struct Event<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a Stats>,
}

impl<'a> Event<'a> {
    fn stats(id: &'a str, data: &'a Stats) -> Event<'a> {
        Event {
            kind: "stats",
            id,
            data: Some(data),
        }
    }
}

/// Writes one event line. `Ok(false)`: the reader has gone (EPIPE), stop.
fn print(ev: &Event) -> anyhow::Result<bool> {
    let mut line = serde_json::to_vec(ev)?;
    line.push(b'\n');
    let mut out = std::io::stdout().lock();
    match out.write_all(&line).and_then(|()| out.flush()) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// `siloc events`.
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn events(ctx: &Ctx, a: EventsArgs) -> anyhow::Result<()> {
    let mut c = engine::load(&ctx.root, &a.id)?;
    let Interval(Some(interval)) = a.interval else {
        anyhow::bail!("duration interval must be greater than 0");
    };
    if c.status() == ContainerStatus::Stopped {
        anyhow::bail!("container with id {} is not running", a.id);
    }
    let pid = c.pid().map(Pid::as_raw);
    let source = runc_stats::Source::new(super::info::cgroup_manager(&c)?, pid);
    if a.stats {
        print(&Event::stats(&a.id, &source.collect()?))?;
        return Ok(());
    }
    let oom_line = Event {
        kind: "oom",
        id: &a.id,
        data: None,
    };
    // The init's pidfd, then the status again: the pid was still the init's when the
    // pidfd was taken.
    let exit = pid.and_then(|p| crate::sys::pidfd::open(Pid::from_raw(p)).ok());
    c.refresh_status()?;
    if c.status() == ContainerStatus::Stopped {
        return Ok(());
    }
    let mut oom = pid.and_then(|p| {
        OomWatch::of_pid(p)
            .map_err(|e| tracing::warn!("no oom events for container {}: {e}", a.id))
            .ok()
    });
    // runc prints the first stats after one interval
    let mut next = Instant::now() + interval;
    loop {
        let wait = next.saturating_duration_since(Instant::now());
        let ms = wait.as_nanos().div_ceil(1_000_000);
        let mut fds = Vec::new();
        if let Some(fd) = &exit {
            fds.push(PollFd::new(fd.as_fd(), PollFlags::POLLIN));
        }
        if let Some(w) = &oom {
            fds.push(PollFd::new(w.fd(), PollFlags::POLLIN));
        }
        match poll(
            &mut fds,
            PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX),
        ) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => anyhow::bail!("events: poll: {e}"),
        }
        let exited = exit.is_some()
            && fds[0]
                .revents()
                .is_some_and(|r| r.intersects(PollFlags::POLLIN | PollFlags::POLLHUP));
        drop(fds);
        // OOM kills first: the kernel counts one before its victim dies.
        if let Some(w) = &mut oom {
            match w.take() {
                Oom::Kills(n) => {
                    for _ in 0..n {
                        if !print(&oom_line)? {
                            return Ok(());
                        }
                    }
                }
                Oom::Gone => return Ok(()),
            }
        }
        if exited {
            return Ok(());
        }
        if Instant::now() < next {
            continue;
        }
        next = (next + interval).max(Instant::now());
        c.refresh_status()?;
        if c.status() == ContainerStatus::Stopped {
            return Ok(());
        }
        match source.collect() {
            Ok(data) => {
                if !print(&Event::stats(&a.id, &data))? {
                    return Ok(());
                }
            }
            // runc logs a failed look and goes on
            Err(e) => tracing::error!("{e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(s: &str) -> Option<Duration> {
        parse_duration(s).unwrap().0
    }

    #[test]
    fn durations_as_go_reads_them() {
        assert_eq!(secs("5s"), Some(Duration::from_secs(5)));
        assert_eq!(secs("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(secs("1m30s"), Some(Duration::from_secs(90)));
        assert_eq!(secs("1.5h"), Some(Duration::from_secs(5400)));
        assert_eq!(secs("250us"), Some(Duration::from_micros(250)));
        assert_eq!(secs("2"), Some(Duration::from_secs(2)));
        // zero and negative are refused later, in runc's words
        assert_eq!(secs("0s"), None);
        assert_eq!(secs("0"), None);
        assert_eq!(secs("-1s"), None);
        // too long for a Duration: refused, not a panic
        for bad in [
            "5x",
            "",
            "s",
            "1..2s",
            "-",
            "1e30",
            "99999999999999999999h",
            "NaN",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn oom_event_has_no_data() {
        let ev = Event {
            kind: "oom",
            id: "c1",
            data: None,
        };
        assert_eq!(
            serde_json::to_string(&ev).unwrap(),
            r#"{"type":"oom","id":"c1"}"#
        );
    }
}
