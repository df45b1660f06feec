//! The manifest's unit tests: recovery of every crash point and damage, rewrites, poisoning.

use std::collections::BTreeSet;
use std::sync::Mutex;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use silt_vfs::{CrashMode, FailOp, SimFs};

use super::edit::tests::table;
use super::*;
use crate::key::{make_internal, Kind};
use crate::table_meta::TableMeta;

const DIR: &str = "/db";

const MODES: [CrashMode; 5] = [
    CrashMode::DropAll,
    CrashMode::KeepAll,
    CrashMode::Prefix,
    CrashMode::Sectors,
    CrashMode::Tear,
];

fn dir() -> PathBuf {
    PathBuf::from(DIR)
}

fn new_sim() -> Arc<SimFs> {
    let sim = SimFs::new();
    sim.create_dir_all(&dir()).unwrap();
    sim
}

fn dynfs(sim: &Arc<SimFs>) -> Arc<dyn FileSystem> {
    sim.clone()
}

fn read_file(fs: &dyn FileSystem, path: &Path) -> Vec<u8> {
    let f = fs.open(path).unwrap();
    let mut b = vec![0; f.len().unwrap() as usize];
    f.read_at(&mut b, 0).unwrap();
    b
}

fn write_file(fs: &dyn FileSystem, path: &Path, bytes: &[u8]) {
    let _ = fs.remove(path);
    let f = fs.create(path).unwrap();
    f.write_at(&[bytes], 0).unwrap();
    f.sync_data().unwrap();
}

