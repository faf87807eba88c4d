//! siloc: a runc-compatible OCI runtime (see ARCHITECTURE.md for the map, and
//! ../shared/DESIGN.md for the picture).
//!
//! Modules in the order one container meets them: the [`cli`] speaks runc's language;
//! [`lifecycle`] takes a bundle through plan → record → prepare → final spec; the
//! features it plans and prepares are [`userns`], [`rootfs`], [`numa`] and
//! [`iopolicy`]; [`engine`] hands the final spec to libcontainer and holds the
//! workarounds of its gaps; [`sys`] has the low-level mechanisms they share. Beside
//! the path: [`image`] (OCI images to layers and bundles) and [`scenario`] (the
//! disk-isolation runner).

// The command line: runc's commands, then siloc's own.
pub mod cli;

// The host configuration, one section per feature.
pub(crate) mod config;

// The path of one container: bundle → plan → record → prepare → final spec.
pub(crate) mod lifecycle;

// What a bundle asks of siloc, and what siloc reports back (public: the shim binary,
// containerd-shim-siloc-v2, writes and reads them).
pub mod annotations;

// The features lifecycle plans and prepares.
pub mod userns;

pub mod rootfs;

pub mod numa;

pub(crate) mod iopolicy;

// libcontainer, and the workarounds of its gaps.
pub(crate) mod engine;

// Mechanisms shared by all of the above.
pub mod sys;

// Beside the path: images to layers and bundles, the disk-isolation runner.
pub(crate) mod image;

pub(crate) mod scenario;

pub(crate) mod units;
