//! The I/O policy in force after `siloc update --io-max` (lifecycle::update), for the
//! container's `io.siloc.io.policy` annotation in `siloc state`: the create-time
//! decision with the updated keys' limits replaced. Pure, so it is unit-tested.

use super::{IoDecision, IoKey};

/// The decision after `--io-max` `settings` (each key with its new rate, `None` for
/// `max`, which lifts the limit) on top of `d`, and its annotation
/// ([`IoDecision::annotation`]). `old` is the annotation in force before: its `spec=`
/// list (where the spec's own blockIO won at create, `wbps@254:0`, `weight`) keeps the
/// entries of keys not updated; `--io-max` writes its keys over the spec's own entries
/// on every disk, so those no longer win.
pub fn after_io_max(
    d: &IoDecision,
    old: Option<&str>,
    settings: &[(IoKey, Option<u64>)],
) -> (IoDecision, String) {
    let mut d = d.clone();
    for (key, rate) in settings {
        d.limits.set(*key, *rate);
    }
    let won: Vec<String> = old
        .and_then(|a| a.split_whitespace().find_map(|f| f.strip_prefix("spec=")))
        .filter(|l| *l != "-")
        .into_iter()
        .flat_map(|l| l.split(','))
        .filter(|e| {
            !settings
                .iter()
                .any(|(k, _)| e.strip_prefix(k.name()).is_some_and(|r| r.starts_with('@')))
        })
        .map(str::to_string)
        .collect();
    let a = d.annotation(&won);
    (d, a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::iopolicy::{CgroupIo, IoLimits};
    use crate::numa::locality::DevNum;

    #[test]
    fn updated_keys_replace_the_create_time_limits_and_spec_entries() {
        let d = IoDecision {
            class: Some("limited".into()),
            limits: IoLimits {
                rbps: Some(16 << 20),
                wbps: Some(8 << 20),
                weight: Some(300),
                ..IoLimits::default()
            },
            disks: vec![("vda".into(), DevNum::new(254, 0))],
            cgroup: CgroupIo::V1 { weight: true },
            bfq: false,
        };
        let old = d.annotation(&["wbps@254:0".into(), "riops@254:0".into()]);
        assert!(old.ends_with("spec=wbps@254:0,riops@254:0"), "{old}");
        let (n, a) = after_io_max(
            &d,
            Some(&old),
            &[
                (IoKey::Wbps, Some(4 << 20)),
                (IoKey::Rbps, None),
                (IoKey::Wiops, Some(7)),
            ],
        );
        assert_eq!(
            a,
            "class=limited cgroup=v1 devices=vda(254:0) rbps=- wbps=4194304 riops=- \
             wiops=7 weight=300 spec=riops@254:0"
        );
        assert_eq!(n.limits.wbps, Some(4 << 20));
        // every spec entry updated away: `spec=-`
        let (_, a) = after_io_max(&n, Some(&a), &[(IoKey::Riops, Some(5))]);
        assert!(a.ends_with("riops=5 wiops=7 weight=300 spec=-"), "{a}");
        // no annotation before
        let (_, a) = after_io_max(&d, None, &[]);
        assert_eq!(a, d.annotation(&[]));
    }
}
