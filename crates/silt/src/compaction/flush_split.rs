//! Where a flush cuts a family's entries into tables, and which level each table goes to.
//!
//! A flush writes one family's entries of a memtable in key order. It ends a table and
//! starts the next where two things hold:
//!
//! - consecutive user keys lie far apart compared with every distance since the table began
//!   (a *gap*, [`GapDetector`]): two writers each loading their own key range leave one
//!   between their ranges, which a single table would span;
//! - the table so far overlaps no table at any level, so it can go below level 0
//!   ([`flush_level`]) and the cut buys something.
//!
//! When the flush records the tables of a family it cut, each one that overlaps no table at
//! any level, and nothing a running compaction may write at or above the base level, goes
//! straight to the base level (as LevelDB's `PickLevelForMemTableOutput`, with the cuts
//! that make it apply to several writers); the others go to level 0, as does a family's
//! table that was not cut. Why not that one too: a single writer's sequential tables move
//! down from level 0 by a manifest edit already, and placing the one table of a random
//! load's first flush (into an empty tree) only made the last level outgrow the base level
//! one flush earlier (5M-key `random_delete`: 1.15 times the compaction bytes, 0.63–0.86
//! times as fast in two pairs).
//!
//! Why: two writers loading their own ranges flushed tables that each spanned both ranges,
//! so consecutive level-0 tables overlapped, could not move down, and every level-0
//! compaction rewrote them: a 5M-key sequential load wrote its data a third time (write
//! amplification 2.9 from the engine's own counters, against ~2 for log + flush).
//!
//! Safety: a table placed at the base level holds no key that any table holds (checked
//! against the current version under the state lock), so version invariants 1 and 2 hold
//! of it trivially; what a running compaction writes below base later is older than the
//! memtable, so it may lie below the table. A compaction running into a level at or above
//! base may write anywhere in the user-key hull of its tables (its outputs span the gaps
//! between them); no table is placed in such a hull (`JobSpan`), and the placement happens
//! under the busy lock, so no job is picked meanwhile from the version without it.

use std::collections::HashSet;

use super::picker::{key_range, targets};
use super::{Job, Shape};
use crate::version::Version;

/// A gap is this many times the largest distance between consecutive keys since the table
/// began. Keys that count up in binary make 1. Keys that count in ASCII decimal make up to
/// 256: each carry is 256 times the carry into the digit below it (`0x313030 - 0x303939`
/// against `0x3130 - 0x3039`), and a table has seen that one before the next (after
/// [`GAP_MIN_SEEN`] distances, the carry into the tens). Uniformly random keys make ~10
/// (exponential spacing). So decimal keys are cut only where the next writer's range is a few
/// units of the next digit up or more away (a gap missed costs what it did before this), and
/// also where a table crosses a carry two digits above any it saw (a table boundary more).
pub(crate) const GAP_RATIO: f64 = 1024.0;

/// Distances a table must have seen before one can end it: a ratio over two or three
/// spacings says nothing.
pub(crate) const GAP_MIN_SEEN: usize = 16;

/// A table is cut at a gap only once it holds this share of `table_target_bytes`, so no
/// flush makes a heap of tiny tables of a finely divided key space.
pub(crate) const MIN_PIECE_DIVISOR: u64 = 64;

/// The distance between user keys `a < b` as a fraction of the key space: the eight bytes
/// after their common prefix as a big-endian number, scaled by 256 to the minus the prefix's
/// length. Keys that count up by one in binary are equally far apart at any prefix length;
/// only ratios between distances matter.
pub(crate) fn key_distance(a: &[u8], b: &[u8]) -> f64 {
    let d = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let word = |k: &[u8]| {
        let mut w = [0u8; 8];
        let s = k.get(d..).unwrap_or_default();
        let n = s.len().min(8);
        w[..n].copy_from_slice(&s[..n]);
        u64::from_be_bytes(w)
    };
    // `b > a` at their first differing byte (or `a` is a prefix of `b`).
    let diff = word(b).saturating_sub(word(a));
    // 2^(-8d): subnormal past a 127-byte prefix, 0 past ~134, so keys sharing a prefix
    // that long are never cut (a gap missed).
    let scale = 2f64.powi(-8 * i32::try_from(d).unwrap_or(i32::MAX / 8));
    diff as f64 * scale
}

/// Tells gaps in a stream of ascending user keys (see the module above).
#[derive(Debug, Default)]
pub(crate) struct GapDetector {
    /// The largest distance seen since the table began.
    max: f64,
    /// How many distances were seen since the table began.
    seen: usize,
}

