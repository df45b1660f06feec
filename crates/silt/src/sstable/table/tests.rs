//! Unit tests of `sstable::table`: round trips over every option combination, the bloom
//! filter, the cache flag, and damaged tables read as `Corruption`, never a panic.

use super::*;
use crate::key::make_internal;
use crate::sstable::{Compression, TableBuilder, TableOptions};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use silt_vfs::{FileSystem, SimFs};
use std::cmp::Ordering;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn sim() -> Arc<SimFs> {
    let fs = SimFs::new();
    fs.create_dir_all(Path::new("/db/tables")).unwrap();
    fs
}

fn build(fs: &SimFs, entries: &Entries, opts: &TableOptions) -> (PathBuf, TableMeta) {
    let id = NEXT_ID.fetch_add(1, AtomicOrdering::Relaxed);
    let path = PathBuf::from(format!("/db/tables/{id:06}.sst"));
    let file = fs.create(&path).unwrap();
    let mut b = TableBuilder::new(id, path.clone(), file, opts);
    for (k, v) in entries {
        b.add(k, v).unwrap();
    }
    let meta = b.finish().unwrap();
    (path, meta)
}

/// Opens a table built by `build` (ids are unique, as the shared cache needs).
fn open(fs: &SimFs, path: &Path, cache: &Arc<BlockCache>) -> Result<Arc<Table>> {
    let file = fs.open(path).unwrap();
    let id = path
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|s| s.parse().ok())
        .unwrap();
    Table::open(id, path.to_path_buf(), file, cache.clone())
}

/// Compares entry lists, reporting the first difference briefly.
#[track_caller]
fn assert_same(got: &[(Vec<u8>, Vec<u8>)], want: &[(Vec<u8>, Vec<u8>)], what: &str) {
    if let Some(i) = (0..got.len().min(want.len())).find(|&i| got[i] != want[i]) {
        panic!(
            "{what}: entry {i} differs: got key {:?} ({} value bytes), want key {:?} ({} value bytes)",
            got[i].0, got[i].1.len(), want[i].0, want[i].1.len()
        );
    }
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
}

fn forward(it: &mut TableIter) -> (Entries, Option<Error>) {
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    (out, it.take_error())
}

fn backward(it: &mut TableIter) -> (Entries, Option<Error>) {
    let mut out = Vec::new();
    it.seek_to_last();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    out.reverse();
    (out, it.take_error())
}

/// The reference answer of `Table::get`.
fn ref_get(entries: &Entries, uk: &[u8], snapshot: Seqno) -> Option<(Kind, Seqno, Vec<u8>)> {
    entries.iter().find_map(|(k, v)| {
        let p = key::parse(k)?;
        (p.user_key == uk && p.seqno < snapshot).then(|| (p.kind, p.seqno, v.clone()))
    })
}

fn sort_entries(mut e: Entries) -> Entries {
    e.sort_by(|a, b| key::cmp_internal(&a.0, &b.0));
    e.dedup_by(|a, b| key::cmp_internal(&a.0, &b.0) == Ordering::Equal);
    e
}

/// Entries with several versions per user key and all kinds.
fn sample(n: usize, seed: u64) -> Entries {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut e = Vec::new();
    for i in 0..n {
        let uk = format!("user{:04}", i / 3).into_bytes();
        let seqno = rng.random_range(1..1000u64);
        let kind = match rng.random_range(0..4) {
            0 => Kind::Delete,
            1 => Kind::SingleDelete,
            _ => Kind::Put,
        };
        let vlen = rng.random_range(0..40);
        let v: Vec<u8> = (0..vlen).map(|_| rng.random()).collect();
        e.push((make_internal(&uk, seqno, kind), v));
    }
    sort_entries(e)
}

#[test]
fn round_trip_every_option_combination() {
    let fs = sim();
    let cache = Arc::new(BlockCache::new(1 << 20));
    let entries = sample(600, 1);
    for compression in [Compression::None, Compression::Lz4, Compression::Zstd(3)] {
        for block_size_bytes in [1, 64, 4096, 1 << 20] {
            for bloom_bits_per_key in [0, 10] {
                let opts = TableOptions {
                    block_size_bytes,
                    restart_interval: 4,
                    bloom_bits_per_key,
                    compression,
                };
                let (path, meta) = build(&fs, &entries, &opts);
                let t = open(&fs, &path, &cache).unwrap();
                assert_eq!(t.size_bytes(), meta.size_bytes);
                assert_eq!(t.meta(), meta);
                assert_eq!(meta.entries, entries.len() as u64);
                let mut it = t.iter();
                let (f, e) = forward(&mut it);
                assert!(e.is_none());
                assert_same(&f, &entries, "forward");
                let (b, e) = backward(&mut it);
                assert!(e.is_none());
                assert_same(&b, &entries, "backward");
                for (k, _) in entries.iter().step_by(7) {
                    let uk = key::user_key(k);
                    for snap in [1, key::seqno(k), key::seqno(k) + 1, 2000] {
                        assert_eq!(t.get(uk, snap).unwrap(), ref_get(&entries, uk, snap));
                    }
                    assert!(t.may_contain(uk));
                }
                assert_eq!(t.get(b"absent", 5000).unwrap(), None);
            }
        }
    }
    assert!(cache.hits() > 0 && cache.misses() > 0);
}

