//! What the dynamic loader does for the shipped binaries at every start (every siloc
//! command is a short process, and `create`, `run` and `exec` start twice, see
//! src/sys/exe_guard.rs): which shared libraries they load and how their relocations
//! are stored. Read with `readelf -d` (binutils, hack/setup); README
//! "bench-lifecycle" has what each costs in peak RSS.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::siloc_bin;

/// `readelf -dW` of `bin`: its dynamic section, one entry a line.
fn dynamic_section(bin: &Path) -> String {
    let out = Command::new("readelf")
        .arg("-dW")
        .arg(bin)
        .output()
        .expect("readelf (binutils) runs");
    assert!(out.status.success(), "readelf -dW {}", bin.display());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Neither binary needs glibc's libm.so.6: siloc serves the math functions its
/// dependencies call itself (src/sys/math.rs), so ld.so neither maps libm nor runs
/// its 21 IFUNC resolvers. A dependency that starts calling another libm function
/// brings the library back; this test then names it.
#[test]
fn binaries_load_no_libm() {
    let shim = PathBuf::from(env!("CARGO_BIN_EXE_containerd-shim-siloc-v2"));
    for bin in [siloc_bin(), shim] {
        let dynamic = dynamic_section(&bin);
        let needed: Vec<&str> = dynamic.lines().filter(|l| l.contains("(NEEDED)")).collect();
        assert!(
            !needed.iter().any(|l| l.contains("libm.so")),
            "{} needs libm: {needed:?} (`nm -D --undefined-only` names the symbol; \
             serve it in src/sys/math.rs)",
            bin.display()
        );
    }
}

/// Where build.rs asks for packed relative relocations (lld, glibc 2.36+ on the
/// build host), the binaries have them: a DT_RELR table and no more than a few
/// hundred RELA entries left (symbol references), instead of ~18,000 relative ones.
#[test]
fn binaries_pack_relative_relocations() {
    if option_env!("SILOC_LINKED_DT_RELR").is_none() {
        eprintln!("skipped: build.rs did not link with -z pack-relative-relocs here");
        return;
    }
    let shim = PathBuf::from(env!("CARGO_BIN_EXE_containerd-shim-siloc-v2"));
    for bin in [siloc_bin(), shim] {
        let dynamic = dynamic_section(&bin);
        assert!(
            dynamic.lines().any(|l| l.contains("(RELR)")),
            "{}: no DT_RELR:\n{dynamic}",
            bin.display()
        );
        let rela_bytes: u64 = dynamic
            .lines()
            .find(|l| l.contains("(RELASZ)"))
            .and_then(|l| l.split_whitespace().nth(2))
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(
            rela_bytes / 24 < 2_000,
            "{}: {} RELA entries left",
            bin.display(),
            rela_bytes / 24
        );
    }
}

/// Where build.rs links libgcc's unwinder and libseccomp in from their archives (lld,
/// the archives found by `cc`), the binaries load neither libgcc_s.so.1 nor
/// libseccomp.so.2: two fewer shared objects to map and bind at every start, and
/// no libgcc_s constructor (its CPUID instructions trap to the hypervisor on a VM).
#[test]
fn binaries_link_the_unwinder_and_libseccomp_in() {
    let Some(linked) = option_env!("SILOC_LINKED_STATIC") else {
        eprintln!("skipped: build.rs linked no archive in here");
        return;
    };
    let shim = PathBuf::from(env!("CARGO_BIN_EXE_containerd-shim-siloc-v2"));
    for bin in [siloc_bin(), shim] {
        let dynamic = dynamic_section(&bin);
        let needed: Vec<&str> = dynamic.lines().filter(|l| l.contains("(NEEDED)")).collect();
        for (archive, shared) in [
            ("libgcc_s.a", "libgcc_s.so"),
            ("libseccomp.a", "libseccomp.so"),
        ] {
            if linked.split(',').any(|l| l == archive) {
                assert!(
                    !needed.iter().any(|l| l.contains(shared)),
                    "{} needs {shared}: {needed:?}",
                    bin.display()
                );
            }
        }
    }
}
