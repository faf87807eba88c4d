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
//! Only where the linker is lld: x86_64-unknown-linux-gnu from Rust 1.90 on links
//! with the bundled rust-lld unless a linker is configured; GNU ld has no such option
//! and gets nothing. Only the `siloc` binary: tests, examples and the shim link as
//! before.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=hack/siloc.order");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    if !linker_is_bundled_lld() {
        return;
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
