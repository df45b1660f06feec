//! Unit tests of `SimFs`: the page cache against the disk, every crash mode, renames and
//! removals across a power loss, injected I/O errors, locks.

use super::*;

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

/// A fresh file system with directory `/d`.
fn fs_with_dir() -> Arc<SimFs> {
    let fs = SimFs::new();
    fs.create_dir_all(&p("/d")).unwrap();
    fs
}

fn read(fs: &SimFs, path: &str) -> Vec<u8> {
    let f = fs.open(&p(path)).unwrap();
    read_file(&*f)
}

fn read_file(f: &dyn File) -> Vec<u8> {
    let mut b = vec![0; f.len().unwrap() as usize];
    f.read_at(&mut b, 0).unwrap();
    b
}

fn exists(fs: &SimFs, path: &str) -> bool {
    match fs.open(&p(path)) {
        Ok(_) => true,
        Err(e) if e.kind() == io::ErrorKind::NotFound => false,
        Err(e) => panic!("open {path}: {e}"),
    }
}

fn is_injected(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::Other && e.to_string() == "injected EIO"
}

/// A durable, synced, empty file `/d/a`.
fn durable_file(fs: &SimFs) -> Arc<dyn File> {
    let f = fs.create(&p("/d/a")).unwrap();
    f.sync_data().unwrap();
    fs.sync_dir(&p("/d")).unwrap();
    f
}

// ---- live vs. durable ----------------------------------------------------------------

#[test]
fn reads_see_live_data_and_only_synced_data_is_durable() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.write_at(&[b"hel", b"lo"], 0).unwrap();
    assert_eq!(read_file(&*f), b"hello");
    assert_eq!(f.len().unwrap(), 5);
    assert!(!f.is_empty().unwrap());
    assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"");
    f.sync_data().unwrap();
    assert_eq!(fs.unsynced_bytes(), 0);
    assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"hello");
    f.write_at(&[b"J"], 0).unwrap();
    assert_eq!(read(&fs, "/d/a"), b"Jello");
    assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"hello");
}

#[test]
fn unsynced_data_is_dropped_by_drop_all_and_kept_by_keep_all() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.write_at(&[b"hello"], 0).unwrap();
    f.sync_data().unwrap();
    f.write_at(&[b" world"], 5).unwrap();
    f.write_at(&[b"W"], 6).unwrap();
    assert_eq!(fs.unsynced_bytes(), 7, "the unsynced writes are pending");
    assert_eq!(read(&fs.crash(CrashMode::DropAll, 1), "/d/a"), b"hello");
    assert_eq!(
        read(&fs.crash(CrashMode::KeepAll, 1), "/d/a"),
        b"hello World"
    );
    // Taking a crash image changes nothing in the original.
    assert_eq!(fs.unsynced_bytes(), 7);
    assert_eq!(read(&fs, "/d/a"), b"hello World");
}

#[test]
fn set_len_extends_with_zeros_shrinks_and_is_durable_after_sync() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.set_len(4).unwrap();
    assert_eq!(read_file(&*f), [0; 4]);
    f.write_at(&[b"abcdef"], 2).unwrap();
    f.set_len(5).unwrap();
    assert_eq!(read_file(&*f), b"\0\0abc");
    assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"");
    assert_eq!(read(&fs.crash(CrashMode::KeepAll, 0), "/d/a"), b"\0\0abc");
    f.sync_data().unwrap();
    assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"\0\0abc");
}

#[test]
fn writes_past_the_end_leave_a_zero_gap_and_empty_writes_change_nothing() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.write_at(&[b"x"], 3).unwrap();
    assert_eq!(read_file(&*f), b"\0\0\0x");
    f.write_at(&[], 100).unwrap();
    f.write_at(&[b"", b""], 100).unwrap();
    assert_eq!(f.len().unwrap(), 4);
    assert_eq!(fs.unsynced_bytes(), 1);
}

#[test]
fn read_past_the_end_is_unexpected_eof() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.write_at(&[b"abc"], 0).unwrap();
    let mut b = [0u8; 2];
    f.read_at(&mut b, 1).unwrap();
    assert_eq!(&b, b"bc");
    let e = f.read_at(&mut b, 2).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    let e = f.read_at(&mut b, u64::MAX).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    f.read_at(&mut [], 3).unwrap();
}

