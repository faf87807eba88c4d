//! Sizes written by people: `4096`, `512K`, `50M`, `4G`, `1T`.
//!
//! Suffixes are binary (K = 1024 bytes), as in runc/docker `--device-read-bps` and
//! fio's `kb_base=1024` default; an optional trailing `B`/`iB` is accepted (`50MiB`).

/// Errors from [`parse_size`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SizeError {
    #[error("{0:?} is not a size: use a number with an optional K, M, G or T suffix")]
    Syntax(String),
    #[error("{0:?} is too large")]
    Overflow(String),
}

/// Parses a size in bytes. Shapes: digits, optionally followed by K/M/G/T (case-
/// insensitive) and an optional `B` or `iB`. Errors: [`SizeError`].
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let t = text.trim();
    let digits_end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits_end == 0 {
        return Err(SizeError::Syntax(text.to_string()));
    }
    let n: u64 = t[..digits_end]
        .parse()
        .map_err(|_| SizeError::Overflow(text.to_string()))?;
    let suffix = t[digits_end..].to_ascii_lowercase();
    let shift = match suffix.as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(SizeError::Syntax(text.to_string())),
    };
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| SizeError::Overflow(text.to_string()))
}

/// Formats bytes with the largest binary suffix that divides them exactly
/// (`4294967296` → `4G`), so that printed sizes parse back to the same value.
pub fn format_size(bytes: u64) -> String {
    for (shift, s) in [(40, "T"), (30, "G"), (20, "M"), (10, "K")] {
        if bytes >= 1u64 << shift && bytes.is_multiple_of(1u64 << shift) {
            return format!("{}{s}", bytes >> shift);
        }
    }
    bytes.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_suffixes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("512K"), Ok(512 * 1024));
        assert_eq!(parse_size("50m"), Ok(50 << 20));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size(" 1t "), Ok(1 << 40));
    }

    #[test]
    fn rejects_junk_and_overflow() {
        assert!(matches!(parse_size(""), Err(SizeError::Syntax(_))));
        assert!(matches!(parse_size("M"), Err(SizeError::Syntax(_))));
        assert!(matches!(parse_size("5X"), Err(SizeError::Syntax(_))));
        assert!(matches!(parse_size("-5"), Err(SizeError::Syntax(_))));
        assert!(matches!(parse_size("1.5G"), Err(SizeError::Syntax(_))));
        assert!(matches!(
            parse_size("99999999999T"),
            Err(SizeError::Overflow(_))
        ));
    }

    #[test]
    fn format_round_trips() {
        for v in [0, 1, 1000, 1024, 4 << 30, (1 << 20) + 1, 3 << 40] {
            assert_eq!(parse_size(&format_size(v)), Ok(v));
        }
        assert_eq!(format_size(4 << 30), "4G");
    }
}
