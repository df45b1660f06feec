//! Keys and values: the seeded generator (SplitMix64), the zipfian and scrambled-zipfian
//! draws, per-thread slices, the key encoding (index as 8 big-endian bytes, padded), the
//! value pool and the load permutation. Pure functions; nothing here touches an engine.

use super::*;

/// SplitMix64: a small, fast, well-mixed generator (and its finalizer as a hash).
#[derive(Clone, Debug)]
pub(super) struct Rng(pub(super) u64);

pub(super) fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Rng {
    pub(super) fn new(seed: u64) -> Rng {
        Rng(mix64(seed ^ 0x5117_db00_5eed_0000))
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix64(self.0)
    }

    /// Uniform in `0..n` (multiply-shift; bias below 2^-64 · n).
    pub(super) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    pub(super) fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// YCSB's Zipfian generator (Gray et al.), item 0 the most popular; callers scramble the
/// rank so hot keys are spread over the key space.
#[derive(Debug)]
pub(super) struct Zipf {
    pub(super) n: u64,
    pub(super) theta: f64,
    pub(super) alpha: f64,
    pub(super) zetan: f64,
    pub(super) eta: f64,
}

impl Zipf {
    pub(super) fn new(n: u64, theta: f64) -> Zipf {
        let zetan: f64 = (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum();
        let zeta2 = 1.0 + 0.5f64.powf(theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan);
        Zipf {
            n,
            theta,
            alpha,
            zetan,
            eta,
        }
    }

    pub(super) fn rank(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 || self.n <= 1 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let r = self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha);
        (r as u64).min(self.n - 1)
    }
}

/// One worker's stream of key indexes.
pub(super) enum KeyGen {
    /// `lo, lo+1, …` wrapping within `lo..lo+len`.
    Seq {
        lo: u64,
        len: u64,
        i: u64,
    },
    Uniform {
        rng: Rng,
        n: u64,
    },
    Zipf {
        rng: Rng,
        z: Arc<Zipf>,
    },
    /// Positions `lo, lo+1, …` (wrapping within `lo..lo+len`) of a permutation.
    Perm {
        perm: Perm,
        lo: u64,
        len: u64,
        i: u64,
    },
}

impl KeyGen {
    pub(super) fn next(&mut self) -> u64 {
        match self {
            KeyGen::Seq { lo, len, i } => {
                let k = *lo + *i % *len;
                *i += 1;
                k
            }
            KeyGen::Uniform { rng, n } => rng.below(*n),
            KeyGen::Zipf { rng, z } => scrambled(z, rng),
            KeyGen::Perm { perm, lo, len, i } => {
                let k = perm.at(*lo + *i % *len);
                *i += 1;
                k
            }
        }
    }
}

/// A scrambled zipfian draw (YCSB's `ScrambledZipfianGenerator`): the rank hashed over
/// the key space, so hot keys are spread out.
pub(super) fn scrambled(z: &Zipf, rng: &mut Rng) -> u64 {
    mix64(z.rank(rng.unit()) ^ 0x2545_f491_4f6c_dd1d) % z.n
}

/// The slice `lo..hi` of `0..num` that thread `t` of `threads` owns.
pub(super) fn slice(num: u64, threads: usize, t: usize) -> (u64, u64) {
    let n = threads as u64;
    let t = t as u64;
    let lo = (u128::from(num) * u128::from(t) / u128::from(n)) as u64;
    let hi = (u128::from(num) * u128::from(t + 1) / u128::from(n)) as u64;
    (lo, hi)
}

/// Writes key `idx` into `out` (`out.len()` = key bytes).
pub(super) fn make_key(idx: u64, out: &mut [u8]) {
    let be = idx.to_be_bytes();
    if out.len() >= 8 {
        out[..8].copy_from_slice(&be);
        out[8..].fill(b'0');
    } else {
        let n = out.len();
        out.copy_from_slice(&be[8 - n..]);
    }
}

pub(super) fn key(idx: u64, key_bytes: usize) -> Vec<u8> {
    let mut k = vec![0; key_bytes];
    make_key(idx, &mut k);
    k
}

pub(super) const VALUE_POOL: usize = 1 << 20;

/// Values: slices of a pseudo-random 1 MiB buffer, at a position picked by the key.
pub(super) struct Values {
    pub(super) buf: Vec<u8>,
    pub(super) len: usize,
}

impl Values {
    pub(super) fn new(seed: u64, len: usize) -> Values {
        let mut rng = Rng::new(seed ^ 0x7a1e);
        let mut buf = Vec::with_capacity(VALUE_POOL + len + 8);
        while buf.len() < VALUE_POOL + len {
            buf.extend_from_slice(&rng.next_u64().to_le_bytes());
        }
        Values { buf, len }
    }

    pub(super) fn get(&self, idx: u64, salt: u64) -> &[u8] {
        let off = (mix64(idx ^ salt.rotate_left(32)) % VALUE_POOL as u64) as usize;
        &self.buf[off..off + self.len]
    }
}

/// A full permutation of `0..num` (a stride walk, the stride coprime to num): every key
/// once, in an order spread over the key space.
#[derive(Clone, Copy, Debug)]
pub(super) struct Perm {
    pub(super) num: u64,
    pub(super) stride: u64,
    pub(super) off: u64,
}

impl Perm {
    pub(super) fn new(num: u64, seed: u64) -> Perm {
        fn gcd(a: u64, b: u64) -> u64 {
            if b == 0 {
                a
            } else {
                gcd(b, a % b)
            }
        }
        let mut stride = ((num as f64) * 0.618_033_988_75) as u64 | 1;
        while num > 1 && gcd(stride % num, num) != 1 {
            stride += 1;
        }
        let off = if num > 0 { mix64(seed) % num } else { 0 };
        Perm { num, stride, off }
    }

    /// The `i`-th key (`i < num`).
    pub(super) fn at(&self, i: u64) -> u64 {
        ((u128::from(i) * u128::from(self.stride) + u128::from(self.off)) % u128::from(self.num))
            as u64
    }
}

/// [`Perm`] as an iterator, for random preloads.
pub(super) fn permutation(num: u64, seed: u64) -> impl Iterator<Item = u64> {
    let p = Perm::new(num, seed);
    (0..num).map(move |i| p.at(i))
}