#[test]
fn write_mapped_is_a_write_inside_the_current_length() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.set_len(8).unwrap();
    f.write_mapped(&[b"ab", b"cd"], 4).unwrap();
    assert_eq!(read_file(&*f), b"\0\0\0\0abcd");
    let e = f.write_mapped(&[b"xyz"], 6).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    assert_eq!(
        read_file(&*f),
        b"\0\0\0\0abcd",
        "a refused write changes nothing"
    );
    assert_eq!(
        read(&fs.crash(CrashMode::KeepAll, 0), "/d/a"),
        b"\0\0\0\0abcd"
    );
    assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"");
}

#[test]
fn huge_offsets_are_refused() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    assert!(f.write_at(&[b"x"], u64::MAX).is_err());
    assert_eq!(f.len().unwrap(), 0);
    assert_eq!(fs.unsynced_bytes(), 0);
}

// ---- crash modes ---------------------------------------------------------------------

/// `/d/a` durable and empty, then `n` unsynced writes of 100 bytes of value `i + 1` at
/// offset `i * 100`.
fn hundred_byte_writes(n: u8) -> (Arc<SimFs>, Arc<dyn File>) {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    for i in 0..n {
        f.write_at(&[&[i + 1; 100]], u64::from(i) * 100).unwrap();
    }
    (fs, f)
}

/// The image of the first `k` of `hundred_byte_writes`.
fn prefix_image(k: usize) -> Vec<u8> {
    (0..k * 100).map(|j| (j / 100) as u8 + 1).collect()
}

#[test]
fn prefix_keeps_a_uniform_prefix_of_the_writes() {
    let (fs, _f) = hundred_byte_writes(4);
    let mut seen = [0u32; 5];
    for seed in 0..400 {
        let img = read(&fs.crash(CrashMode::Prefix, seed), "/d/a");
        let k = img.len() / 100;
        assert_eq!(img, prefix_image(k), "seed {seed}");
        seen[k] += 1;
        let again = read(&fs.crash(CrashMode::Prefix, seed), "/d/a");
        assert_eq!(img, again, "seed {seed}: not deterministic");
    }
    // Every prefix length 0..=4 shows up, about equally often (expected 80 each).
    assert!(seen.iter().all(|&c| (40..=120).contains(&c)), "{seen:?}");
}

#[test]
fn prefix_applies_set_len_in_order() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.write_at(&[b"abcd"], 0).unwrap();
    f.set_len(2).unwrap();
    f.write_at(&[b"Z"], 3).unwrap();
    let allowed: [&[u8]; 4] = [b"", b"abcd", b"ab", b"ab\0Z"];
    let mut seen = BTreeSet::new();
    for seed in 0..200 {
        let img = read(&fs.crash(CrashMode::Prefix, seed), "/d/a");
        assert!(allowed.contains(&&img[..]), "seed {seed}: {img:?}");
        seen.insert(img);
    }
    assert_eq!(seen.len(), 4);
}

#[test]
fn each_file_gets_its_own_prefix() {
    let fs = fs_with_dir();
    let a = fs.create(&p("/d/a")).unwrap();
    let b = fs.create(&p("/d/b")).unwrap();
    fs.sync_dir(&p("/d")).unwrap();
    for i in 0..4u8 {
        a.write_at(&[&[i + 1; 100]], u64::from(i) * 100).unwrap();
        b.write_at(&[&[i + 1; 100]], u64::from(i) * 100).unwrap();
    }
    let mut differ = false;
    for seed in 0..50 {
        let c = fs.crash(CrashMode::Prefix, seed);
        let (x, y) = (read(&c, "/d/a"), read(&c, "/d/b"));
        assert_eq!(x, prefix_image(x.len() / 100));
        assert_eq!(y, prefix_image(y.len() / 100));
        differ |= x.len() != y.len();
    }
    assert!(differ, "the two files always kept the same prefix");
}

#[test]
fn sectors_keeps_aligned_pieces_independently() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.set_len(4096).unwrap();
    f.sync_data().unwrap();
    // One unaligned write over 300..3800: pieces 300..512, 512..1024, ..., 3584..3800.
    f.write_at(&[&[7u8; 3500]], 300).unwrap();
    let (mut kept, mut dropped, mut mixed) = (0, 0, 0);
    for seed in 0..64 {
        let img = read(&fs.crash(CrashMode::Sectors, seed), "/d/a");
        assert_eq!(img.len(), 4096);
        assert!(img[..300].iter().all(|&b| b == 0));
        assert!(img[3800..].iter().all(|&b| b == 0));
        let mut states = BTreeSet::new();
        for (s, chunk) in img.chunks(512).enumerate() {
            let lo = if s == 0 { 300 } else { 0 };
            let hi = if s == 7 { 3800 - 3584 } else { 512 };
            let piece = &chunk[lo..hi];
            let all7 = piece.iter().all(|&b| b == 7);
            assert!(
                all7 || piece.iter().all(|&b| b == 0),
                "seed {seed}: sector {s}"
            );
            states.insert(all7);
            if all7 {
                kept += 1;
            } else {
                dropped += 1;
            }
        }
        if states.len() == 2 {
            mixed += 1;
        }
    }
    assert!(
        kept > 150 && dropped > 150,
        "kept {kept}, dropped {dropped}"
    );
    assert!(mixed > 50, "a write was rarely split: {mixed}");
}

