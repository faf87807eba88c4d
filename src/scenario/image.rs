//! The scenario image: a rootfs siloc builds locally from the host's fio, the shared
//! libraries it links (as `ldd` lists them) and a static busybox (Debian's
//! busybox-static) for the neighbours' `dd` loops. No registry, no network.
//!
//! Built once under `<data_root>/scenario/image` and reused while the inputs (paths,
//! sizes, mtimes) stay the same; a build goes to a temporary directory first and is
//! renamed into place, so a crash never leaves a half image in use.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Errors building the image; each names the file or command at fault.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("{tool} not found on PATH: {hint}")]
    Missing { tool: String, hint: String },
    #[error(
        "{path} is not statically linked: the neighbours need a static busybox (apt-get install busybox-static)"
    )]
    NotStatic { path: PathBuf },
    #[error("ldd {path}: {msg}")]
    Ldd { path: PathBuf, msg: String },
    #[error(transparent)]
    Io(#[from] crate::sys::fs::IoAt),
}

/// Looks `name` up on PATH (or takes it as is when it has a `/`).
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return p.is_file().then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0))
}

/// The libraries in `ldd` output: absolute paths, the loader included, vdso skipped.
/// Errors: a library ldd could not find.
pub fn parse_ldd(text: &str) -> Result<Vec<PathBuf>, String> {
    let mut libs = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.contains("not found") {
            return Err(format!("missing library: {line}"));
        }
        let path = match line.split_once("=>") {
            Some((_, rhs)) => rhs.split_whitespace().next().unwrap_or(""),
            None => line.split_whitespace().next().unwrap_or(""),
        };
        if path.starts_with('/') && !libs.iter().any(|p: &PathBuf| p == Path::new(path)) {
            libs.push(PathBuf::from(path));
        }
    }
    Ok(libs)
}

/// A built image: its rootfs, to be used read-only by every container of a run.
#[derive(Debug, Clone)]
pub struct Image {
    pub rootfs: PathBuf,
}

