//! How keys and values are written on the command line and printed: raw UTF-8 (the
//! default for input), `--hex`, or `--escaped` (C-style escapes, as RocksDB's `ldb`), and
//! `--utf8` for output that is lossy UTF-8. Output defaults to escaped, so any byte string
//! prints on one line and can be pasted back with `--escaped`.
//!
//! Invariant: for every byte string `b`, `parse(Escaped, show(Escaped, b)) == b` and
//! `parse(Hex, show(Hex, b)) == b`.

/// A key/value notation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// Input as typed (UTF-8 bytes); output escaped.
    Default,
    /// Hex digits, two per byte (input may start with `0x`).
    Hex,
    /// C-style: `\n`, `\t`, `\r`, `\0`, `\\`, `\"`, `\xNN`; other bytes as themselves.
    Escaped,
    /// UTF-8: input as typed; output lossy UTF-8 (invalid bytes as U+FFFD).
    Utf8,
}

impl Codec {
    /// The bytes `s` stands for.
    pub fn parse(self, s: &str) -> Result<Vec<u8>, String> {
        match self {
            Codec::Default | Codec::Utf8 => Ok(s.as_bytes().to_vec()),
            Codec::Hex => unhex(s),
            Codec::Escaped => unescape(s),
        }
    }

    /// `b` written in this notation.
    pub fn show(self, b: &[u8]) -> String {
        match self {
            Codec::Hex => hex(b),
            Codec::Utf8 => String::from_utf8_lossy(b).into_owned(),
            Codec::Default | Codec::Escaped => escape(b),
        }
    }
}

/// Lower-case hex, two digits per byte.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The bytes of a hex string (an optional `0x`, then pairs of digits).
pub fn unhex(s: &str) -> Result<Vec<u8>, String> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.len() % 2 != 0 {
        return Err(format!("hex {s:?} has an odd number of digits"));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|_| format!("{s:?} is not hex")))
        .collect()
}

/// C-style escapes: printable ASCII as itself (but `\` and `"`), the rest escaped.
pub fn escape(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\r' => out.push_str("\\r"),
            0 => out.push_str("\\0"),
            0x20..=0x7e => out.push(c as char),
            _ => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out
}

/// The bytes of a C-style escaped string.
pub fn unescape(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        let Some(&e) = b.get(i + 1) else {
            return Err(format!("{s:?} ends with a lone backslash"));
        };
        i += 2;
        out.push(match e {
            b'\\' => b'\\',
            b'"' => b'"',
            b'\'' => b'\'',
            b'n' => b'\n',
            b't' => b'\t',
            b'r' => b'\r',
            b'0' => 0,
            b'x' => {
                let h = s
                    .get(i..i + 2)
                    .ok_or_else(|| format!("{s:?}: \\x needs two hex digits"))?;
                i += 2;
                u8::from_str_radix(h, 16).map_err(|_| format!("{s:?}: \\x{h} is not hex"))?
            }
            other => return Err(format!("{s:?}: unknown escape \\{}", other as char)),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_byte() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(unescape(&escape(&all)).unwrap(), all);
        assert_eq!(unhex(&hex(&all)).unwrap(), all);
        assert_eq!(unescape(r"a\x00\n\\").unwrap(), b"a\0\n\\");
        assert!(unescape(r"\q").is_err());
        assert!(unescape("\\").is_err());
        assert!(unhex("abc").is_err());
        assert!(unhex("zz").is_err());
    }
}