#[test]
fn sectors_applies_kept_pieces_in_issue_order() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.write_at(&[&[1u8; 512]], 0).unwrap();
    f.write_at(&[&[2u8; 512]], 0).unwrap();
    let mut seen = BTreeSet::new();
    for seed in 0..100 {
        let img = read(&fs.crash(CrashMode::Sectors, seed), "/d/a");
        // Both kept: the later write wins.
        seen.insert(img.first().copied());
        assert!(img.is_empty() || img.iter().all(|&b| b == img[0]));
    }
    let want: BTreeSet<_> = [None, Some(1), Some(2)].into_iter().collect();
    assert_eq!(seen, want);
}

#[test]
fn sectors_keeps_or_drops_set_len_as_one_piece() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.set_len(1000).unwrap();
    let mut lens = BTreeSet::new();
    for seed in 0..50 {
        lens.insert(read(&fs.crash(CrashMode::Sectors, seed), "/d/a").len());
    }
    assert_eq!(lens, [0, 1000].into_iter().collect());
}

#[test]
fn tear_keeps_a_prefix_then_part_of_one_write_and_garbage_in_its_sector() {
    let (fs, _f) = hundred_byte_writes(10);
    let full = prefix_image(10);
    let (mut torn_mid, mut garbage) = (0, 0);
    for seed in 0..500 {
        let img = read(&fs.crash(CrashMode::Tear, seed), "/d/a");
        assert!(img.len() <= full.len(), "seed {seed}");
        // The first byte that differs from the full image, or none.
        let Some(diff) = (0..img.len()).find(|&j| img[j] != full[j]) else {
            // A clean prefix (possibly with an invisible tear).
            continue;
        };
        let k = diff / 100; // the torn write
        let write_end = (k + 1) * 100;
        let limit = (sector_end(diff as u64) as usize).min(write_end);
        // Nothing past the torn write's sector or range, and no later write.
        assert!(img.len() <= limit, "seed {seed}: {} > {limit}", img.len());
        garbage += 1;
        if diff % 100 != 0 {
            torn_mid += 1;
        }
    }
    assert!(garbage > 100, "too few torn writes: {garbage}");
    assert!(torn_mid > 50, "too few writes torn mid-way: {torn_mid}");
}

#[test]
fn tear_garbage_stays_inside_the_write_and_its_sector() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.write_at(&[&[9u8; 4096]], 0).unwrap();
    f.sync_data().unwrap();
    f.write_at(&[&[1u8; 2000]], 100).unwrap();
    let mut lens = BTreeSet::new();
    for seed in 0..300 {
        let img = read(&fs.crash(CrashMode::Tear, seed), "/d/a");
        assert_eq!(img.len(), 4096);
        assert!(img[..100].iter().all(|&b| b == 9));
        assert!(img[2100..].iter().all(|&b| b == 9), "seed {seed}");
        let Some(diff) = (100..2100).find(|&j| img[j] != 1) else {
            continue;
        };
        // Before the tear: the new bytes; after the tear's sector: the old ones.
        let end = sector_end(diff as u64) as usize;
        assert!(
            img[end.min(2100)..2100].iter().all(|&b| b == 9),
            "seed {seed}"
        );
        lens.insert(diff);
    }
    assert!(
        lens.len() > 50,
        "tear points are not spread: {}",
        lens.len()
    );
}

#[test]
fn tear_of_set_len_keeps_just_the_prefix() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.write_at(&[b"abcd"], 0).unwrap();
    f.sync_data().unwrap();
    f.set_len(2).unwrap();
    for seed in 0..30 {
        let img = read(&fs.crash(CrashMode::Tear, seed), "/d/a");
        assert!(img == b"abcd" || img == b"ab", "seed {seed}: {img:?}");
    }
}

