//! Low-level mechanisms the features share, one copy each: the new mount API, mountinfo,
//! pidfds, helper processes, directory locks, atomic files, path cleaning, block
//! device numbers, the cgroup layout, and the exe guard that protects the siloc binary.
//! Nothing here knows about containers.

pub(crate) mod blockdev;
pub(crate) mod cgroup;
pub(crate) mod exe_guard;
pub(crate) mod fork;
pub mod fs;
pub(crate) mod lock;
pub mod mountapi;
pub mod mountinfo;
pub(crate) mod ns;
pub(crate) mod paths;
pub(crate) mod pidfd;
