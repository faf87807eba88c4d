//! Rate 0 in `linux.resources.blockIO.throttle*Device`: "no limit", on cgroup v1 and v2.
//!
//! runtime-spec (config-linux.md "Block IO") gives a rate per device and says nothing
//! of 0. The kernels disagree: cgroup v1 `blkio.throttle.*_device` takes `MAJ:MIN 0`
//! as "delete this device's rule" (Documentation/admin-guide/cgroup-v1/blkio-controller.rst),
//! while cgroup v2 `io.max` refuses `wbps=0` with ERANGE (block/blk-throttle.c
//! `tg_set_limit`: "numerical result out of range", runc #3336) and lifts a limit only
//! with `key=max`. libcgroups 0.7 writes the spec's rate as it is. siloc takes the v1
//! meaning everywhere: an entry with rate 0 is taken out of what libcgroups writes; at
//! create that leaves the device unlimited, and `update` writes `key=max` on v2 (0 on
//! v1) for it, lifting a limit set before.

use oci_spec::runtime::LinuxBlockIo;

use super::IoKey;
use crate::sys::blockdev::DevNum;

/// Removes every throttle entry with rate 0 from `b` and returns (key, device) for
/// each, in key order (rbps, wbps, riops, wiops) then spec order. Entries whose
/// major/minor are not device numbers (negative) are left for libcgroups to refuse.
pub fn take_zero_rates(b: &mut LinuxBlockIo) -> Vec<(IoKey, DevNum)> {
    let mut taken = Vec::new();
    for key in IoKey::ALL {
        let Some(list) = key.list(b).clone() else {
            continue;
        };
        let mut kept = Vec::with_capacity(list.len());
        for t in list {
            let dev = (u32::try_from(t.major()), u32::try_from(t.minor()));
            match dev {
                (Ok(major), Ok(minor)) if t.rate() == 0 => {
                    let d = DevNum::new(major, minor);
                    if !taken.contains(&(key, d)) {
                        taken.push((key, d));
                    }
                }
                _ => kept.push(t),
            }
        }
        key.set_list(b, if kept.is_empty() { None } else { Some(kept) });
    }
    taken
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block_io(json: &str) -> LinuxBlockIo {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn zero_rates_are_taken_out_and_named() {
        let mut b = block_io(
            r#"{"weight":500,
                "throttleReadBpsDevice":[{"major":8,"minor":0,"rate":0},
                                         {"major":8,"minor":16,"rate":1048576}],
                "throttleWriteBpsDevice":[{"major":8,"minor":0,"rate":0}],
                "throttleReadIOPSDevice":[{"major":253,"minor":1,"rate":100}],
                "throttleWriteIOPSDevice":[{"major":259,"minor":0,"rate":0},
                                           {"major":259,"minor":0,"rate":0}]}"#,
        );
        let taken = take_zero_rates(&mut b);
        assert_eq!(
            taken,
            [
                (IoKey::Rbps, DevNum::new(8, 0)),
                (IoKey::Wbps, DevNum::new(8, 0)),
                (IoKey::Wiops, DevNum::new(259, 0)),
            ]
        );
        let after = serde_json::to_value(&b).unwrap();
        let want = serde_json::json!({
            "weight": 500,
            "throttleReadBpsDevice": [{"major": 8, "minor": 16, "rate": 1048576}],
            "throttleReadIOPSDevice": [{"major": 253, "minor": 1, "rate": 100}],
        });
        assert_eq!(after, want);
    }

    #[test]
    fn nothing_to_take_leaves_the_block_io_as_it_is() {
        let json = r#"{"throttleWriteBpsDevice":[{"major":8,"minor":0,"rate":1}]}"#;
        let mut b = block_io(json);
        assert!(take_zero_rates(&mut b).is_empty());
        assert_eq!(b, block_io(json));
        let mut empty = LinuxBlockIo::default();
        assert!(take_zero_rates(&mut empty).is_empty());
        assert_eq!(empty, LinuxBlockIo::default());
    }
}