#[test]
fn crash_images_are_deterministic_per_seed() {
    let (fs, _f) = hundred_byte_writes(20);
    for mode in [CrashMode::Prefix, CrashMode::Sectors, CrashMode::Tear] {
        let mut distinct = BTreeSet::new();
        for seed in 0..20 {
            let a = read(&fs.crash(mode, seed), "/d/a");
            assert_eq!(a, read(&fs.crash(mode, seed), "/d/a"), "{mode:?} {seed}");
            distinct.insert(a);
        }
        assert!(distinct.len() > 5, "{mode:?}: seeds barely matter");
    }
}

#[test]
fn a_crash_image_is_independent_and_fully_synced() {
    let (fs, f) = hundred_byte_writes(3);
    fs.fail_nth(FailOp::Any, 1, true);
    let c = fs.crash(CrashMode::KeepAll, 0);
    fs.clear_faults();
    // Old handles do not reach the new file system, and vice versa.
    f.write_at(&[b"old"], 0).unwrap();
    assert_eq!(read(&c, "/d/a"), prefix_image(3));
    let g = c.open(&p("/d/a")).unwrap();
    g.write_at(&[b"new"], 0).unwrap();
    assert_eq!(&read(&fs, "/d/a")[..3], b"old");
    // Counters start at zero, no fault is armed, everything is durable.
    let c = fs.crash(CrashMode::KeepAll, 0);
    assert_eq!(c.unsynced_bytes(), 0);
    assert_eq!(c.sync_count(), 0);
    assert_eq!(c.op_count(FailOp::Any), 0);
    assert_eq!(
        read(&c.crash(CrashMode::DropAll, 0), "/d/a"),
        read(&c, "/d/a")
    );
    // Directories survive, even empty ones.
    fs.create_dir_all(&p("/e/f")).unwrap();
    let c = fs.crash(CrashMode::DropAll, 0);
    assert_eq!(c.list(&p("/e/f")).unwrap(), Vec::<PathBuf>::new());
    assert_eq!(c.list(&p("/d")).unwrap(), vec![p("/d/a")]);
}

// ---- names ---------------------------------------------------------------------------

#[test]
fn a_created_file_needs_sync_dir_to_survive() {
    let fs = fs_with_dir();
    let f = fs.create(&p("/d/new")).unwrap();
    f.write_at(&[b"data"], 0).unwrap();
    f.sync_data().unwrap();
    assert!(exists(&fs, "/d/new"));
    assert!(!exists(&fs.crash(CrashMode::KeepAll, 0), "/d/new"));
    fs.sync_dir(&p("/d")).unwrap();
    assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/new"), b"data");
}

#[test]
fn an_unsynced_rename_is_undone_and_a_synced_one_keeps_the_content() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.write_at(&[b"content"], 0).unwrap();
    f.sync_data().unwrap();
    fs.rename(&p("/d/a"), &p("/d/b")).unwrap();
    assert!(!exists(&fs, "/d/a"));
    assert_eq!(read(&fs, "/d/b"), b"content");
    let c = fs.crash(CrashMode::KeepAll, 0);
    assert_eq!(read(&c, "/d/a"), b"content", "an unsynced rename is undone");
    assert!(!exists(&c, "/d/b"));
    fs.sync_dir(&p("/d")).unwrap();
    let c = fs.crash(CrashMode::DropAll, 0);
    assert!(!exists(&c, "/d/a"));
    assert_eq!(read(&c, "/d/b"), b"content");
    // The handle still writes to the renamed file.
    f.write_at(&[b"C"], 0).unwrap();
    assert_eq!(read(&fs, "/d/b"), b"Content");
}

#[test]
fn rename_replaces_the_target() {
    let fs = fs_with_dir();
    let a = fs.create(&p("/d/a")).unwrap();
    a.write_at(&[b"new"], 0).unwrap();
    a.sync_data().unwrap();
    let b = fs.create(&p("/d/b")).unwrap();
    b.write_at(&[b"old"], 0).unwrap();
    b.sync_data().unwrap();
    fs.sync_dir(&p("/d")).unwrap();
    fs.rename(&p("/d/a"), &p("/d/b")).unwrap();
    assert_eq!(fs.list(&p("/d")).unwrap(), vec![p("/d/b")]);
    assert_eq!(read(&fs, "/d/b"), b"new");
    let c = fs.crash(CrashMode::KeepAll, 0);
    assert_eq!(read(&c, "/d/a"), b"new");
    assert_eq!(read(&c, "/d/b"), b"old", "the replaced file is back");
    fs.sync_dir(&p("/d")).unwrap();
    let c = fs.crash(CrashMode::KeepAll, 0);
    assert_eq!(c.list(&p("/d")).unwrap(), vec![p("/d/b")]);
    assert_eq!(read(&c, "/d/b"), b"new");
    // Renaming onto itself changes nothing; a missing source is NotFound.
    fs.rename(&p("/d/b"), &p("/d/b")).unwrap();
    assert_eq!(read(&fs, "/d/b"), b"new");
    let e = fs.rename(&p("/d/zz"), &p("/d/b")).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
}

