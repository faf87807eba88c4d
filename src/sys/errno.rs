//! Errno texts as runc prints them.
//!
//! runc is written in Go, whose `syscall.Errno` strings are the C library's strerror(3)
//! texts with a lowercase first letter ("no such file or directory"); clients that
//! match runc's messages match those words, not Rust's "No such file or directory
//! (os error 2)".

/// `e`'s text as Go prints it: the C library's strerror(3) text (through std, which
/// asks strerror_r; nix's own table words some differently, ERANGE "Math result not
/// representable") with a lowercase first letter.
pub(crate) fn go_text(e: nix::Error) -> String {
    let text = std::io::Error::from_raw_os_error(e as i32).to_string();
    let d = text
        .rsplit_once(" (os error ")
        .map_or(text.as_str(), |(d, _)| d);
    let mut c = d.chars();
    c.next()
        .map(|f| f.to_lowercase().chain(c).collect())
        .unwrap_or_default()
}

/// An I/O error's text as Go prints it: [`go_text`] of its errno, or the error's own
/// text when it carries none.
pub(crate) fn go_io_text(e: &std::io::Error) -> String {
    e.raw_os_error()
        .map(|n| go_text(nix::Error::from_raw(n)))
        .unwrap_or_else(|| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowercase_first_letter_only() {
        assert_eq!(go_text(nix::Error::ENOENT), "no such file or directory");
        assert_eq!(go_text(nix::Error::ERANGE), "numerical result out of range");
        let io = std::io::Error::from_raw_os_error(libc::EROFS);
        assert_eq!(go_io_text(&io), "read-only file system");
        let plain = std::io::Error::other("odd");
        assert_eq!(go_io_text(&plain), "odd");
    }
}