impl GapDetector {
    /// A new table begins: what counts as ordinary starts afresh.
    pub(crate) fn restart(&mut self) {
        self.max = 0.0;
        self.seen = 0;
    }

    /// Takes the distance between consecutive user keys `a < b`; returns whether it is a
    /// gap. Either way it counts from now on (the caller restarts the detector where it
    /// cuts): a table that goes on past a gap then takes that spacing as ordinary, rather
    /// than end at an arbitrary later key of a sparser stretch.
    pub(crate) fn is_gap(&mut self, a: &[u8], b: &[u8]) -> bool {
        let g = key_distance(a, b);
        let gap = self.seen >= GAP_MIN_SEEN && self.max > 0.0 && g > GAP_RATIO * self.max;
        self.max = self.max.max(g);
        self.seen += 1;
        gap
    }
}

/// Where a running compaction may write: its family, output level, and the user-key hull
/// of all its tables (its outputs lie inside it). Keyed by the job's first table id, unique
/// among running jobs since their tables are disjoint.
#[derive(Clone, Debug)]
pub(crate) struct JobSpan {
    pub(crate) key: u64,
    pub(crate) cf: u32,
    pub(crate) output_level: usize,
    pub(crate) lo: Vec<u8>,
    pub(crate) hi: Vec<u8>,
}

/// The compactions running: the tables they read, which no other job may take, and where
/// they may write, where no flush places a table ([`flush_level`]). Guarded by one lock
/// (`DbInner::busy`), taken after the state lock where both are held.
#[derive(Debug, Default)]
pub(crate) struct Busy {
    pub(crate) ids: HashSet<u64>,
    pub(crate) spans: Vec<JobSpan>,
}

impl Busy {
    /// `job` starts: its tables are busy and its hull is off limits to flushes.
    pub(crate) fn start(&mut self, job: &Job) {
        let ids = job.ids();
        let all: Vec<_> = job.inputs.iter().chain(&job.lower).cloned().collect();
        let (lo, hi) = key_range(&all);
        self.spans.push(JobSpan {
            key: ids.first().copied().unwrap_or(u64::MAX),
            cf: job.cf,
            output_level: job.output_level,
            lo,
            hi,
        });
        self.ids.extend(ids);
    }

    /// The job that read `ids` (as [`Job::ids`]) is done.
    pub(crate) fn finish(&mut self, ids: &[u64]) {
        self.ids.retain(|id| !ids.contains(id));
        self.spans.retain(|s| !ids.contains(&s.key));
    }