#[test]
fn a_rename_across_directories_needs_both_synced() {
    let fs = fs_with_dir();
    fs.create_dir_all(&p("/e")).unwrap();
    let f = durable_file(&fs);
    f.write_at(&[b"x"], 0).unwrap();
    f.sync_data().unwrap();
    fs.rename(&p("/d/a"), &p("/e/a")).unwrap();
    fs.sync_dir(&p("/e")).unwrap();
    // Only the target directory synced: both names survive, sharing one inode.
    let c = fs.crash(CrashMode::DropAll, 0);
    assert!(exists(&c, "/d/a") && exists(&c, "/e/a"));
    c.open(&p("/e/a")).unwrap().write_at(&[b"y"], 0).unwrap();
    assert_eq!(read(&c, "/d/a"), b"y");
    fs.sync_dir(&p("/d")).unwrap();
    let c = fs.crash(CrashMode::DropAll, 0);
    assert!(!exists(&c, "/d/a") && exists(&c, "/e/a"));
}

#[test]
fn an_unsynced_remove_is_undone_with_the_durable_content() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.write_at(&[b"synced"], 0).unwrap();
    f.sync_data().unwrap();
    f.write_at(&[b"S"], 0).unwrap();
    drop(f);
    fs.remove(&p("/d/a")).unwrap();
    assert!(!exists(&fs, "/d/a"));
    assert_eq!(fs.list(&p("/d")).unwrap(), Vec::<PathBuf>::new());
    let c = fs.crash(CrashMode::DropAll, 0);
    assert_eq!(read(&c, "/d/a"), b"synced", "an unsynced remove is undone");
    let c = fs.crash(CrashMode::KeepAll, 0);
    assert_eq!(read(&c, "/d/a"), b"Synced");
    fs.sync_dir(&p("/d")).unwrap();
    assert!(!exists(&fs.crash(CrashMode::KeepAll, 0), "/d/a"));
    assert_eq!(fs.unsynced_bytes(), 0, "the unreachable inode was freed");
    let e = fs.remove(&p("/d/a")).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
}

#[test]
fn a_removed_open_file_keeps_working_by_inode() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    fs.remove(&p("/d/a")).unwrap();
    f.write_at(&[b"ghost"], 0).unwrap();
    assert_eq!(read_file(&*f), b"ghost");
    assert_eq!(fs.unsynced_bytes(), 5);
    // A new file of the same name is a different inode.
    let g = fs.create(&p("/d/a")).unwrap();
    assert_eq!(g.len().unwrap(), 0);
    f.sync_data().unwrap();
    assert_eq!(read_file(&*f), b"ghost");
    assert_eq!(read(&fs, "/d/a"), b"");
    // The durable name still points at the old inode, which was synced.
    assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"ghost");
    fs.sync_dir(&p("/d")).unwrap();
    assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"");
    // Dropping the last handle frees the inode.
    drop(f);
    assert_eq!(fs.state.lock().inodes.len(), 1);
}

#[test]
fn create_open_and_list_errors_and_order() {
    let fs = fs_with_dir();
    let e = fs.open(&p("/d/missing")).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    fs.create(&p("/d/b")).unwrap();
    let e = fs.create(&p("/d/b")).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
    let e = fs.create(&p("/nodir/x")).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    let e = fs.list(&p("/nodir")).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    let e = fs.sync_dir(&p("/nodir")).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    let e = fs.rename(&p("/d/b"), &p("/nodir/b")).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::NotFound);
    fs.create(&p("/d/a")).unwrap();
    fs.create(&p("/d/c.tmp")).unwrap();
    fs.create_dir_all(&p("/d/sub/deeper")).unwrap();
    fs.create(&p("/d/sub/x")).unwrap();
    assert_eq!(
        fs.list(&p("/d")).unwrap(),
        vec![p("/d/a"), p("/d/b"), p("/d/c.tmp")],
        "regular files directly inside, sorted"
    );
    assert_eq!(fs.list(&p("/d/sub")).unwrap(), vec![p("/d/sub/x")]);
    // Paths are joined onto the directory as given.
    assert_eq!(fs.list(&p("/d/sub/")).unwrap(), vec![p("/d/sub/x")]);
    let e = fs.create(&p("/d/sub")).unwrap_err();
    assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
    assert!(
        fs.create_dir_all(&p("/d/a/b")).is_err(),
        "a file is in the way"
    );
}

