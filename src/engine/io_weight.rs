//! libcgroups 0.7 gap: it scales `blockIO.weight` to cgroup v2 `io.weight` in u16
//! arithmetic, which overflows above a weight of 16. Deletable when libcgroups scales
//! in a wider type.

use oci_spec::runtime::LinuxResources;

/// libcgroups 0.7 scales `blockIO.weight` to io.weight in u16 arithmetic, which
/// overflows above 16. Where bfq's io.bfq.weight (which takes the weight unscaled) is
/// absent, hand io.weight the value scaled as runc does, through `unified`.
pub fn v2_weight_without_overflow(apply: &mut LinuxResources, dir: &std::path::Path) {
    let Some(w) = apply.block_io().as_ref().and_then(|b| b.weight()) else {
        return;
    };
    if dir.join("io.bfq.weight").exists() || w == 0 {
        return;
    }
    let scaled = 1 + (u64::from(w).saturating_sub(10)) * 9999 / 990;
    let mut u = apply.unified().clone().unwrap_or_default();
    u.entry("io.weight".into())
        .or_insert_with(|| format!("default {scaled}"));
    apply.set_unified(Some(u));
    if let Some(mut b) = apply.block_io().clone() {
        b.set_weight(None);
        apply.set_block_io(Some(b));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn v2_weight_goes_through_unified_without_bfq() {
        let d = tempfile::tempdir().unwrap();
        let mut r: LinuxResources =
            serde_json::from_value(json!({"blockIO":{"weight":500}})).unwrap();
        v2_weight_without_overflow(&mut r, d.path());
        assert_eq!(r.block_io().as_ref().unwrap().weight(), None);
        // runc's scaling: 1 + (500 - 10) * 9999 / 990
        assert_eq!(r.unified().as_ref().unwrap()["io.weight"], "default 4950");
        std::fs::write(d.path().join("io.bfq.weight"), "").unwrap();
        let mut r: LinuxResources =
            serde_json::from_value(json!({"blockIO":{"weight":500}})).unwrap();
        v2_weight_without_overflow(&mut r, d.path());
        assert_eq!(r.block_io().as_ref().unwrap().weight(), Some(500));
    }
}
