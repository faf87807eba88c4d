//! siloc's integration tests: one test binary, so that `common` and the siloc library
//! are compiled and linked once, not once per file. One module per concept; run one
//! with a name filter, e.g. `cargo test --release --test it -- lifecycle::`.
//!
//! The tests share one process (two test threads under `hack/test`): none changes the
//! process' environment, working directory or signal handlers; each works in its own
//! `TestEnv` (private state root, data root and config, IDs unique per env) and
//! cleans up in guards that run on failure too. The scenario tests serialise among
//! themselves (they share the disk and drop the page cache).

#[macro_use]
#[path = "../common/mod.rs"]
mod common;

mod bad_input;
mod binary_layout;
mod cgroup_compat;
mod cgroup_mounts;
mod cgroup_races;
mod events;
mod exec_root_modes;
mod frozen;
mod idmapped_mounts;
mod image;
mod iopolicy;
mod lifecycle;
mod mount_semantics;
mod mounted_overlay;
mod numa;
mod pidns_cgroup;
mod process_setup;
mod rootfs_legacy;
mod runc_texts;
mod scenario;
mod seccomp_compat;
mod security;
mod spec_features;
mod stress;
mod userns_console;
mod userns_netns;
mod userns_pool;
mod userns_rootfs;