#[test]
fn relative_paths_work_too() {
    let fs = SimFs::new();
    fs.create_dir_all(&p("log")).unwrap();
    fs.create(&p("./log/a"))
        .unwrap()
        .write_at(&[b"1"], 0)
        .unwrap();
    assert_eq!(read(&fs, "log/a"), b"1");
    assert_eq!(fs.list(&p("log")).unwrap(), vec![p("log/a")]);
    fs.sync_dir(&p("./log")).unwrap();
    assert_eq!(read(&fs.crash(CrashMode::KeepAll, 0), "log/a"), b"1");
    fs.create(&p("top")).unwrap();
    assert_eq!(fs.list(&p("")).unwrap(), vec![p("top")]);
}

// ---- faults --------------------------------------------------------------------------

#[test]
fn sync_fails_once_at_the_nth_call() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.sync_data().unwrap(); // before fail_nth: not counted
    fs.fail_nth(FailOp::Sync, 2, false);
    f.write_at(&[b"a"], 0).unwrap(); // other kinds do not count
    f.sync_data().unwrap();
    f.write_at(&[b"b"], 1).unwrap();
    let e = f.sync_data().unwrap_err();
    assert!(is_injected(&e), "{e:?}");
    f.write_at(&[b"c"], 1).unwrap();
    f.sync_data().unwrap();
    f.sync_data().unwrap();
    assert_eq!(read(&fs.crash(CrashMode::DropAll, 0), "/d/a"), b"ac");
}

#[test]
fn sync_fails_persistently() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    fs.fail_nth(FailOp::Sync, 1, true);
    for _ in 0..5 {
        f.write_at(&[b"x"], 0).unwrap();
        assert!(is_injected(&f.sync_data().unwrap_err()));
    }
    fs.sync_dir(&p("/d")).unwrap();
    fs.clear_faults();
    f.sync_data().unwrap();
}

#[test]
fn a_failed_sync_reverts_the_live_image_to_the_durable_one() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.write_at(&[b"safe"], 0).unwrap();
    f.sync_data().unwrap();
    f.write_at(&[b"lost and longer"], 0).unwrap();
    fs.fail_nth(FailOp::Sync, 1, false);
    assert!(f.sync_data().is_err());
    assert_eq!(
        read_file(&*f),
        b"safe",
        "a failed sync drops the dirty pages"
    );
    assert_eq!(fs.unsynced_bytes(), 0);
    assert_eq!(read(&fs.crash(CrashMode::KeepAll, 0), "/d/a"), b"safe");
    // Only that file is affected.
    let g = fs.create(&p("/d/g")).unwrap();
    g.write_at(&[b"g"], 0).unwrap();
    fs.fail_nth(FailOp::Sync, 1, false);
    assert!(f.sync_data().is_err());
    assert_eq!(read_file(&*g), b"g");
    assert_eq!(fs.unsynced_bytes(), 1);
}

#[test]
fn write_fails_once_and_changes_nothing() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.set_len(10).unwrap();
    fs.fail_nth(FailOp::Write, 3, false);
    f.write_at(&[b"a"], 0).unwrap();
    f.sync_data().unwrap(); // not a write
    f.write_mapped(&[b"b"], 1).unwrap();
    let before = fs.unsynced_bytes();
    assert!(is_injected(&f.write_at(&[b"ccc"], 2).unwrap_err()));
    assert_eq!(fs.unsynced_bytes(), before);
    assert_eq!(&read_file(&*f)[..4], b"ab\0\0");
    f.write_at(&[b"d"], 2).unwrap();
    assert_eq!(&read_file(&*f)[..4], b"abd\0");
}

#[test]
fn write_fails_persistently_for_every_write_kind() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.set_len(10).unwrap();
    fs.fail_nth(FailOp::Write, 1, true);
    assert!(is_injected(&f.write_at(&[b"x"], 0).unwrap_err()));
    assert!(is_injected(&f.write_mapped(&[b"x"], 0).unwrap_err()));
    assert!(is_injected(&f.set_len(3).unwrap_err()));
    assert_eq!(read_file(&*f), [0; 10]);
    f.sync_data().unwrap();
    fs.create(&p("/d/other")).unwrap();
    assert_eq!(fs.op_count(FailOp::Write), 4);
    fs.clear_faults();
    f.set_len(3).unwrap();
    assert_eq!(f.len().unwrap(), 3);
}