#[test]
fn empty_table() {
    let fs = sim();
    let cache = Arc::new(BlockCache::new(0));
    let (path, meta) = build(&fs, &Vec::new(), &TableOptions::default());
    assert_eq!(meta.entries, 0);
    let t = open(&fs, &path, &cache).unwrap();
    let mut it = t.iter();
    assert_eq!(forward(&mut it).0, vec![]);
    assert_eq!(backward(&mut it).0, vec![]);
    it.seek(b"anything");
    assert!(!it.valid());
    it.seek_for_prev(b"anything");
    assert!(!it.valid());
    assert!(it.take_error().is_none());
    assert_eq!(t.get(b"a", 10).unwrap(), None);
}

#[test]
fn bloom_filter_skips_absent_keys() {
    let fs = sim();
    let cache = Arc::new(BlockCache::new(1 << 20));
    let entries = sample(3000, 2);
    let (path, _) = build(&fs, &entries, &TableOptions::default());
    let t = open(&fs, &path, &cache).unwrap();
    let misses = cache.misses();
    let mut passed = 0;
    for i in 0..1000 {
        let k = format!("absent{i}");
        if t.may_contain(k.as_bytes()) {
            passed += 1;
        }
        assert_eq!(t.get(k.as_bytes(), 10_000).unwrap(), None);
    }
    assert!(passed < 50, "{passed} false positives");
    assert!(cache.misses() - misses <= passed);
}

#[test]
fn big_keys_and_values() {
    let fs = sim();
    let cache = Arc::new(BlockCache::new(4 << 20));
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut e = Vec::new();
    for i in 0..12u64 {
        let klen = [0, 10, 1000, 64 * 1024][i as usize % 4];
        let mut uk: Vec<u8> = vec![b'k'; klen];
        uk.push(i as u8);
        let vlen = [0, 1 << 20, 5000, 300_000][(i as usize / 4) % 4];
        let v: Vec<u8> = (0..vlen)
            .map(|j| (j % 251) as u8 ^ rng.random::<u8>() & 1)
            .collect();
        e.push((make_internal(&uk, i + 1, Kind::Put), v));
    }
    let e = sort_entries(e);
    for compression in [Compression::None, Compression::Lz4, Compression::Zstd(1)] {
        let opts = TableOptions {
            compression,
            ..TableOptions::default()
        };
        let (path, _) = build(&fs, &e, &opts);
        let t = open(&fs, &path, &cache).unwrap();
        let mut it = t.iter();
        assert_same(&forward(&mut it).0, &e, "forward");
        assert_same(&backward(&mut it).0, &e, "backward");
        for (k, v) in &e {
            let got = t.get(key::user_key(k), 100).unwrap().unwrap();
            assert!(&got.2 == v);
        }
    }
}

#[test]
fn fill_cache_false_leaves_the_cache_alone() {
    let fs = sim();
    let cache = Arc::new(BlockCache::new(1 << 20));
    let entries = sample(500, 4);
    let opts = TableOptions {
        block_size_bytes: 256,
        ..TableOptions::default()
    };
    let (path, _) = build(&fs, &entries, &opts);
    let t = open(&fs, &path, &cache).unwrap();
    let mut it = TableIter::new_with(&t, false);
    assert_same(&forward(&mut it).0, &entries, "forward");
    assert_eq!(cache.len(), 0);
    let mut it = t.iter();
    assert_same(&forward(&mut it).0, &entries, "forward");
    assert!(cache.len() > 1);
}

/// The bytes of a finished table file.
fn file_bytes(fs: &SimFs, path: &Path) -> Vec<u8> {
    let f = fs.open(path).unwrap();
    let mut buf = vec![0u8; f.len().unwrap() as usize];
    f.read_at(&mut buf, 0).unwrap();
    buf
}

fn is_corruption_of(e: &Error, path: &Path) -> bool {
    matches!(e, Error::Corruption { file, .. } if file == path)
}

