//! Link order of the `siloc` binary's hot functions (hack/siloc.order).
//!
//! Every siloc command is a short process, and most of its peak RSS is the pages of
//! its own text it faults in: the kernel maps the 64 KB around each file-page fault
//! (mm/memory.c `do_fault_around`, `fault_around_bytes`), so code spread over the
//! 8 MB text maps most of it. lld's `--symbol-ordering-file` puts the functions that
//! `run`, create/start/state/kill/delete/list, `--version`, `spec` and `features`
//! enter first, contiguous (hack/symbol-order regenerates the list by uprobes on a
//! release build; README "bench-lifecycle" has the figures). A name the build no
//! longer has is skipped (`--no-warn-symbol-ordering`): a stale list costs RSS,
//! never correctness.
//!
//! Packed relative relocations (DT_RELR, `-z pack-relative-relocs`), for the `siloc`
//! and shim binaries: a PIE's pointers in `.data.rel.ro` and `.data` each need a
//! relative relocation, about 18,000 of them in `siloc`, 24 bytes each in `.rela.dyn`
//! (430 KB, which ld.so reads in full at every start, and every `create`, `run` and
//! `exec` starts twice, see src/sys/exe_guard.rs). DT_RELR encodes them as a bitmap,
//! 8 bytes per 63 pointers (the generic-ABI proposal; glibc 2.36 and lld 15 have
//! it). ld.so still writes the same RELRO pages, so ASLR and RELRO stay as they are.
//! The binary then needs glibc 2.36 or newer at run time (the `GLIBC_ABI_DT_RELR`
//! version, which the linker adds), so it is only used when the build host has it
//! (Debian 12 has 2.36; the build is native, and `hack/vm` runs the host's glibc).
//!
//! Both only where the linker is lld: x86_64-unknown-linux-gnu from Rust 1.90 on
//! links with the bundled rust-lld unless a linker is configured; GNU ld has no
//! ordering option (and only 2.38+ packs relocations), so it gets neither. The order
//! is for the `siloc` binary only: tests, examples and the shim link as before.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=hack/siloc.order");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    if !linker_is_bundled_lld() {
        return;
    }
    if host_glibc_at_least(2, 36) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
        // tests/it/binary_layout.rs checks the binary for it.
        println!("cargo:rustc-env=SILOC_LINKED_DT_RELR=1");
    }
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let order = std::path::Path::new(&dir).join("hack/siloc.order");
    if !order.is_file() {
        return;
    }
    println!(
        "cargo:rustc-link-arg-bin=siloc=-Wl,--symbol-ordering-file={}",
        order.display()
    );
    println!("cargo:rustc-link-arg-bin=siloc=-Wl,--no-warn-symbol-ordering");
}

/// Whether the build host's glibc is `major.minor` or newer, from `getconf
/// GNU_LIBC_VERSION` ("glibc 2.36"); only for a native build (TARGET = HOST), since
/// the binary runs with the glibc of the machine it is built on. Errors count as no.
fn host_glibc_at_least(major: u32, minor: u32) -> bool {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("TARGET") != var("HOST") {
        return false;
    }
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let v = String::from_utf8_lossy(&out.stdout);
    let mut nums = v
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .split('.')
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (ma, mi) = (nums.next().unwrap_or(0), nums.next().unwrap_or(0));
    (ma, mi) >= (major, minor)
}

/// Whether rustc links this target with its bundled rust-lld: the target is
/// x86_64-unknown-linux-gnu, rustc is 1.90 or newer (its default there), and neither
/// a linker (`RUSTC_LINKER`, cargo's `target.<triple>.linker`) nor linker flags in the
/// rustflags override that.
fn linker_is_bundled_lld() -> bool {
    let var = |k: &str| std::env::var(k).unwrap_or_default();
    if var("TARGET") != "x86_64-unknown-linux-gnu" || !var("RUSTC_LINKER").is_empty() {
        return false;
    }
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    if flags.contains("linker") || flags.contains("fuse-ld") {
        return false;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let Ok(out) = Command::new(rustc).arg("-V").output() else {
        return false;
    };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let v = String::from_utf8_lossy(&out.stdout);
    let minor = v
        .split_whitespace()
        .nth(1)
        .and_then(|ver| ver.split('.').nth(1))
        .and_then(|m| m.parse::<u32>().ok());
    matches!(minor, Some(m) if m >= 90)
}