#[test]
fn sync_dir_fails_once_and_persistently_without_making_names_durable() {
    let fs = fs_with_dir();
    fs.create(&p("/d/a")).unwrap();
    fs.fail_nth(FailOp::SyncDir, 1, false);
    assert!(is_injected(&fs.sync_dir(&p("/d")).unwrap_err()));
    assert!(!exists(&fs.crash(CrashMode::KeepAll, 0), "/d/a"));
    fs.sync_dir(&p("/d")).unwrap();
    assert!(exists(&fs.crash(CrashMode::KeepAll, 0), "/d/a"));
    fs.create(&p("/d/b")).unwrap();
    fs.fail_nth(FailOp::SyncDir, 2, true);
    fs.sync_dir(&p("/d")).unwrap();
    fs.create(&p("/d/c")).unwrap();
    for _ in 0..3 {
        assert!(is_injected(&fs.sync_dir(&p("/d")).unwrap_err()));
    }
    let c = fs.crash(CrashMode::KeepAll, 0);
    assert!(exists(&c, "/d/b") && !exists(&c, "/d/c"));
}

#[test]
fn any_counts_every_call_but_list_len_and_read_at() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.write_at(&[b"abc"], 0).unwrap();
    fs.fail_nth(FailOp::Any, 4, false);
    fs.list(&p("/d")).unwrap();
    f.len().unwrap();
    f.is_empty().unwrap();
    f.read_at(&mut [0; 3], 0).unwrap();
    fs.create_dir_all(&p("/e")).unwrap(); // 1
    f.sync_data().unwrap(); // 2
    fs.sync_dir(&p("/d")).unwrap(); // 3
    assert!(is_injected(&fs.open(&p("/d/a")).unwrap_err())); // 4
    fs.open(&p("/d/a")).unwrap();
    // Persistent: every kind of call fails from the n-th on.
    fs.fail_nth(FailOp::Any, 1, true);
    assert!(is_injected(&fs.create_dir_all(&p("/f")).unwrap_err()));
    assert!(is_injected(&fs.create(&p("/d/n")).unwrap_err()));
    assert!(is_injected(&fs.open(&p("/d/a")).unwrap_err()));
    assert!(is_injected(&fs.rename(&p("/d/a"), &p("/d/b")).unwrap_err()));
    assert!(is_injected(&fs.remove(&p("/d/a")).unwrap_err()));
    assert!(is_injected(&fs.sync_dir(&p("/d")).unwrap_err()));
    assert!(is_injected(&f.set_len(0).unwrap_err()));
    assert!(is_injected(&f.write_at(&[b"x"], 0).unwrap_err()));
    assert!(is_injected(&f.write_mapped(&[b"x"], 0).unwrap_err()));
    assert!(is_injected(&f.sync_data().unwrap_err()));
    // Failed calls changed nothing (the failed sync had nothing to drop).
    assert!(!fs.list(&p("/")).unwrap().contains(&p("/d/n")));
    assert_eq!(fs.list(&p("/d")).unwrap(), vec![p("/d/a")]);
    assert_eq!(read_file(&*f), b"abc");
    fs.clear_faults();
    fs.remove(&p("/d/a")).unwrap();
}

#[test]
fn faults_of_different_kinds_are_armed_independently() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    fs.fail_nth(FailOp::Sync, 1, true);
    fs.fail_nth(FailOp::Write, 2, false);
    f.write_at(&[b"a"], 0).unwrap();
    assert!(f.write_at(&[b"b"], 0).is_err());
    assert!(f.sync_data().is_err());
    // Re-arming a kind replaces its fault.
    fs.fail_nth(FailOp::Sync, 3, false);
    f.sync_data().unwrap();
    f.sync_data().unwrap();
    assert!(f.sync_data().is_err());
    f.sync_data().unwrap();
    fs.fail_nth(FailOp::SyncDir, 1, true);
    fs.clear_faults();
    fs.sync_dir(&p("/d")).unwrap();
}

#[test]
#[should_panic(expected = "n counts from 1")]
fn fail_nth_zero_panics() {
    SimFs::new().fail_nth(FailOp::Sync, 0, false);
}

