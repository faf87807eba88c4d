//! `siloc scenario run|show-default|report`: the disk-isolation scenario runner.

use std::path::PathBuf;

use super::{Ctx, emit};
use crate::scenario::{file, report, run};

#[derive(clap::Subcommand, Debug)]
pub(crate) enum ScenarioCommand {
    /// Run a scenario (the built-in default unless FILE is given) and report it
    Run(RunArgs),
    /// Print the built-in scenario (TOML), a starting point for your own
    ShowDefault,
    /// Rebuild the report (tables, CSV, JSON, SVG charts) from a run's directory
    Report(ReportArgs),
}

#[derive(clap::Args, Debug)]
pub(crate) struct RunArgs {
    /// Scenario file (TOML); default: the built-in scenario
    pub(crate) file: Option<PathBuf>,
    /// Apply the scenario's [quick] table: about 15 minutes instead of hours
    #[arg(long)]
    pub(crate) quick: bool,
    /// Output directory [default: ./siloc-scenario-<UTC time>]
    #[arg(long)]
    pub(crate) out: Option<PathBuf>,
    /// Continue an interrupted run (the newest ./siloc-scenario-* unless --out)
    #[arg(long)]
    pub(crate) resume: bool,
    /// Only these runtimes of the scenario (comma-separated names)
    #[arg(long = "runtime", value_delimiter = ',')]
    pub(crate) runtime: Option<Vec<String>>,
}

#[derive(clap::Args, Debug)]
pub(crate) struct ReportArgs {
    /// Output directory of a run
    pub(crate) dir: PathBuf,
}

/// Runs a `scenario` subcommand; returns the exit status (130 when interrupted).
#[inline(never)] // out of dispatch, see cli::dispatch
pub(crate) fn scenario(ctx: &Ctx, cmd: ScenarioCommand) -> anyhow::Result<i32> {
    match cmd {
        ScenarioCommand::ShowDefault => {
            emit(file::DEFAULT_TOML.trim_end())?;
            Ok(0)
        }
        ScenarioCommand::Report(a) => {
            let r = report::load(&a.dir)?;
            r.write(&a.dir)?;
            emit(r.text().trim_end())?;
            Ok(0)
        }
        ScenarioCommand::Run(a) => {
            let rt = ctx.runtime()?;
            let opts = run::RunOptions {
                file: a.file,
                quick: a.quick,
                out: a.out,
                resume: a.resume,
                only: a.runtime,
                state_base: ctx.root.join("scenario"),
                image_dir: rt.config.data_root.join("scenario/image"),
                self_exe: std::env::current_exe()?,
            };
            match run::run(&opts) {
                Ok(outcome) => {
                    let r = report::load(&outcome.out)?;
                    r.write(&outcome.out)?;
                    emit(r.text().trim_end())?;
                    emit(&format!(
                        "\nreport: {} ({})",
                        outcome.out.display(),
                        report::FILES.join(", ")
                    ))?;
                    if outcome.failed > 0 {
                        tracing::warn!(target: "siloc", "{} of {} cells failed; `siloc scenario run --resume --out {}` retries them", outcome.failed, outcome.cells, outcome.out.display());
                    }
                    Ok(0)
                }
                Err(e @ run::RunError::Interrupted { .. }) => {
                    eprintln!("{e}");
                    Ok(130)
                }
                Err(e) => Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn scenario_run_is_not_sealed_but_container_commands_are() {
        let args = |a: &[&str]| a.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        let enters = |a: &[&str]| super::super::enters_container(&args(a));
        assert!(!enters(&[
            "siloc", "--root", "/r", "scenario", "run", "--quick"
        ]));
        assert!(enters(&["siloc", "--root", "/r", "run", "--detach", "id"]));
        assert!(enters(&["siloc", "exec", "id", "sh"]));
        assert!(!enters(&["siloc", "state", "id"]));
    }
}