fn names(fs: &dyn FileSystem) -> Vec<String> {
    let mut v: Vec<String> = fs
        .list(&dir())
        .unwrap()
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn is_corruption(r: &Result<Manifest>) -> bool {
    matches!(r, Err(Error::Corruption { .. }))
}

/// Random but valid edits for a state. Every table covers a user-key range of its own,
/// so tables never overlap, whatever level they move to.
struct Gen {
    rng: ChaCha8Rng,
    seqno: u64,
    ranges: u64,
    log: u64,
}

impl Gen {
    fn new(seed: u64) -> Gen {
        Gen {
            rng: ChaCha8Rng::seed_from_u64(seed),
            seqno: 1,
            ranges: 0,
            log: 0,
        }
    }

    fn table(&mut self, id: u64) -> TableMeta {
        let r = self.ranges;
        self.ranges += 1;
        let pad = "p".repeat(self.rng.random_range(0..120));
        let lo = format!("k{r:08}a{pad}");
        let hi = format!("k{r:08}b{pad}");
        let s0 = self.seqno;
        self.seqno += self.rng.random_range(1..50);
        let entries = self.rng.random_range(1..1000);
        TableMeta {
            id,
            size_bytes: self.rng.random_range(100..1 << 30),
            entries,
            tombstones: self.rng.random_range(0..=entries),
            smallest: make_internal(lo.as_bytes(), self.seqno, Kind::Put),
            largest: make_internal(hi.as_bytes(), s0, Kind::Delete),
            smallest_seqno: s0,
            largest_seqno: self.seqno,
            blobs: Vec::new(),
        }
    }

    fn pick<T: Copy>(&mut self, v: &[T]) -> Option<T> {
        (!v.is_empty()).then(|| v[self.rng.random_range(0..v.len())])
    }

    /// The tables of a state as (cf, level, meta).
    fn tables(st: &ManifestState) -> Vec<(u32, u8, &TableMeta)> {
        st.cfs
            .values()
            .flat_map(|c| {
                c.levels
                    .iter()
                    .enumerate()
                    .flat_map(move |(l, ts)| ts.iter().map(move |t| (c.id, l as u8, t)))
            })
            .collect()
    }

    fn edits(&mut self, st: &ManifestState) -> Vec<Edit> {
        let cfs: Vec<u32> = st.cfs.keys().copied().collect();
        let mut next_id = st.next_table_id;
        let mut edits = Vec::new();
        match self.rng.random_range(0..12) {
            0 => edits.push(Edit::CreateCf {
                id: st.next_cf_id,
                name: format!("cf-{}", st.next_cf_id),
            }),
            1 => {
                let droppable: Vec<u32> = cfs.iter().copied().filter(|&c| c != 0).collect();
                if let Some(id) = self.pick(&droppable) {
                    edits.push(Edit::DropCf { id });
                }
            }
            2..=5 => {
                // A flush: a level-0 table for some column families, then the counters.
                for &cf in &cfs {
                    if self.rng.random_bool(0.6) {
                        let meta = self.table(next_id);
                        next_id += 1;
                        edits.push(Edit::AddTable { cf, level: 0, meta });
                    }
                }
                self.log = self.log.max(st.log_start) + self.rng.random_range(0..10_000);
                edits.push(Edit::LogStart(self.log));
                edits.push(Edit::NextTableId(next_id));
            }
            6..=8 => {
                // A compaction: some tables of one level become new ones a level down.
                let all = Self::tables(st);
                let from: Vec<(u32, u8)> = all
                    .iter()
                    .filter(|(_, l, _)| usize::from(*l) + 1 < LEVELS)
                    .map(|(c, l, _)| (*c, *l))
                    .collect();
                if let Some((cf, level)) = self.pick(&from) {
                    for (c, l, t) in &all {
                        if (*c, *l) == (cf, level) && self.rng.random_bool(0.7) {
                            edits.push(Edit::RemoveTable {
                                cf,
                                level,
                                id: t.id,
                            });
                        }
                    }
                    for _ in 0..self.rng.random_range(0..3) {
                        let meta = self.table(next_id);
                        next_id += 1;
                        edits.push(Edit::AddTable {
                            cf,
                            level: level + 1,
                            meta,
                        });
                    }
                    edits.push(Edit::NextTableId(next_id));
                }
            }
            9 => {
                // A trivial move.
                let all = Self::tables(st);
                if !all.is_empty() {
                    let (cf, level, t) = all[self.rng.random_range(0..all.len())];
                    let to = self.rng.random_range(0..LEVELS) as u8;
                    edits.push(Edit::RemoveTable {
                        cf,
                        level,
                        id: t.id,
                    });
                    edits.push(Edit::AddTable {
                        cf,
                        level: to,
                        meta: t.clone(),
                    });
                }
            }
            10 => edits.push(Edit::NextCfId(st.next_cf_id + self.rng.random_range(0..3))),
            _ => edits.push(Edit::NextTableId(
                st.next_table_id + self.rng.random_range(0..3),
            )),
        }
        if edits.is_empty() {
            edits.push(Edit::LogStart(st.log_start));
        }
        edits
    }
}

// ---- round trips -------------------------------------------------------------------

#[test]
fn create_open_and_every_edit_kind_round_trip() {
    let sim = new_sim();
    let fs = dynfs(&sim);
    assert!(!Manifest::exists(&*fs, Path::new("/nowhere")).unwrap());
    assert!(!Manifest::exists(&*fs, &dir()).unwrap());
    let mut m = Manifest::create(fs.clone(), &dir()).unwrap();
    assert!(Manifest::exists(&*fs, &dir()).unwrap());
    assert_eq!(*m.state(), ManifestState::initial());
    assert_eq!(names(&*fs), ["CURRENT", "MANIFEST-000001"]);
    assert_eq!(
        read_file(&*fs, &dir().join("CURRENT")),
        b"MANIFEST-000001\n"
    );
    let calls = vec![
        vec![Edit::CreateCf {
            id: 1,
            name: "one".into(),
        }],
        vec![
            Edit::AddTable {
                cf: 1,
                level: 0,
                meta: table(1, b"a", b"m", 1, 9),
            },
            Edit::AddTable {
                cf: 0,
                level: 3,
                meta: table(2, b"c", b"d", 1, 9),
            },
            Edit::LogStart(10),
            Edit::NextTableId(3),
        ],
        vec![
            Edit::RemoveTable {
                cf: 1,
                level: 0,
                id: 1,
            },
            Edit::AddTable {
                cf: 1,
                level: 1,
                meta: table(3, b"a", b"m", 1, 9),
            },
        ],
        vec![
            Edit::CreateCf {
                id: 2,
                name: "two".into(),
            },
            Edit::AddTable {
                cf: 2,
                level: 6,
                meta: table(4, b"x", b"y", 10, 20),
            },
            Edit::NextCfId(5),
        ],
        vec![Edit::DropCf { id: 2 }],
        vec![],
    ];
    for edits in calls {
        m.log_and_apply(edits).unwrap();
        let again = Manifest::open(fs.clone(), &dir()).unwrap();
        assert_eq!(again.state(), m.state());
        // Open moved the state into a new file: go on with that one.
        m = again;
    }
    let st = m.state().clone();
    assert_eq!(st.cfs.keys().copied().collect::<Vec<_>>(), [0, 1]);
    assert_eq!((st.log_start, st.next_table_id, st.next_cf_id), (10, 5, 5));
    assert_eq!(m.live_table_ids(), BTreeSet::from([2, 3]));
    drop(m);
    // Power loss right after: everything acknowledged was synced.
    let m = Manifest::open(dynfs(&sim.crash(CrashMode::DropAll, 0)), &dir()).unwrap();
    assert_eq!(*m.state(), st);
    assert!(matches!(
        Manifest::create(fs, &dir()),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn refused_edits_write_nothing_and_do_not_poison() {
    let sim = new_sim();
    let mut m = Manifest::create(dynfs(&sim), &dir()).unwrap();
    let before = (m.state().clone(), m.end_bytes, sim.op_count(FailOp::Any));
    let r = m.log_and_apply(vec![
        Edit::CreateCf {
            id: 1,
            name: "x".into(),
        },
        Edit::RemoveTable {
            cf: 0,
            level: 0,
            id: 77,
        },
    ]);
    assert!(matches!(r, Err(Error::InvalidArgument(ref s)) if s.contains("table 77")));
    assert_eq!(
        (m.state().clone(), m.end_bytes, sim.op_count(FailOp::Any)),
        before
    );
    m.log_and_apply(vec![Edit::LogStart(5)]).unwrap();
    assert_eq!(m.state().log_start, 5);
}

#[test]
fn rewrites_keep_the_state_and_remove_old_files() {
    let sim = new_sim();
    let fs = dynfs(&sim);
    let mut m = Manifest::create(fs.clone(), &dir())
        .unwrap()
        .with_rewrite_bytes(2048);
    let mut gen = Gen::new(1);
    for i in 0..300 {
        let edits = gen.edits(m.state());
        m.log_and_apply(edits).unwrap();
        assert!(m.end_bytes <= 2048.max(2 * m.base_bytes));
        if i % 37 == 0 {
            let again = Manifest::open(fs.clone(), &dir()).unwrap();
            assert_eq!(again.state(), m.state());
            m = again.with_rewrite_bytes(2048);
        }
    }
    assert!(m.number > 5, "only {} rewrites", m.number - 1);
    let current = manifest_name(m.number);
    assert_eq!(names(&*fs), ["CURRENT".to_string(), current.clone()]);
    let again = Manifest::open(dynfs(&sim.crash(CrashMode::DropAll, 0)), &dir()).unwrap();
    assert_eq!(again.state(), m.state());
    assert_eq!(again.number, m.number + 1);
    // A large state: the limit follows the snapshot, so rewrites stay rare.
    let mut m = m.with_rewrite_bytes(1);
    let n = m.number;
    for _ in 0..20 {
        m.log_and_apply(vec![Edit::LogStart(m.state().log_start + 1)])
            .unwrap();
    }
    assert!(m.number - n <= 1);
}

#[test]
fn leftovers_at_open_are_removed_if_older_and_kept_aside_if_newer() {
    let sim = new_sim();
    let fs = dynfs(&sim);
    let m = Manifest::create(fs.clone(), &dir()).unwrap();
    let st = m.state().clone();
    drop(m);
    // A rewrite that crashed before switching CURRENT (or a CURRENT rolled back): not
    // provably garbage, so kept. CURRENT.tmp is garbage; a foreign name is not ours.
    write_file(&*fs, &dir().join("MANIFEST-000002"), b"half written");
    write_file(&*fs, &dir().join(CURRENT_TMP), b"MANIFEST-000002\n");
    write_file(&*fs, &dir().join("MANIFEST-1"), b"not ours");
    let m = Manifest::open(fs.clone(), &dir()).unwrap();
    assert_eq!(*m.state(), st);
    assert_eq!(m.number, 3, "numbered above every manifest present");
    assert_eq!(names(&*fs), ["CURRENT", "MANIFEST-000003", "MANIFEST-1"]);
    assert_eq!(
        read_file(&*fs, &dir().join("lost/MANIFEST-000002")),
        b"half written"
    );
    // An older manifest left by a rewrite that crashed before removing it: garbage.
    drop(m);
    let m = Manifest::open(fs.clone(), &dir()).unwrap();
    let old = dir().join("MANIFEST-000003");
    write_file(&*fs, &old, b"superseded");
    drop(m);
    let m = Manifest::open(fs.clone(), &dir()).unwrap();
    assert_eq!(*m.state(), st);
    assert_eq!(names(&*fs), ["CURRENT", "MANIFEST-000005", "MANIFEST-1"]);
}

// ---- damage --------------------------------------------------------------------------

/// A manifest of several records (no rewrite): its bytes, the end offset of each record
/// and the state after each.
fn sample() -> (Vec<u8>, Vec<u64>, Vec<ManifestState>) {
    let sim = new_sim();
    let fs = dynfs(&sim);
    let mut m = Manifest::create(fs.clone(), &dir()).unwrap();
    let mut ends = vec![m.end_bytes];
    let mut states = vec![m.state().clone()];
    let mut gen = Gen::new(5);
    while states.len() < 7 {
        let edits = gen.edits(m.state());
        m.log_and_apply(edits).unwrap();
        ends.push(m.end_bytes);
        states.push(m.state().clone());
    }
    (read_file(&*fs, &m.path), ends, states)
}

/// A database directory holding `CURRENT` and `MANIFEST-000001` with `bytes`.
fn with_manifest(bytes: &[u8]) -> Arc<dyn FileSystem> {
    let fs = dynfs(&new_sim());
    write_file(&*fs, &dir().join(CURRENT), b"MANIFEST-000001\n");
    write_file(&*fs, &dir().join("MANIFEST-000001"), bytes);
    fs
}

#[test]
fn every_truncation_gives_a_valid_prefix_or_corruption() {
    let (bytes, ends, states) = sample();
    for cut in 0..=bytes.len() {
        let fs = with_manifest(&bytes[..cut]);
        let r = Manifest::open(fs.clone(), &dir());
        let whole = ends.iter().filter(|&&e| e <= cut as u64).count();
        if whole == 0 {
            assert!(is_corruption(&r), "cut {cut}: {r:?}");
            continue;
        }
        let m = r.unwrap_or_else(|e| panic!("cut {cut}: {e}"));
        assert_eq!(*m.state(), states[whole - 1], "cut {cut}");
        // The state went into a new manifest; the old one is gone if it was whole, and
        // kept in lost/ with its torn tail if not; appends follow the prefix.
        assert_eq!(names(&*fs), ["CURRENT", "MANIFEST-000002"], "cut {cut}");
        let kept = fs.open(&dir().join("lost/MANIFEST-000001")).ok();
        if cut as u64 == ends[whole - 1] {
            assert!(kept.is_none(), "cut {cut}");
        } else {
            let kept = read_file(&*fs, &dir().join("lost/MANIFEST-000001"));
            assert_eq!(kept, bytes[..cut], "cut {cut}");
        }
        let mut m = m;
        m.log_and_apply(vec![Edit::LogStart(u64::MAX)]).unwrap();
        let again = Manifest::open(fs, &dir()).unwrap();
        assert_eq!(again.state(), m.state(), "cut {cut}");
    }
}

#[test]
fn byte_flips_are_corruption_unless_in_the_last_record() {
    let (bytes, ends, states) = sample();
    let last_start = ends[ends.len() - 2] as usize;
    for at in 0..bytes.len() {
        for mask in [0x01u8, 0x80, 0xFF] {
            let mut b = bytes.clone();
            b[at] ^= mask;
            let r = Manifest::open(with_manifest(&b), &dir());
            if at >= last_start {
                let m = r.unwrap_or_else(|e| panic!("flip at {at}: {e}"));
                assert_eq!(*m.state(), states[states.len() - 2], "flip at {at}");
            } else {
                let Err(Error::Corruption { file, offset, .. }) = &r else {
                    panic!("flip at {at}: {r:?}");
                };
                assert_eq!(*file, dir().join("MANIFEST-000001"));
                assert!(*offset <= at as u64, "flip at {at}: offset {offset}");
            }
        }
    }
}

#[test]
fn a_checksummed_but_undecodable_or_misfitting_last_record_is_corruption() {
    let (bytes, ends, _) = sample();
    let end = *ends.last().unwrap();
    for payload in [
        vec![99u8, 1, 2, 3],
        vec![TAG_FOR_TEST_DROP, 9, 0, 0, 0],
        vec![5, 1],
    ] {
        let mut b = bytes.clone();
        b.extend_from_slice(&record_header(end, &payload));
        b.extend_from_slice(&payload);
        let r = Manifest::open(with_manifest(&b), &dir());
        let Err(Error::Corruption { offset, reason, .. }) = &r else {
            panic!("{payload:?}: {r:?}");
        };
        assert_eq!(*offset, end, "{reason}");
    }
}

/// `Edit::DropCf`'s tag, spelled out: the test must notice if it ever changes.
const TAG_FOR_TEST_DROP: u8 = 2;

#[test]
fn bad_current_or_missing_manifest_is_corruption_naming_the_file() {
    let (bytes, _, _) = sample();
    let current = dir().join(CURRENT);
    for content in [
        &b""[..],
        b"MANIFEST-000001",
        b"MANIFEST-1\n",
        b"MANIFEST-000000\n",
        b"manifest-000001\n",
        b"MANIFEST-000001\n\n",
        b"\xFF\xFE\n",
        &[b'x'; 100],
    ] {
        let fs = with_manifest(&bytes);
        write_file(&*fs, &current, content);
        let r = Manifest::open(fs, &dir());
        assert!(
            matches!(&r, Err(Error::Corruption { file, .. }) if *file == current),
            "{content:?}: {r:?}"
        );
    }
    let fs = with_manifest(&bytes);
    fs.remove(&current).unwrap();
    assert!(is_corruption(&Manifest::open(fs, &dir())));
    // CURRENT names a manifest that is not there, or that says it is another one.
    let fs = with_manifest(&bytes);
    write_file(&*fs, &current, b"MANIFEST-000002\n");
    let r = Manifest::open(fs.clone(), &dir());
    assert!(
        matches!(&r, Err(Error::Corruption { file, .. }) if *file == dir().join("MANIFEST-000002")),
        "{r:?}"
    );
    write_file(&*fs, &dir().join("MANIFEST-000002"), &bytes);
    let r = Manifest::open(fs, &dir());
    assert!(
        matches!(&r, Err(Error::Corruption { offset: 12, .. })),
        "{r:?}"
    );
}

#[test]
fn garbage_after_a_torn_append_is_never_read_as_a_record() {
    let sim = new_sim();
    let fs = dynfs(&sim);
    let mut m = Manifest::create(fs.clone(), &dir()).unwrap();
    m.log_and_apply(vec![Edit::LogStart(1)]).unwrap();
    let end = m.end_bytes;
    // A torn append: a plausible header, part of its payload.
    let mut payload = Vec::new();
    edit::encode(&[Edit::LogStart(2), Edit::NextTableId(50)], &mut payload);
    let header = record_header(end, &payload);
    m.file.write_at(&[&header, &payload[..5]], end).unwrap();
    m.file.sync_data().unwrap();
    drop(m);
    let mut m = Manifest::open(fs.clone(), &dir()).unwrap();
    assert_eq!(m.state().log_start, 1);
    // The torn file is kept whole in lost/; the state lives on in a new file.
    assert_eq!(
        read_file(&*fs, &dir().join("lost/MANIFEST-000001")).len() as u64,
        end + RECORD_HEADER_BYTES + 5
    );
    assert_eq!(m.number, 2);
    m.log_and_apply(vec![Edit::LogStart(3)]).unwrap();
    drop(m);
    let m = Manifest::open(dynfs(&sim.crash(CrashMode::DropAll, 0)), &dir()).unwrap();
    assert_eq!((m.state().log_start, m.state().next_table_id), (3, 1));
}

// ---- power loss ----------------------------------------------------------------------

/// A file system that takes a crash image of the `SimFs` under it before every call
/// that changes something, labelled with the manifest call in progress.
#[derive(Debug)]
struct Tap {
    sim: Arc<SimFs>,
    log: Arc<Mutex<TapLog>>,
}

#[derive(Debug, Default)]
struct TapLog {
    seed: u64,
    call: usize,
    ops: u64,
    images: Vec<(usize, CrashMode, Arc<SimFs>)>,
}

impl TapLog {
    fn image(&mut self, sim: &SimFs) {
        self.ops += 1;
        let mode = MODES[((self.seed + self.ops) % MODES.len() as u64) as usize];
        let img = sim.crash(mode, self.seed.wrapping_mul(7919) ^ self.ops);
        self.images.push((self.call, mode, img));
    }
}

#[derive(Debug)]
struct TapFile {
    sim: Arc<SimFs>,
    log: Arc<Mutex<TapLog>>,
    file: Arc<dyn File>,
}

impl Tap {
    fn before(&self) {
        self.log.lock().unwrap().image(&self.sim);
    }

    fn wrap(&self, file: Arc<dyn File>) -> Arc<dyn File> {
        Arc::new(TapFile {
            sim: self.sim.clone(),
            log: self.log.clone(),
            file,
        })
    }
}

impl FileSystem for Tap {
    fn create_dir_all(&self, d: &Path) -> io::Result<()> {
        self.sim.create_dir_all(d)
    }
    fn list(&self, d: &Path) -> io::Result<Vec<PathBuf>> {
        self.sim.list(d)
    }
    fn create(&self, p: &Path) -> io::Result<Arc<dyn File>> {
        self.before();
        Ok(self.wrap(self.sim.create(p)?))
    }
    fn open(&self, p: &Path) -> io::Result<Arc<dyn File>> {
        Ok(self.wrap(self.sim.open(p)?))
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        self.before();
        self.sim.rename(from, to)
    }
    fn remove(&self, p: &Path) -> io::Result<()> {
        self.before();
        self.sim.remove(p)
    }
    fn sync_dir(&self, d: &Path) -> io::Result<()> {
        self.before();
        self.sim.sync_dir(d)
    }
    fn lock(&self, p: &Path) -> io::Result<Box<dyn silt_vfs::FileLock>> {
        self.sim.lock(p)
    }
}

impl TapFile {
    fn before(&self) {
        self.log.lock().unwrap().image(&self.sim);
    }
}

impl File for TapFile {
    fn len(&self) -> io::Result<u64> {
        self.file.len()
    }
    fn set_len(&self, len: u64) -> io::Result<()> {
        self.before();
        self.file.set_len(len)
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.file.read_at(buf, offset)
    }
    fn write_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        self.before();
        self.file.write_at(bufs, offset)
    }
    fn sync_data(&self) -> io::Result<()> {
        self.before();
        self.file.sync_data()
    }
}

fn seeds(default: u64) -> u64 {
    std::env::var("SILT_MANIFEST_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Power fails before every I/O call of a workload (create, appends, rewrites), in every
/// crash mode: the recovered state is the acknowledged one, or that plus the call in
/// flight; and the recovered manifest takes and keeps new edits.
#[test]
fn power_loss_at_every_call_recovers_an_acknowledged_prefix() {
    let mut images_checked = 0;
    let mut saw = BTreeSet::new();
    for seed in 0..seeds(300) {
        let sim = new_sim();
        let log = Arc::new(Mutex::new(TapLog {
            seed,
            ..TapLog::default()
        }));
        let tap: Arc<dyn FileSystem> = Arc::new(Tap {
            sim: sim.clone(),
            log: log.clone(),
        });
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut m = Manifest::create(tap, &dir())
            .unwrap()
            .with_rewrite_bytes(rng.random_range(600..3000));
        let mut states = vec![m.state().clone()];
        let mut gen = Gen::new(seed);
        let calls = rng.random_range(1..40);
        for i in 1..=calls {
            log.lock().unwrap().call = i;
            let edits = gen.edits(m.state());
            m.log_and_apply(edits).unwrap();
            states.push(m.state().clone());
        }
        log.lock().unwrap().call = calls + 1;
        log.lock().unwrap().image(&sim);
        let images = std::mem::take(&mut log.lock().unwrap().images);
        for (k, (call, mode, img)) in images.into_iter().enumerate() {
            let ctx = format!("seed {seed}, image {k}, call {call}, {mode:?}");
            let fs = dynfs(&img);
            if call == 0 && !Manifest::exists(&*fs, &dir()).unwrap() {
                continue; // `create` never returned: no database is fine.
            }
            let mut got = Manifest::open(fs.clone(), &dir())
                .unwrap_or_else(|e| panic!("{ctx}: open failed: {e}"));
            let acked = &states[call.saturating_sub(1)];
            let ok = got.state() == acked || states.get(call) == Some(got.state());
            assert!(ok, "{ctx}: recovered state is not acknowledged");
            saw.insert((got.state() == acked, mode == CrashMode::Tear));
            images_checked += 1;
            if k % 4 == 0 {
                // The recovered manifest appends after its valid prefix, durably.
                let edits = gen.edits(got.state());
                got.log_and_apply(edits).unwrap();
                let want = got.state().clone();
                drop(got);
                let again = Manifest::open(dynfs(&img.crash(CrashMode::DropAll, 0)), &dir())
                    .unwrap_or_else(|e| panic!("{ctx}: second open failed: {e}"));
                assert_eq!(*again.state(), want, "{ctx}: second recovery");
            }
        }
    }
    assert!(images_checked > 1000, "only {images_checked} crash images");
    // Both outcomes happen: the harness is not vacuous.
    assert!(
        saw.contains(&(true, true)) && saw.contains(&(false, true)),
        "{saw:?}"
    );
}

// ---- I/O errors ----------------------------------------------------------------------

const FAIL_CALLS: usize = 60;

/// Runs the workload with the `n`-th call of kind `op` failing once; checks the failure
/// and poisoning, then reopening. Whether the fault surfaced.
fn run_with_fault(op: FailOp, n: u64) -> bool {
    let sim = new_sim();
    let mut m = Manifest::create(dynfs(&sim), &dir())
        .unwrap()
        .with_rewrite_bytes(1500);
    sim.fail_nth(op, n, false);
    let mut gen = Gen::new(99);
    let mut acked = m.state().clone();
    let mut failed = None;
    for i in 0..FAIL_CALLS {
        let edits = gen.edits(m.state());
        match m.log_and_apply(edits.clone()) {
            Ok(()) => acked = m.state().clone(),
            Err(Error::Io { .. }) => {
                assert_eq!(
                    *m.state(),
                    acked,
                    "{op:?} {n}: state changed by a failed call"
                );
                let mut a = Applier::new(acked.clone());
                edits.iter().for_each(|e| a.apply(e).unwrap());
                failed = Some((i, a.into_state()));
                break;
            }
            Err(e) => panic!("{op:?} {n}: unexpected {e}"),
        }
    }
    let Some((_, inflight)) = failed else {
        return false;
    };
    let ops = sim.op_count(FailOp::Any);
    for _ in 0..3 {
        let edits = gen.edits(m.state());
        assert!(matches!(m.log_and_apply(edits), Err(Error::Poisoned)));
        assert!(matches!(
            m.log_and_apply(vec![Edit::LogStart(u64::MAX)]),
            Err(Error::Poisoned)
        ));
    }
    assert_eq!(
        sim.op_count(FailOp::Any),
        ops,
        "{op:?} {n}: I/O after poisoning"
    );
    assert_eq!(*m.state(), acked);
    drop(m);
    for img in [
        sim.clone(),
        sim.crash(CrashMode::DropAll, n),
        sim.crash(CrashMode::KeepAll, n),
    ] {
        let got = Manifest::open(dynfs(&img), &dir())
            .unwrap_or_else(|e| panic!("{op:?} {n}: reopen failed: {e}"));
        assert!(
            *got.state() == acked || *got.state() == inflight,
            "{op:?} {n}: reopened state is neither acknowledged nor in flight"
        );
    }
    true
}

#[test]
fn every_failed_fdatasync_write_or_directory_sync_poisons() {
    for op in [FailOp::Sync, FailOp::Write, FailOp::SyncDir, FailOp::Any] {
        // Count the calls of this kind the workload makes.
        let sim = new_sim();
        let mut m = Manifest::create(dynfs(&sim), &dir())
            .unwrap()
            .with_rewrite_bytes(1500);
        let before = sim.op_count(op);
        let mut gen = Gen::new(99);
        for _ in 0..FAIL_CALLS {
            let edits = gen.edits(m.state());
            m.log_and_apply(edits).unwrap();
        }
        let total = sim.op_count(op) - before;
        let rewrites = m.number - 1;
        assert!(rewrites >= 2, "only {rewrites} rewrites");
        assert!(total >= 2, "{op:?}: only {total} calls");
        let mut surfaced = 0;
        for n in 1..=total {
            surfaced += u64::from(run_with_fault(op, n));
        }
        // Only removing the old manifest after a rewrite may fail unnoticed.
        match op {
            FailOp::Any => assert_eq!(surfaced + rewrites, total, "{op:?}"),
            _ => assert_eq!(surfaced, total, "{op:?}"),
        }
    }
}

#[test]
fn create_failures_are_io_errors_and_leave_no_database_or_a_whole_one() {
    let sim = new_sim();
    let base = sim.op_count(FailOp::Any);
    Manifest::create(dynfs(&sim), &dir()).unwrap();
    let total = sim.op_count(FailOp::Any) - base;
    for n in 1..=total {
        let sim = new_sim();
        sim.fail_nth(FailOp::Any, n, true);
        assert!(matches!(
            Manifest::create(dynfs(&sim), &dir()),
            Err(Error::Io { .. })
        ));
        sim.clear_faults();
        let crashed = sim.crash(CrashMode::KeepAll, n);
        for fs in [dynfs(&sim), dynfs(&crashed)] {
            if Manifest::exists(&*fs, &dir()).unwrap() {
                let m = Manifest::open(fs, &dir()).unwrap();
                assert_eq!(*m.state(), ManifestState::initial());
            } else {
                // A retry succeeds over the leftovers.
                Manifest::create(fs, &dir()).unwrap();
            }
        }
    }
}

#[test]
fn names_round_trip_and_only_canonical_ones_parse() {
    assert_eq!(manifest_name(1), "MANIFEST-000001");
    assert_eq!(parse_manifest_name("MANIFEST-000001"), Some(1));
    assert_eq!(parse_manifest_name("MANIFEST-1234567"), Some(1_234_567));
    assert_eq!(
        parse_manifest_name(&manifest_name(u64::MAX)),
        Some(u64::MAX)
    );
    for bad in [
        "MANIFEST-",
        "MANIFEST-1",
        "MANIFEST-000000",
        "MANIFEST-0000001",
        "MANIFEST-+00001",
        "MANIFEST-99999999999999999999",
        "CURRENT",
    ] {
        assert_eq!(parse_manifest_name(bad), None, "{bad}");
    }
}