#[test]
fn counters_count_successful_and_failed_calls() {
    let fs = fs_with_dir(); // create_dir_all: Any
    let f = fs.create(&p("/d/a")).unwrap(); // Any
    f.write_at(&[b"x"], 0).unwrap(); // Write
    f.write_mapped(&[b"y"], 0).unwrap(); // Write
    f.set_len(2).unwrap(); // Write
    f.sync_data().unwrap(); // Sync
    fs.fail_nth(FailOp::Sync, 1, false);
    assert!(f.sync_data().is_err()); // Sync
    fs.sync_dir(&p("/d")).unwrap(); // SyncDir
    fs.list(&p("/d")).unwrap();
    f.len().unwrap();
    f.read_at(&mut [0; 1], 0).unwrap();
    assert_eq!(fs.sync_count(), 2);
    assert_eq!(fs.op_count(FailOp::Sync), 2);
    assert_eq!(fs.op_count(FailOp::Write), 3);
    assert_eq!(fs.op_count(FailOp::SyncDir), 1);
    assert_eq!(fs.op_count(FailOp::Any), 8);
}

#[test]
fn failed_syncs_count_the_unsynced_operations_they_drop() {
    let fs = fs_with_dir();
    let f = fs.create(&p("/d/a")).unwrap();
    f.write_at(&[b"ab"], 0).unwrap();
    f.sync_data().unwrap();
    assert!(fs.dropped_by_failed_syncs().is_empty());
    // A failed sync with nothing unsynced drops nothing.
    fs.fail_nth(FailOp::Sync, 1, false);
    assert!(f.sync_data().is_err());
    assert!(fs.dropped_by_failed_syncs().is_empty());
    f.set_len(8).unwrap();
    f.write_at(&[b"c"], 2).unwrap();
    f.write_mapped(&[b"d"], 3).unwrap();
    fs.fail_nth(FailOp::Sync, 1, false);
    assert!(f.sync_data().is_err());
    let by_name = BTreeMap::from([(p("/d/a"), 3)]);
    assert_eq!(fs.dropped_by_failed_syncs(), by_name);
    // What was dropped is gone from the live image too; later syncs add nothing.
    assert_eq!(f.len().unwrap(), 2);
    f.sync_data().unwrap();
    assert_eq!(fs.dropped_by_failed_syncs(), by_name);
    // Counted under the name the file had when the sync failed.
    fs.rename(&p("/d/a"), &p("/d/b")).unwrap();
    f.write_at(&[b"e"], 0).unwrap();
    fs.fail_nth(FailOp::Sync, 1, false);
    assert!(f.sync_data().is_err());
    let by_name = BTreeMap::from([(p("/d/a"), 3), (p("/d/b"), 1)]);
    assert_eq!(fs.dropped_by_failed_syncs(), by_name);
    // A crash image starts with none.
    assert!(fs
        .crash(CrashMode::KeepAll, 1)
        .dropped_by_failed_syncs()
        .is_empty());
}

// ---- misc ----------------------------------------------------------------------------

#[test]
fn concurrent_writers_to_disjoint_ranges() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.set_len(8 * 1000).unwrap();
    std::thread::scope(|s| {
        for t in 0..8u8 {
            let f = f.clone();
            s.spawn(move || {
                for i in 0..100u64 {
                    f.write_at(&[&[t; 10]], u64::from(t) * 1000 + i * 10)
                        .unwrap();
                    if i % 10 == 0 {
                        f.sync_data().unwrap();
                    }
                }
            });
        }
    });
    f.sync_data().unwrap();
    let img = read(&fs.crash(CrashMode::DropAll, 0), "/d/a");
    for (j, b) in img.iter().enumerate() {
        assert_eq!(*b as usize, j / 1000);
    }
}

#[test]
fn debug_is_short() {
    let fs = fs_with_dir();
    let f = durable_file(&fs);
    f.write_at(&[&[0u8; 10_000]], 0).unwrap();
    let s = format!("{fs:?} {f:?}");
    assert!(s.len() < 200, "{s}");
    assert!(s.contains("unsynced_bytes: 10000"), "{s}");
    let _held = fs.state.lock();
    assert!(format!("{fs:?}").starts_with("SimFs"));
}

#[test]
fn usable_as_a_dyn_file_system() {
    let fs: Arc<dyn FileSystem> = fs_with_dir();
    let f = fs.create(&p("/d/a")).unwrap();
    f.write_at(&[b"ok"], 0).unwrap();
    assert_eq!(read_file(&*fs.open(&p("/d/a")).unwrap()), b"ok");
}