    /// No job runs (every job has a table, so its span goes with its ids).
    pub(crate) fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

/// The level a flushed table of family `cf` holding user keys `[lo, hi]` goes to: the base
/// level when no table of any level overlaps that range and no running job in `running` may
/// write there at a level at or above base; otherwise 0.
///
/// Not only levels 0 to base: a table that overlapped the levels below would be merged down
/// alone, where level 0 gathers `l0_compaction_trigger` flushes before one merge does. A
/// random load's flushes, each spanning the key space, went to the base level once the last
/// level outgrew it, and each was merged with the whole last level: a 5M-key `random_delete`
/// compacted 1.15–1.29 times as many bytes and ran 0.79–0.86 times as fast (two pairs).
pub(crate) fn flush_level(
    version: &Version,
    cf: u32,
    shape: Shape,
    lo: &[u8],
    hi: &[u8],
    running: &[JobSpan],
) -> usize {
    let Some(c) = version.cfs.get(&cf) else {
        return 0;
    };
    let (_, base) = targets(c, shape.base_bytes, shape.ratio);
    if c.levels
        .iter()
        .any(|level| level.iter().any(|t| t.overlaps(lo, hi)))
    {
        return 0;
    }
    if running.iter().any(|j| {
        j.cf == cf && j.output_level <= base && j.lo.as_slice() <= hi && j.hi.as_slice() >= lo
    }) {
        return 0;
    }
    base
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A xorshift generator from `seed`.
    fn xorshift(mut x: u64) -> impl FnMut() -> u64 {
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    fn gaps(keys: &[Vec<u8>]) -> Vec<usize> {
        let mut d = GapDetector::default();
        let mut out = Vec::new();
        for (i, w) in keys.windows(2).enumerate() {
            if d.is_gap(&w[0], &w[1]) {
                out.push(i + 1);
                d.restart();
            }
        }
        out
    }

    #[test]
    fn two_sequential_ranges_in_binary_have_one_gap_between_them() {
        let mut keys: Vec<Vec<u8>> = (1_000u64..6_000)
            .map(|i| i.to_be_bytes().to_vec())
            .collect();
        keys.extend((2_500_000u64..2_505_000).map(|i| i.to_be_bytes().to_vec()));
        assert_eq!(gaps(&keys), vec![5_000]);
    }

    #[test]
    fn sequential_ranges_in_ascii_decimal_are_told_apart_when_a_digit_up_or_more() {
        // Runs of 20,000 keys see carries up to the ten-thousands; ranges 1,000,000 apart
        // differ two digits above.
        let mut keys = Vec::new();
        let mut starts = Vec::new();
        for s in 0..8u64 {
            starts.push(keys.len());
            let lo = s * 1_000_000 + 12_345;
            keys.extend((lo..lo + 20_000).map(|i| format!("user{i:016}").into_bytes()));
        }
        assert_eq!(gaps(&keys), starts[1..].to_vec());
    }

    #[test]
    fn writers_of_random_keys_each_in_its_own_range_are_told_apart() {
        let mut next = xorshift(0x2545_f491_4f6c_dd1d);
        let mut keys = Vec::new();
        let mut starts = Vec::new();
        for s in 0..4u64 {
            starts.push(keys.len());
            let mut run: Vec<Vec<u8>> = (0..20_000)
                .map(|_| (s << 62 | next() >> 2).to_be_bytes().to_vec())
                .collect();
            run.sort();
            run.dedup();
            keys.extend(run);
        }
        assert_eq!(
            gaps(&keys),
            Vec::<usize>::new(),
            "ranges that touch: no gap"
        );
        let sparse: Vec<Vec<u8>> = keys
            .iter()
            .map(|k| {
                // Each range a sixteenth of the space, one every quarter.
                let v = u64::from_be_bytes(k[..].try_into().unwrap());
                ((v >> 62) << 62 | (v & ((1 << 62) - 1)) >> 2)
                    .to_be_bytes()
                    .to_vec()
            })
            .collect();
        assert_eq!(gaps(&sparse), starts[1..].to_vec());
    }

    #[test]
    fn the_seeds_keys_from_eight_writers_have_seven_gaps() {
        // silt-bench's keys: an 8-byte big-endian index padded with ASCII zeros.
        let key = |i: u64| {
            let mut k = i.to_be_bytes().to_vec();
            k.extend_from_slice(b"00000000");
            k
        };
        let mut keys = Vec::new();
        let mut starts = Vec::new();
        for s in 0..8u64 {
            starts.push(keys.len());
            keys.extend((s * 625_000..s * 625_000 + 54_000).map(key));
        }
        assert_eq!(gaps(&keys), starts[1..].to_vec());
    }

    #[test]
    fn counting_in_ascii_decimal_has_no_gap() {
        let keys: Vec<Vec<u8>> = (0u64..300_000)
            .map(|i| format!("{i:016}").into_bytes())
            .collect();
        assert_eq!(gaps(&keys), Vec::<usize>::new());
        // Nor in variable-length decimal, whose order is not numeric.
        let mut keys: Vec<Vec<u8>> = (0u64..300_000)
            .map(|i| format!("key{i}").into_bytes())
            .collect();
        keys.sort();
        assert_eq!(gaps(&keys), Vec::<usize>::new());
    }

    #[test]
    fn random_keys_have_no_gap() {
        let mut next = xorshift(0x9e37_79b9_7f4a_7c15);
        let mut bin: Vec<Vec<u8>> = (0..200_000)
            .map(|_| next().to_be_bytes().to_vec())
            .collect();
        bin.sort();
        bin.dedup();
        assert_eq!(gaps(&bin), Vec::<usize>::new());
        let mut dec: Vec<Vec<u8>> = (0..200_000)
            .map(|_| format!("user{}", next() % 10_000_000_000).into_bytes())
            .collect();
        dec.sort();
        dec.dedup();
        assert_eq!(gaps(&dec), Vec::<usize>::new());
    }

    #[test]
    fn distance_is_the_bytes_after_the_prefix_scaled_by_its_length() {
        let d = key_distance;
        assert_eq!(d(b"a", b"b"), (1u64 << 56) as f64);
        assert_eq!(d(b"ab", b"ac"), (1u64 << 48) as f64);
        assert_eq!(
            d(b"a\xff", b"b\x00"),
            (1u64 << 48) as f64,
            "a carry is one step"
        );
        assert_eq!(d(b"x", b"x\x01"), (1u64 << 48) as f64);
        assert_eq!(d(b"x", b"x\0"), 0.0);
        let long = vec![7u8; 300];
        let mut other = long.clone();
        other.push(1);
        assert_eq!(d(&long, &other), 0.0);
    }
}
