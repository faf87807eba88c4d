//! Link order of the `siloc` binary's hot functions (hack/siloc.order).
//!
//! Every siloc command is a short process, and most of its peak RSS is the pages of
//! its own text it faults in: the kernel maps the 64 KB around each file-page fault
//! (mm/memory.c `do_fault_around`, `fault_around_bytes`), so code spread over the
//! 8 MB text maps most of it. lld's `--symbol-ordering-file` puts the functions that
//! `run`, create/start/state/kill/delete/list, `exec`, `--version`, `spec` and
//! `features` enter first, contiguous (hack/symbol-order regenerates the list by uprobes on a
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
//! Two fewer shared objects for the `siloc` and shim binaries: libgcc's unwinder
//! (libgcc_eh.a, for the `_Unwind_*` symbols std references; with panic=abort nothing
//! unwinds, only a backtrace walks the stack) and libseccomp (libseccomp.a) are linked
//! in instead of loading libgcc_s.so.1 and libseccomp.so.2. Each shared object costs
//! every start its mappings, its symbol lookups and, for libgcc_s, a constructor
//! (`__cpu_indicator_init`) whose CPUID instructions trap to the hypervisor on a VM;
//! together about 0.2 ms of CPU and 200 KiB of peak RSS per `run` here
//! (hack/bench-lifecycle-history.md). How: rustc asks for `-lgcc_s` and `-lseccomp`;
//! a directory in OUT_DIR holding `libgcc_s.a` and `libseccomp.a` (symlinks to the
//! archives `cc -print-file-name` finds) comes first in the linker's search path, so
//! those names resolve to the archives. Where an archive is missing (no
//! libseccomp-dev's `.a`), that library stays shared. libseccomp is LGPL-2.1: a
//! binary linked with it statically comes with this crate's source, which relinks it.
//!
//! All only where the linker is lld: x86_64-unknown-linux-gnu from Rust 1.90 on
//! links with the bundled rust-lld unless a linker is configured; GNU ld has no
//! ordering option (and only 2.38+ packs relocations), so it gets neither. The order
//! is for the `siloc` binary only: tests, examples and the shim link as before.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=hack/siloc.order");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    println!("cargo:rerun-if-env-changed=CC");
    if !linker_is_bundled_lld() {
        return;
    }
    if host_glibc_at_least(2, 36) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
        // tests/it/binary_layout.rs checks the binary for it.
        println!("cargo:rustc-env=SILOC_LINKED_DT_RELR=1");
    }
    link_static_archives();
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

/// Puts a directory first in the binaries' library search path that maps `-lgcc_s`
/// to libgcc_eh.a and `-lseccomp` to libseccomp.a (see the file's docs); names
/// whose archive `cc` does not find are left to the system's shared library.
fn link_static_archives() {
    let Some(out) = std::env::var_os("OUT_DIR") else {
        return;
    };
    let dir = std::path::Path::new(&out).join("static-archives");
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let mut linked = Vec::new();
    for (archive, link_name) in [
        ("libgcc_eh.a", "libgcc_s.a"),
        ("libseccomp.a", "libseccomp.a"),
    ] {
        let link = dir.join(link_name);
        let _ = std::fs::remove_file(&link);
        if let Some(path) = archive_path(archive)
            && std::os::unix::fs::symlink(&path, &link).is_ok()
        {
            linked.push(link_name);
        }
    }
    if linked.is_empty() {
        return;
    }
    println!("cargo:rustc-link-arg-bins=-L{}", dir.display());
    // tests/it/binary_layout.rs checks the binaries for it.
    println!("cargo:rustc-env=SILOC_LINKED_STATIC={}", linked.join(","));
}

/// The absolute path of `archive` in the C compiler's library search path (`cc
/// -print-file-name`, which echoes the bare name when it finds nothing).
fn archive_path(archive: &str) -> Option<std::path::PathBuf> {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(cc)
        .arg(format!("-print-file-name={archive}"))
        .output()
        .ok()?;
    let path = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (path.is_absolute() && path.is_file()).then_some(path)
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
