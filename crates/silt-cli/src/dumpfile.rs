//! The `dump` / `load` line format (`docs/format/dump.md`): a header line, then one
//! `cf<TAB>key<TAB>value` line per entry, each field hex.
//!
//! Invariant: `parse_line(&line(cf, k, v)) == Some((cf, k, v))` for all byte strings.

use crate::codec::{hex, unhex};

/// The first line of a dump.
pub const HEADER: &str = "silt-dump 1";

/// One entry as a line (without the newline).
pub fn line(cf: &str, key: &[u8], value: &[u8]) -> String {
    format!("{}\t{}\t{}", hex(cf.as_bytes()), hex(key), hex(value))
}

/// What a line of a dump holds.
pub enum Line {
    /// Nothing (empty or a comment).
    Skip,
    /// An entry: column family, key, value.
    Entry(String, Vec<u8>, Vec<u8>),
}

/// Parses one line (without its newline).
pub fn parse_line(l: &str) -> Result<Line, String> {
    if l.is_empty() || l.starts_with('#') {
        return Ok(Line::Skip);
    }
    let f: Vec<&str> = l.split('\t').collect();
    let [cf, k, v] = f.as_slice() else {
        return Err(format!(
            "expected 3 tab-separated fields, found {}",
            f.len()
        ));
    };
    let cf = String::from_utf8(unhex(cf)?).map_err(|_| "column family is not UTF-8")?;
    Ok(Line::Entry(cf, unhex(k)?, unhex(v)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        let key: Vec<u8> = (0..=255).collect();
        let l = line("users\tx", &key, b"");
        let Line::Entry(cf, k, v) = parse_line(&l).unwrap() else {
            panic!()
        };
        assert_eq!((cf.as_str(), k, v), ("users\tx", key, vec![]));
        assert!(parse_line("aa\tbb").is_err());
        assert!(matches!(parse_line("# note").unwrap(), Line::Skip));
    }
}