/// How a damaged table was caught.
#[derive(Debug, Default)]
struct Outcomes {
    open_failed: usize,
    read_failed: usize,
    all_correct: usize,
}

/// Opens `bytes` as a table and reads all of it every way; everything returned must be
/// right, and anything that fails must fail with `Corruption` naming the file.
fn check_damaged(fs: &SimFs, bytes: &[u8], entries: &Entries, what: &str, out: &mut Outcomes) {
    let path = PathBuf::from("/db/tables/damaged.sst");
    let _ = fs.remove(&path);
    let f = fs.create(&path).unwrap();
    if !bytes.is_empty() {
        f.write_at(&[bytes], 0).unwrap();
    }
    let cache = Arc::new(BlockCache::new(0));
    let t = match Table::open(9, path.clone(), f, cache) {
        Ok(t) => t,
        Err(e) => {
            assert!(is_corruption_of(&e, &path), "{what}: open: {e:?}");
            out.open_failed += 1;
            return;
        }
    };
    let mut failed = false;
    let mut it = t.iter();
    let (f, err) = forward(&mut it);
    assert_same(&f, &entries[..f.len().min(entries.len())], what);
    match err {
        Some(e) => {
            assert!(is_corruption_of(&e, &path), "{what}: {e:?}");
            failed = true;
        }
        None => assert_eq!(f.len(), entries.len(), "{what}: forward ended early"),
    }
    let (b, err) = backward(&mut it);
    assert_same(&b, &entries[entries.len().saturating_sub(b.len())..], what);
    match err {
        Some(e) => {
            assert!(is_corruption_of(&e, &path), "{what}: {e:?}");
            failed = true;
        }
        None => assert_eq!(b.len(), entries.len(), "{what}: backward ended early"),
    }
    for (k, _) in entries.iter().step_by(5) {
        let uk = key::user_key(k);
        match t.get(uk, key::seqno(k) + 1) {
            Ok(got) => assert_eq!(got, ref_get(entries, uk, key::seqno(k) + 1), "{what}"),
            Err(e) => {
                assert!(is_corruption_of(&e, &path), "{what}: {e:?}");
                failed = true;
            }
        }
        it.seek(k);
        if it.valid() {
            assert_eq!(it.key(), &k[..], "{what}: seek");
        } else if let Some(e) = it.take_error() {
            assert!(is_corruption_of(&e, &path), "{what}: {e:?}");
            failed = true;
        } else {
            panic!("{what}: seek to a present key found nothing and no error");
        }
    }
    if failed {
        out.read_failed += 1;
    } else {
        out.all_correct += 1;
    }
}

#[test]
fn truncated_and_flipped_tables_are_corruption_never_panics() {
    let fs = sim();
    let cache = Arc::new(BlockCache::new(0));
    let entries = sample(120, 5);
    for compression in [Compression::None, Compression::Lz4, Compression::Zstd(1)] {
        let opts = TableOptions {
            block_size_bytes: 200,
            restart_interval: 3,
            bloom_bits_per_key: 10,
            compression,
        };
        let (path, _) = build(&fs, &entries, &opts);
        let good = file_bytes(&fs, &path);
        let mut out = Outcomes::default();
        check_damaged(&fs, &good, &entries, "intact", &mut out);
        assert_eq!(out.all_correct, 1);
        let t = open(&fs, &path, &cache).unwrap();
        assert_eq!(t.size_bytes(), good.len() as u64);
        for len in 0..good.len() {
            check_damaged(
                &fs,
                &good[..len],
                &entries,
                &format!("{compression:?} cut at {len}"),
                &mut out,
            );
        }
        let mut rng = ChaCha8Rng::seed_from_u64(6);
        for i in 0..good.len() {
            let mut bad = good.clone();
            let x: u8 = rng.random_range(1..=255);
            bad[i] ^= x;
            check_damaged(
                &fs,
                &bad,
                &entries,
                &format!("{compression:?} flip {x:#x} at {i}"),
                &mut out,
            );
        }
        // Extra bytes in front of the footer move every handle: also caught.
        let mut longer = good.clone();
        longer.splice(good.len() - 64..good.len() - 64, [0u8; 3]);
        check_damaged(&fs, &longer, &entries, "grown", &mut out);
        // Every truncation loses the footer; every flip is caught by a checksum (at
        // open for the footer and metadata blocks, on read for data blocks).
        assert_eq!(out.all_correct, 2, "{out:?}"); // intact and grown
        assert!(out.read_failed > 0, "{out:?}");
        assert_eq!(out.open_failed + out.read_failed, 2 * good.len(), "{out:?}");
    }
}

