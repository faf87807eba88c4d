//! The progress bar of a run (indicatif on stderr): cell, phase and time left. When
//! stderr is no terminal, one plain line per step instead.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

/// The bar on screen, if any: log lines written to stderr meanwhile go above it
/// ([`above_bar`]) instead of into it.
static SHOWN: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Runs `write` (a line to stderr: cli::logging's warnings) with the run's progress
/// bar, if one is on screen, cleared first and drawn again after (indicatif's
/// `suspend`), so the line does not land inside the bar.
pub fn above_bar(write: impl FnOnce()) {
    let bar = SHOWN.lock().ok().and_then(|b| b.clone());
    match bar {
        Some(b) => b.suspend(write),
        None => write(),
    }
}

fn show(bar: Option<&ProgressBar>) {
    if let Ok(mut s) = SHOWN.lock() {
        *s = bar.cloned();
    }
}

/// Progress of a run of `total` cells, `before` of them done by an earlier run that
/// `--resume` continues, each expected to take `cell_secs`. Cells are numbered over
/// the whole run, as the interrupt message counts them.
pub struct Progress {
    bar: Option<ProgressBar>,
    before: usize,
    total: usize,
    cell_secs: f64,
    state: Mutex<State>,
}

struct State {
    done: usize,
    started: Instant,
    cell: String,
}

impl Progress {
    /// A bar for `total` cells of about `cell_secs` seconds each, `before` of them done.
    pub fn new(before: usize, total: usize, cell_secs: f64) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let b = ProgressBar::new(total as u64);
            b.set_position(before as u64);
            let style = ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] [{bar:24}] {pos}/{len} {wide_msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
            b.set_style(style);
            b.enable_steady_tick(Duration::from_millis(200));
            b
        });
        show(bar.as_ref());
        Progress {
            bar,
            before,
            total,
            cell_secs,
            state: Mutex::new(State {
                done: 0,
                started: Instant::now(),
                cell: String::new(),
            }),
        }
    }

    /// Time left: the expected time of the cells not done, scaled by how the finished
    /// ones compared with the expectation.
    fn left(&self, st: &State) -> Duration {
        let remaining = self.total.saturating_sub(self.before + st.done) as f64;
        let per_cell = if st.done > 0 {
            st.started.elapsed().as_secs_f64() / st.done as f64
        } else {
            self.cell_secs
        };
        Duration::from_secs_f64((remaining * per_cell).max(0.0))
    }

    /// A new cell starts.
    pub fn cell(&self, label: &str) {
        if let Ok(mut st) = self.state.lock() {
            st.cell = format!("cell {}/{} {label}", self.before + st.done + 1, self.total);
        }
    }

    /// A step of the current cell starts.
    pub fn step(&self, step: &str) {
        let Ok(st) = self.state.lock() else { return };
        let left = human(self.left(&st));
        let msg = if st.cell.is_empty() {
            format!("{step} · ~{left} left")
        } else {
            format!("{} · {step} · ~{left} left", st.cell)
        };
        match &self.bar {
            Some(b) => b.set_message(msg),
            None => eprintln!("{msg}"),
        }
    }

    /// The current cell finished.
    pub fn finish_cell(&self) {
        if let Ok(mut st) = self.state.lock() {
            st.done += 1;
        }
        if let Some(b) = &self.bar {
            b.inc(1);
        }
    }

    /// Prints a line above the bar.
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(b) => b.println(line),
            None => eprintln!("{line}"),
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(b) = &self.bar {
            show(None);
            b.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.bar.is_some() {
            show(None);
        }
    }
}

/// `1h02m`, `5m20s`, `42s`.
pub fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_well() {
        assert_eq!(human(Duration::from_secs(42)), "42s");
        assert_eq!(human(Duration::from_secs(320)), "5m20s");
        assert_eq!(human(Duration::from_secs(3720)), "1h02m");
    }

    #[test]
    fn a_resumed_run_numbers_cells_over_the_whole_run() {
        let p = Progress::new(1, 15, 10.0);
        p.cell("siloc-policy");
        let st = p.state.lock().unwrap();
        assert_eq!(st.cell, "cell 2/15 siloc-policy");
        // 14 cells left at 10 s each: the earlier run's cell is not counted again.
        assert_eq!(p.left(&st), Duration::from_secs(140));
    }
}
