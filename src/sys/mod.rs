//! Low-level mechanisms the features share, one copy each: the new mount API,
//! mountinfo, pidfds, OOM-kill watches, helper processes, directory locks, atomic
//! files, path cleaning, block device numbers, the cgroup layout, errno texts in runc's
//! words, the exe guard that protects the siloc binary, the kernel's memory policy
//! modes (and which of them it takes), and the C math functions that keep glibc's libm
//! out of the process. Nothing here knows about containers.

pub(crate) mod blockdev;
pub mod cgroup;
pub mod cgroup_mounts;
pub(crate) mod errno;
pub(crate) mod exe_guard;
pub(crate) mod fork;
pub mod fs;
pub(crate) mod lock;
pub mod math;
pub mod mempolicy;
pub mod mountapi;
pub mod mountinfo;
pub mod ns;
pub mod oom;
pub(crate) mod paths;
pub(crate) mod pidfd;