/// Returns the image under `dir`, building it from `fio` and `busybox` when it is
/// missing or its inputs changed.
pub fn ensure(dir: &Path, fio: &Path, busybox: &Path) -> Result<Image, ImageError> {
    let libs = shared_libraries(fio)?;
    if !is_static(busybox) {
        return Err(ImageError::NotStatic {
            path: busybox.to_path_buf(),
        });
    }
    let mut inputs = vec![fio.to_path_buf(), busybox.to_path_buf()];
    inputs.extend(libs.iter().cloned());
    let stamp = stamp(&inputs)?;
    let rootfs = dir.join("rootfs");
    let stamp_file = dir.join("inputs");
    if rootfs.is_dir() && std::fs::read_to_string(&stamp_file).ok().as_deref() == Some(&stamp) {
        return real(rootfs);
    }
    std::fs::create_dir_all(dir).map_err(crate::sys::fs::io_at(dir))?;
    // Leftovers of builds that crashed.
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.file_name().to_string_lossy().starts_with("rootfs.tmp-") {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
    let tmp = dir.join(format!("rootfs.tmp-{}", std::process::id()));
    let built = build(&tmp, fio, busybox, &libs);
    if let Err(e) = built {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    let _ = std::fs::remove_file(&stamp_file);
    if rootfs.exists() {
        std::fs::remove_dir_all(&rootfs).map_err(crate::sys::fs::io_at(&rootfs))?;
    }
    std::fs::rename(&tmp, &rootfs).map_err(crate::sys::fs::io_at(&rootfs))?;
    std::fs::write(&stamp_file, &stamp).map_err(crate::sys::fs::io_at(&stamp_file))?;
    real(rootfs)
}

/// The image at its real path: a container's root.path must have no symlink on the
/// way (lifecycle::root_path), and the data root may sit under one (`/var/lib` moved
/// to another disk).
fn real(rootfs: PathBuf) -> Result<Image, ImageError> {
    let rootfs = std::fs::canonicalize(&rootfs).map_err(crate::sys::fs::io_at(&rootfs))?;
    Ok(Image { rootfs })
}

/// Whether `path` is an ELF without a program interpreter (static).
fn is_static(path: &Path) -> bool {
    matches!(interpreter(path), Ok(None))
}

/// The shared libraries `exe` links, the loader included, as `ldd` lists them. Asks
/// the program interpreter itself (`<PT_INTERP> --list EXE`, which is all `ldd` does),
/// so no `ldd` (a bash script in libc-bin) is needed, e.g. in the VM suite's guest.
pub fn shared_libraries(exe: &Path) -> Result<Vec<PathBuf>, ImageError> {
    let err = |msg: String| ImageError::Ldd {
        path: exe.to_path_buf(),
        msg,
    };
    let Some(interp) = interpreter(exe).map_err(|e| err(e.to_string()))? else {
        return Ok(Vec::new());
    };
    let out = Command::new(&interp)
        .arg("--list")
        .arg(exe)
        .output()
        .map_err(|e| err(format!("{}: {e}", interp.display())))?;
    if !out.status.success() {
        return Err(err(String::from_utf8_lossy(&out.stderr).trim().to_string()));
    }
    parse_ldd(&String::from_utf8_lossy(&out.stdout)).map_err(err)
}

/// The ELF program interpreter of `path` (PT_INTERP, elf(5)), `None` for a static
/// executable. Understands 64-bit little-endian ELF, what Debian amd64 ships.
/// Errors: not readable, or not such an ELF file.
pub fn interpreter(path: &Path) -> std::io::Result<Option<PathBuf>> {
    let bad = |what: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string());
    let data = std::fs::read(path)?;
    let u16_at = |o: usize| data.get(o..o + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u32_at = |o: usize| {
        data.get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let u64_at = |o: usize| {
        data.get(o..o + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_le_bytes)
    };
    if data.get(..4) != Some(b"\x7fELF") || data.get(4) != Some(&2) || data.get(5) != Some(&1) {
        return Err(bad("not a 64-bit little-endian ELF file"));
    }
    let phoff = u64_at(0x20).ok_or_else(|| bad("short ELF header"))? as usize;
    let phentsize = usize::from(u16_at(0x36).ok_or_else(|| bad("short ELF header"))?);
    let phnum = usize::from(u16_at(0x38).ok_or_else(|| bad("short ELF header"))?);
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        const PT_INTERP: u32 = 3;
        if u32_at(ph) != Some(PT_INTERP) {
            continue;
        }
        let off = u64_at(ph + 8).ok_or_else(|| bad("short program header"))? as usize;
        let len = u64_at(ph + 32).ok_or_else(|| bad("short program header"))? as usize;
        let raw = data
            .get(off..off + len)
            .ok_or_else(|| bad("PT_INTERP past the end"))?;
        let text = raw.split(|&b| b == 0).next().unwrap_or_default();
        return Ok(Some(PathBuf::from(
            String::from_utf8_lossy(text).into_owned(),
        )));
    }
    Ok(None)
}

/// What identifies the inputs: each path with its size and mtime.
fn stamp(inputs: &[PathBuf]) -> Result<String, ImageError> {
    let mut s = String::new();
    for p in inputs {
        let m = std::fs::metadata(p).map_err(crate::sys::fs::io_at(p))?;
        s.push_str(&format!("{} {} {}\n", p.display(), m.size(), m.mtime()));
    }
    Ok(s)
}

fn build(root: &Path, fio: &Path, busybox: &Path, libs: &[PathBuf]) -> Result<(), ImageError> {
    for d in [
        "bin", "usr/bin", "proc", "sys", "dev", "tmp", "etc", "root", "work",
    ] {
        let p = root.join(d);
        std::fs::create_dir_all(&p).map_err(crate::sys::fs::io_at(&p))?;
    }
    copy(fio, &root.join("usr/bin/fio"))?;
    copy(busybox, &root.join("bin/busybox"))?;
    for lib in libs {
        copy(lib, &root.join(lib.strip_prefix("/").unwrap_or(lib)))?;
    }
    for applet in [
        "sh", "dd", "sleep", "rm", "sync", "cat", "true", "ls", "echo",
    ] {
        let link = root.join("bin").join(applet);
        std::os::unix::fs::symlink("busybox", &link).map_err(crate::sys::fs::io_at(&link))?;
    }
    let passwd = root.join("etc/passwd");
    std::fs::write(&passwd, "root:x:0:0:root:/root:/bin/sh\n")
        .map_err(crate::sys::fs::io_at(&passwd))?;
    let group = root.join("etc/group");
    std::fs::write(&group, "root:x:0:\n").map_err(crate::sys::fs::io_at(&group))?;
    Ok(())
}

/// Copies the file behind `from` (symlinks followed) to `to`, keeping its mode.
fn copy(from: &Path, to: &Path) -> Result<(), ImageError> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(crate::sys::fs::io_at(parent))?;
    }
    std::fs::copy(from, to).map_err(crate::sys::fs::io_at(from))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interpreter_of_static_and_dynamic_binaries() {
        // busybox-static has no PT_INTERP; /bin/sh (dash) names the glibc loader.
        if std::path::Path::new("/bin/busybox").exists() {
            assert_eq!(interpreter(Path::new("/bin/busybox")).unwrap(), None);
        }
        let sh = interpreter(Path::new("/bin/sh")).unwrap().unwrap();
        assert!(sh.to_string_lossy().contains("ld-linux"), "{sh:?}");
        let libs = shared_libraries(Path::new("/bin/sh")).unwrap();
        assert!(
            libs.iter().any(|l| l.to_string_lossy().contains("libc.so")),
            "{libs:?}"
        );
        assert!(interpreter(Path::new("/etc/passwd")).is_err());
    }

    #[test]
    fn ldd_output_lists_libraries_and_loader() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\
                    \tlibaio.so.1 => /lib/x86_64-linux-gnu/libaio.so.1 (0x00007f8a)\n\
                    \tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f8b)\n\
                    \t/lib64/ld-linux-x86-64.so.2 (0x00007f8c)\n";
        let libs = parse_ldd(text).unwrap();
        assert_eq!(
            libs,
            vec![
                PathBuf::from("/lib/x86_64-linux-gnu/libaio.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2"),
            ]
        );
        let e = parse_ldd("\tlibfoo.so => not found\n").unwrap_err();
        assert!(e.contains("libfoo"));
    }

    #[test]
    fn which_finds_executables_only() {
        assert!(which("sh").is_some());
        assert!(which("no-such-tool-siloc").is_none());
        assert_eq!(which("/bin/sh"), Some(PathBuf::from("/bin/sh")));
    }
}
