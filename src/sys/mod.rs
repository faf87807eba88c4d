//! Low-level mechanisms the features share, one copy each: the new mount API, mountinfo,
//! pidfds, helper processes, directory locks, atomic files, path cleaning, block
//! device numbers, the cgroup layout, and the exe guard that protects the siloc binary.
//! Nothing here knows about containers.

pub mod blockdev;
pub mod cgroup;
pub mod exe_guard;
pub mod fork;
pub mod fs;
pub mod lock;
pub mod mountapi;
pub mod mountinfo;
pub mod paths;
pub mod pidfd;
