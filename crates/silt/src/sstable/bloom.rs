//! The bloom filter of a table: one filter over all the table's distinct USER keys, so a
//! point read can skip a table without touching its index or data
//! (`docs/format/sstable.md`, "Filter block").
//!
//! ```text
//! filter = bit array (m bytes, m*8 bits) | k u8
//! ```
//!
//! A key's probes are `h + i*delta mod m*8` for `i in 0..k`, with `h` the xxh3-64 of the
//! user key and `delta = rotr(h, 33) | 1` (double hashing, one hash per key).
//! `k = round(bits_per_key * ln 2)` clamped to `1..=30`.
//!
//! The reader never rejects a filter: an empty filter or a `k` it does not know (0 or
//! over 30, reserved for other encodings) answers "may contain" for every key, which is
//! always correct. The block's checksum is what detects damage.

use xxhash_rust::xxh3::xxh3_64;

/// The largest `k` the reader understands.
const MAX_PROBES: u8 = 30;

/// The hash a filter stores for a user key.
#[inline]
pub(crate) fn bloom_hash(user_key: &[u8]) -> u64 {
    xxh3_64(user_key)
}

/// Collects key hashes and builds the filter at the end.
#[derive(Debug, Default)]
pub(crate) struct BloomBuilder {
    bits_per_key: u32,
    hashes: Vec<u64>,
}

impl BloomBuilder {
    /// A builder for `bits_per_key` bits per distinct key (0: no filter).
    pub(crate) fn new(bits_per_key: u32) -> BloomBuilder {
        BloomBuilder {
            bits_per_key,
            hashes: Vec::new(),
        }
    }

    /// Whether the builder makes a filter at all.
    pub(crate) fn enabled(&self) -> bool {
        self.bits_per_key > 0
    }

    /// Adds a user key's hash. The caller adds each distinct user key once.
    pub(crate) fn add_hash(&mut self, h: u64) {
        if self.enabled() {
            self.hashes.push(h);
        }
    }

    /// Bytes the filter would take now.
    pub(crate) fn estimated_size_bytes(&self) -> usize {
        if !self.enabled() {
            return 0;
        }
        (self.hashes.len() * self.bits_per_key as usize).div_ceil(8) + 1
    }

    /// The encoded filter, or `None` if disabled or empty.
    pub(crate) fn finish(&self) -> Option<Vec<u8>> {
        if !self.enabled() || self.hashes.is_empty() {
            return None;
        }
        let bits_per_key = self.bits_per_key.min(1000) as usize;
        let k = ((bits_per_key as f64 * std::f64::consts::LN_2).round() as u8).clamp(1, MAX_PROBES);
        let nbits = (self.hashes.len() * bits_per_key).max(64);
        let nbytes = nbits.div_ceil(8);
        let nbits = nbytes as u64 * 8;
        let mut out = vec![0u8; nbytes + 1];
        for &h in &self.hashes {
            let mut h = h;
            let delta = h.rotate_right(33) | 1;
            for _ in 0..k {
                let bit = h % nbits;
                out[(bit / 8) as usize] |= 1 << (bit % 8);
                h = h.wrapping_add(delta);
            }
        }
        out[nbytes] = k;
        Some(out)
    }
}

/// A filter read from a table.
#[derive(Debug, Clone)]
pub(crate) struct Bloom {
    data: Vec<u8>,
}

impl Bloom {
    /// Wraps filter bytes; any bytes are accepted (see the module docs).
    pub(crate) fn new(data: Vec<u8>) -> Bloom {
        Bloom { data }
    }

    /// Whether the key with this hash may be in the set (false means it is not).
    pub(crate) fn may_contain_hash(&self, h: u64) -> bool {
        let Some((&k, bits)) = self.data.split_last() else {
            return true;
        };
        if k == 0 || k > MAX_PROBES || bits.is_empty() {
            return true;
        }
        let nbits = bits.len() as u64 * 8;
        let mut h = h;
        let delta = h.rotate_right(33) | 1;
        for _ in 0..k {
            let bit = h % nbits;
            if bits[(bit / 8) as usize] & (1 << (bit % 8)) == 0 {
                return false;
            }
            h = h.wrapping_add(delta);
        }
        true
    }

    /// Whether `user_key` may be in the set.
    pub(crate) fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(bloom_hash(user_key))
    }

    /// Bytes held.
    pub(crate) fn size_bytes(&self) -> usize {
        self.data.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(n: usize, bits: u32) -> Option<Vec<u8>> {
        let mut b = BloomBuilder::new(bits);
        for i in 0..n {
            b.add_hash(bloom_hash(format!("key{i}").as_bytes()));
        }
        b.finish()
    }

    #[test]
    fn no_false_negatives_and_few_false_positives() {
        for n in [1usize, 10, 1000, 20_000] {
            let f = Bloom::new(build(n, 10).unwrap());
            for i in 0..n {
                assert!(f.may_contain(format!("key{i}").as_bytes()));
            }
            let fp = (0..10_000)
                .filter(|i| f.may_contain(format!("other{i}").as_bytes()))
                .count();
            // 10 bits per key gives about 1%; allow slack for small filters.
            assert!(fp < 300, "n={n}: {fp} false positives in 10000");
        }
    }

    #[test]
    fn disabled_and_empty() {
        assert!(build(100, 0).is_none());
        assert!(build(0, 10).is_none());
        assert_eq!(BloomBuilder::new(0).estimated_size_bytes(), 0);
    }

    #[test]
    fn garbage_filters_answer_without_panicking() {
        for data in [
            vec![],
            vec![7],
            vec![0, 0, 0, 0],
            vec![0xFF, 31],
            vec![0, 0, 0, 0, 5],
        ] {
            let f = Bloom::new(data.clone());
            let _ = f.may_contain(b"x");
            if data.is_empty()
                || matches!(data.last(), Some(&k) if k == 0 || k > 30)
                || data.len() == 1
            {
                assert!(f.may_contain(b"x"));
            }
        }
        // All-zero bits with a valid k: nothing is in the set.
        assert!(!Bloom::new(vec![0, 0, 0, 0, 5]).may_contain(b"x"));
    }
}
