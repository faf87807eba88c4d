//! siloc: a runc-compatible OCI runtime (see ../shared/DESIGN.md for the picture).
//!
//! The path of one container: [`bundle`] → [`plan`] → [`record`] → [`prepare`]
//! ([`idpool`], [`rootfs`]) → [`engine`] (libcontainer) and back on delete; the
//! [`cli`] speaks runc's language on top.

pub mod annotations;
pub mod bundle;
pub mod cli;
pub mod config;
pub mod cwd;
pub mod engine;
pub mod exe_guard;
pub mod idpool;
pub mod image;
pub mod iopolicy;
pub mod lifecycle;
pub mod locality;
pub mod logging;
pub mod mount_fixups;
pub mod numa;
pub mod paths;
pub mod pidfd;
pub mod placement;
pub mod plan;
pub mod prepare;
pub mod record;
pub mod rootfs;
pub mod scenario;
pub mod signals;
pub mod topology;
pub mod tty;
pub mod units;
pub mod upper_guard;