/// A reference model check: every operation on a random table against a sorted vector.
fn check_against_reference(entries: &Entries, opts: &TableOptions, seed: u64) {
    let fs = sim();
    let cache = Arc::new(BlockCache::new(if seed & 1 == 0 { 0 } else { 1 << 16 }));
    let (path, meta) = build(&fs, entries, opts);
    assert_eq!(meta.entries, entries.len() as u64);
    if let (Some(first), Some(last)) = (entries.first(), entries.last()) {
        assert_eq!(meta.smallest, first.0);
        assert_eq!(meta.largest, last.0);
    }
    let t = open(&fs, &path, &cache).unwrap();
    let mut it = t.iter();
    let (f, e) = forward(&mut it);
    assert!(e.is_none());
    assert_same(&f, entries, "forward");
    let (b, e) = backward(&mut it);
    assert!(e.is_none());
    assert_same(&b, entries, "backward");

    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let pick_target = |rng: &mut ChaCha8Rng| -> Vec<u8> {
        if !entries.is_empty() && rng.random_bool(0.7) {
            let (k, _) = &entries[rng.random_range(0..entries.len())];
            let uk = key::user_key(k).to_vec();
            match rng.random_range(0..3) {
                0 => k.clone(),
                1 => key::seek_key(&uk, rng.random_range(1..300)),
                _ => {
                    let mut u = uk;
                    u.push(rng.random());
                    key::seek_key(&u, rng.random_range(1..300))
                }
            }
        } else {
            let len = rng.random_range(0..4);
            let u: Vec<u8> = (0..len).map(|_| rng.random_range(0..4u8)).collect();
            key::seek_key(&u, rng.random_range(1..300))
        }
    };
    for _ in 0..40 {
        let target = pick_target(&mut rng);
        // The position the reference says each seek lands on.
        let ge = entries.partition_point(|(k, _)| key::cmp_internal(k, &target) == Ordering::Less);
        let le =
            entries.partition_point(|(k, _)| key::cmp_internal(k, &target) != Ordering::Greater);
        let mut pos: Option<usize>;
        if rng.random_bool(0.5) {
            it.seek(&target);
            pos = (ge < entries.len()).then_some(ge);
        } else {
            it.seek_for_prev(&target);
            pos = le.checked_sub(1);
        }
        for _ in 0..6 {
            assert!(it.take_error().is_none());
            match pos {
                None => {
                    assert!(!it.valid());
                    break;
                }
                Some(p) => {
                    assert!(it.valid());
                    assert_eq!(it.key(), &entries[p].0[..]);
                    assert_eq!(it.value(), &entries[p].1[..]);
                }
            }
            let p = pos.unwrap_or(0);
            if rng.random_bool(0.5) {
                it.next();
                pos = (p + 1 < entries.len()).then_some(p + 1);
            } else {
                it.prev();
                pos = p.checked_sub(1);
            }
        }
        // A point read at a random snapshot.
        let uk = key::user_key(&target).to_vec();
        let snap = rng.random_range(0..300);
        assert_eq!(t.get(&uk, snap).unwrap(), ref_get(entries, &uk, snap));
    }
}

fn entries_strategy() -> impl Strategy<Value = Entries> {
    let entry = (
        proptest::collection::vec(0u8..4, 0..6),
        1u64..300,
        0u8..3,
        prop_oneof![
            3 => proptest::collection::vec(any::<u8>(), 0..20),
            1 => Just(Vec::new()),
            1 => proptest::collection::vec(0u8..3, 100..3000),
        ],
    );
    proptest::collection::vec(entry, 0..300).prop_map(|v| {
        sort_entries(
            v.into_iter()
                .map(|(uk, s, k, val)| {
                    let kind = Kind::from_u8(k).unwrap_or(Kind::Put);
                    (make_internal(&uk, s, kind), val)
                })
                .collect(),
        )
    })
}

fn options_strategy() -> impl Strategy<Value = TableOptions> {
    (
        prop_oneof![Just(1usize), 16usize..512, Just(4096)],
        1usize..20,
        prop_oneof![Just(0u32), 1u32..16],
        prop_oneof![
            Just(Compression::None),
            Just(Compression::Lz4),
            (-3i32..6).prop_map(Compression::Zstd)
        ],
    )
        .prop_map(|(b, r, bits, c)| TableOptions {
            block_size_bytes: b,
            restart_interval: r,
            bloom_bits_per_key: bits,
            compression: c,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn matches_reference(entries in entries_strategy(), opts in options_strategy(), seed: u64) {
        check_against_reference(&entries, &opts, seed);
    }
}
