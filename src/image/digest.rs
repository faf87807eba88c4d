//! sha256 digests as OCI writes them (`sha256:<64 lowercase hex>`, image-spec
//! `descriptor.md` "Digests"), and a reader that hashes and counts what passes through.

use std::io::Read;

use sha2::{Digest as _, Sha256};

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(DIGITS[usize::from(b >> 4)] as char);
        s.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    s
}

/// The hex part of a `sha256:<hex>` digest, `None` for another algorithm or a
/// malformed value (siloc's store keys layers by sha256 only).
pub fn sha256_hex(digest: &str) -> Option<&str> {
    let h = digest.strip_prefix("sha256:")?;
    (h.len() == 64
        && h.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
    .then_some(h)
}

/// The sha256 of `data` as hex.
pub fn sha256_of(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// Hashes (sha256) and counts the bytes read through it.
pub struct HashReader<R> {
    inner: R,
    hasher: Sha256,
    bytes: u64,
    on_read: Option<Box<dyn FnMut(u64) + Send>>,
}

impl<R: Read> HashReader<R> {
    pub fn new(inner: R) -> Self {
        HashReader {
            inner,
            hasher: Sha256::new(),
            bytes: 0,
            on_read: None,
        }
    }

    /// Calls `f(n)` after each read of `n` bytes (progress reporting).
    pub fn with_progress(mut self, f: impl FnMut(u64) + Send + 'static) -> Self {
        self.on_read = Some(Box::new(f));
        self
    }

    /// Reads the rest of the stream (so the digest covers all of it); returns how
    /// many bytes that was.
    pub fn drain(&mut self) -> std::io::Result<u64> {
        std::io::copy(self, &mut std::io::sink())
    }

    /// The hex digest and byte count of everything read so far, and the inner reader.
    pub fn finish(self) -> (String, u64, R) {
        (hex(&self.hasher.finalize()), self.bytes, self.inner)
    }
}

impl<R: Read> Read for HashReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        if let Some(f) = self.on_read.as_mut() {
            f(n as u64);
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_what_it_reads_and_the_drained_rest() {
        let mut r = HashReader::new(&b"hello world"[..]);
        let mut five = [0u8; 5];
        r.read_exact(&mut five).unwrap();
        assert_eq!(r.drain().unwrap(), 6);
        let (h, n, _) = r.finish();
        assert_eq!(n, 11);
        assert_eq!(
            h,
            "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9"
        );
        assert_eq!(h, sha256_of(b"hello world"));
    }

    #[test]
    fn only_well_formed_sha256_digests() {
        let h = "b94d27b9934d3e08a52e52d7da7dabfac484efe37a5380ee9088f7ace2efcde9";
        assert_eq!(sha256_hex(&format!("sha256:{h}")), Some(h));
        assert_eq!(sha256_hex(&format!("sha512:{h}")), None);
        assert_eq!(sha256_hex("sha256:ABC"), None);
        assert_eq!(sha256_hex(&format!("sha256:{}", h.to_uppercase())), None);
    }
}
