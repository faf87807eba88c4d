//! The three C math functions siloc's dependencies call, served from the `libm` crate
//! (the Rust port of musl's libm, kept with Rust's compiler-builtins) instead of
//! glibc's libm.so.6, so that no siloc process loads that library.
//!
//! Why: every siloc command is a short process, and `create`, `run` and `exec` start
//! twice (src/sys/exe_guard.rs). glibc's libm has 21 IFUNC relocations, whose
//! resolvers ld.so runs at every load, spread over its 460 KB of text: a `run` had
//! 380 KiB of libm resident (smaps) for three functions. The callers: `pow` and
//! `log2` in libcgroups' CPU-weight conversion (cgroup v2 and systemd managers,
//! `cpu.weight` from `cpu.shares`), `pow` in indicatif's rate and ETA estimates,
//! `log10` and `pow` in the scenario report's chart axes. Defined here, in the binary,
//! the linker resolves their calls to these definitions and drops libm.so.6 as
//! unused (`--as-needed`, rustc's default). tests/it/binary_layout.rs checks that
//! the binary needs no libm.
//!
//! The results are those of the crate's implementations (FreeBSD msun's, from Sun's
//! fdlibm): within one ulp, with the C standard's special cases (C17 F.10); glibc's
//! are correctly rounded in nearly all cases, so some results differ in the last bit
//! (about 4% of `pow`'s and 1.5% of `log10`'s, sampled). None of that reaches a
//! container: libcgroups' `cpu.weight` for every `cpu.shares` from 3 to 262,143 is
//! the same with both (compared once; the test below keeps a sample). Only these three: a dependency that
//! starts calling another libm function makes the linker load libm.so.6 again,
//! which costs RSS, never correctness (the test then fails and names the library).

/// `pow(3)`: `x` raised to the power `y`, as C's `double pow(double, double)` (C17
/// 7.12.7.4, special cases in F.10.4.4). No errors beyond the IEEE results (NaN,
/// infinities); `errno` is not set.
#[unsafe(no_mangle)]
pub extern "C" fn pow(x: f64, y: f64) -> f64 {
    libm::pow(x, y)
}

/// `log2(3)`: the base-2 logarithm of `x`, as C's `double log2(double)` (C17
/// 7.12.6.10); NaN for `x < 0`, negative infinity for `x == 0`; `errno` is not set.
#[unsafe(no_mangle)]
pub extern "C" fn log2(x: f64) -> f64 {
    libm::log2(x)
}

/// `log10(3)`: the base-10 logarithm of `x`, as C's `double log10(double)` (C17
/// 7.12.6.8); NaN for `x < 0`, negative infinity for `x == 0`; `errno` is not set.
#[unsafe(no_mangle)]
pub extern "C" fn log10(x: f64) -> f64 {
    libm::log10(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Exact powers and the special cases.
    #[test]
    fn exact_values_and_special_cases() {
        assert_eq!(pow(2.0, 10.0), 1024.0);
        assert_eq!(pow(10.0, -2.0), 0.01);
        assert_eq!(pow(0.0, 0.0), 1.0);
        assert!(pow(-1.0, 0.5).is_nan());
        assert_eq!(log2(1024.0), 10.0);
        assert_eq!(log2(0.0), f64::NEG_INFINITY);
        assert!(log2(-1.0).is_nan());
        assert_eq!(log10(1000.0), 3.0);
        assert_eq!(log10(1.0), 0.0);
    }

    /// libcgroups' (and runc 1.3.2's) `cpu.shares` to `cpu.weight` conversion,
    /// `ceil(10^((l^2 + 125 l) / 612 - 7/34))` with `l = log2(shares)`, gives the
    /// weights glibc's functions give (values computed with glibc 2.36; all shares
    /// 3..262143 were compared once, none differs).
    #[test]
    fn cpu_weight_conversion_matches_glibc() {
        let glibc = [
            (3u64, 2u64),
            (100, 17),
            (512, 59),
            (1024, 100),
            (2048, 174),
            (100_000, 4340),
            (262_143, 10_000),
        ];
        for (shares, weight) in glibc {
            let l = log2(shares as f64);
            let e = (l * l + 125.0 * l) / 612.0 - 7.0 / 34.0;
            assert_eq!(pow(10.0, e).ceil() as u64, weight, "shares {shares}");
        }
    }
}
