//! Unit tests of `manifest::edit`: every edit kind round-trips, decoding refuses truncations
//! and bad tags without panicking, and applying checks that edits fit the state.

use super::*;
use crate::key::{make_internal, Kind};

/// A table covering user keys `lo..=hi` with seqnos `s0..=s1`.
pub(crate) fn table(id: u64, lo: &[u8], hi: &[u8], s0: u64, s1: u64) -> TableMeta {
    TableMeta {
        id,
        size_bytes: id.wrapping_add(1000),
        entries: 10,
        tombstones: 2,
        smallest: make_internal(lo, s1, Kind::Put),
        largest: make_internal(hi, s0, Kind::Delete),
        smallest_seqno: s0,
        largest_seqno: s1,
        blobs: Vec::new(),
    }
}

fn blob(id: u64, value_bytes: u64) -> BlobMeta {
    BlobMeta {
        id,
        size_bytes: value_bytes + 100,
        records: 3,
        value_bytes,
        log: None,
    }
}

/// A log blob of a 64 KiB segment 3 owning `from..to`.
fn log_blob(id: u64, from: u64, to: u64) -> BlobMeta {
    BlobMeta {
        id,
        size_bytes: 64 << 10,
        records: 1,
        value_bytes: to.saturating_sub(from),
        log: Some(crate::table_meta::LogSpan {
            segment: 3,
            from,
            to,
        }),
    }
}

#[test]
fn a_log_blob_round_trips_with_its_span_and_a_bad_span_is_refused() {
    let s = apply_all(
        ManifestState::empty(),
        &[Edit::CreateCf {
            id: 0,
            name: "default".into(),
        }],
    )
    .unwrap();
    let with = |blob: BlobMeta| {
        let id = blob.id;
        vec![
            Edit::AddBlob(blob),
            Edit::AddTable {
                cf: 0,
                level: 0,
                meta: TableMeta {
                    blobs: vec![BlobRef { id, bytes: 100 }],
                    ..table(id + 1, b"a", b"b", 1, 2)
                },
            },
        ]
    };
    let good = apply_all(s.clone(), &with(log_blob(5, 64, 8192))).unwrap();
    assert_eq!(good.blobs[&5].log.unwrap().to, 8192);
    // The snapshot keeps the span.
    assert_eq!(
        apply_all(ManifestState::empty(), &good.snapshot()).unwrap(),
        good
    );
    // A span before the segment header, empty, past the file, or disagreeing with the
    // value bytes is refused.
    for (bad, why) in [
        (log_blob(5, 0, 8192), "not inside"),
        (log_blob(5, 100, 100), "not inside"),
        (log_blob(5, 100, (64 << 10) + 1), "not inside"),
        (
            BlobMeta {
                value_bytes: 99,
                ..log_blob(5, 64, 8192)
            },
            "span of",
        ),
    ] {
        let e = apply_all(s.clone(), &with(bad)).unwrap_err();
        assert!(e.contains(why), "{e}");
    }
}

fn every_kind() -> Vec<Edit> {
    vec![
        Edit::CreateCf {
            id: 3,
            name: "users ✓".into(),
        },
        Edit::DropCf { id: 7 },
        Edit::AddTable {
            cf: 3,
            level: 6,
            meta: table(u64::MAX - 1, b"", &[0xFF; 300], 0, key::MAX_SEQNO),
        },
        Edit::RemoveTable {
            cf: u32::MAX,
            level: 0,
            id: 42,
        },
        Edit::LogStart(u64::MAX),
        Edit::NextTableId(9),
        Edit::NextCfId(4),
        Edit::AddBlob(blob(77, 5000)),
        Edit::AddBlob(log_blob(79, 64, 4096)),
        Edit::AddTable {
            cf: 0,
            level: 2,
            meta: TableMeta {
                blobs: vec![
                    BlobRef { id: 5, bytes: 1 },
                    BlobRef {
                        id: 77,
                        bytes: 4000,
                    },
                ],
                ..table(78, b"a", b"b", 1, 2)
            },
        },
    ]
}

#[test]
fn every_edit_kind_round_trips() {
    let edits = every_kind();
    let mut buf = Vec::new();
    encode(&edits, &mut buf);
    assert_eq!(decode(&buf).unwrap(), edits);
    for e in &edits {
        let mut one = Vec::new();
        encode(std::slice::from_ref(e), &mut one);
        assert_eq!(decode(&one).unwrap(), vec![e.clone()]);
    }
}

#[test]
fn decode_rejects_every_truncation_and_bad_tags_without_panicking() {
    let mut buf = Vec::new();
    encode(&every_kind(), &mut buf);
    for cut in 0..buf.len() {
        // A cut at an edit boundary decodes as fewer edits; anywhere else is an error.
        if let Ok(got) = decode(&buf[..cut]) {
            assert!(got.len() < every_kind().len() && !got.is_empty());
        }
    }
    assert!(decode(&[]).unwrap_err().contains("no edit"));
    assert!(decode(&[0]).unwrap_err().contains("unknown edit tag 0"));
    assert!(decode(&[99, 1, 2])
        .unwrap_err()
        .contains("unknown edit tag 99"));
    // A length prefix larger than the limit is refused before it is used.
    let mut huge = vec![TAG_CREATE_CF, 0, 0, 0, 0];
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode(&huge).unwrap_err().contains("more than"));
    // Not UTF-8.
    let mut bad = vec![TAG_CREATE_CF, 0, 0, 0, 0, 1, 0, 0, 0, 0xFF];
    assert!(decode(&bad).is_err());
    bad[9] = b'x';
    assert!(decode(&bad).is_ok());
}

#[test]
fn decode_survives_random_bytes() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
    let mut good = Vec::new();
    encode(&every_kind(), &mut good);
    for _ in 0..20_000 {
        let mut b = good.clone();
        for _ in 0..rng.random_range(1..4) {
            let i = rng.random_range(0..b.len());
            b[i] = rng.random();
        }
        b.truncate(rng.random_range(0..=b.len()));
        let _ = decode(&b);
        let n = rng.random_range(0..64);
        let noise: Vec<u8> = (0..n).map(|_| rng.random()).collect();
        let _ = decode(&noise);
    }
}

fn apply_all(state: ManifestState, edits: &[Edit]) -> Result<ManifestState, String> {
    let mut a = Applier::new(state);
    for e in edits {
        a.apply(e)?;
    }
    a.finish_record()?;
    Ok(a.into_state())
}

#[test]
fn initial_state_and_snapshot_rebuild_it() {
    let s = ManifestState::initial();
    assert_eq!(s.cfs.len(), 1);
    assert_eq!(s.cfs[&0].name, "default");
    assert_eq!(s.cfs[&0].levels.len(), LEVELS);
    assert_eq!((s.log_start, s.next_table_id, s.next_cf_id), (0, 1, 1));
    let s = apply_all(
        s,
        &[
            Edit::CreateCf {
                id: 1,
                name: "a".into(),
            },
            Edit::CreateCf {
                id: 5,
                name: "b".into(),
            },
            Edit::AddTable {
                cf: 1,
                level: 0,
                meta: table(3, b"a", b"z", 1, 5),
            },
            Edit::AddTable {
                cf: 5,
                level: 2,
                meta: table(4, b"a", b"c", 1, 5),
            },
            Edit::DropCf { id: 5 },
            Edit::LogStart(77),
        ],
    )
    .unwrap();
    assert_eq!(s.next_cf_id, 6);
    assert_eq!(s.next_table_id, 5);
    let rebuilt = apply_all(ManifestState::empty(), &s.snapshot()).unwrap();
    assert_eq!(rebuilt, s);
    // The dropped column family's id stays taken.
    assert!(apply_all(
        rebuilt,
        &[Edit::CreateCf {
            id: 5,
            name: "c".into()
        }]
    )
    .unwrap_err()
    .contains("never reused"));
}

#[test]
fn levels_keep_their_order() {
    let mut edits = Vec::new();
    for (id, s1) in [(1, 10), (2, 30), (3, 20), (4, 30)] {
        edits.push(Edit::AddTable {
            cf: 0,
            level: 0,
            meta: table(id, b"a", b"z", s1 - 5, s1),
        });
    }
    for (id, lo, hi) in [(10, b"m", b"p"), (11, b"a", b"c"), (12, b"x", b"z")] {
        edits.push(Edit::AddTable {
            cf: 0,
            level: 1,
            meta: table(id, lo, hi, 1, 2),
        });
    }
    let s = apply_all(ManifestState::initial(), &edits).unwrap();
    let ids = |l: usize| s.cfs[&0].levels[l].iter().map(|t| t.id).collect::<Vec<_>>();
    assert_eq!(ids(0), vec![4, 2, 3, 1]);
    assert_eq!(ids(1), vec![11, 10, 12]);
    assert_eq!(s.next_table_id, 13);
}

#[test]
fn invalid_edits_are_refused() {
    let base = apply_all(
        ManifestState::initial(),
        &[
            Edit::AddTable {
                cf: 0,
                level: 1,
                meta: table(5, b"d", b"f", 1, 2),
            },
            Edit::LogStart(100),
        ],
    )
    .unwrap();
    let cases: Vec<(Vec<Edit>, &str)> = vec![
        (
            vec![Edit::RemoveTable {
                cf: 0,
                level: 2,
                id: 5,
            }],
            "not in level 2",
        ),
        (
            vec![Edit::AddTable {
                cf: 9,
                level: 0,
                meta: table(6, b"a", b"b", 1, 1),
            }],
            "no column family 9",
        ),
        (
            vec![Edit::AddTable {
                cf: 0,
                level: 0,
                meta: table(5, b"a", b"b", 1, 1),
            }],
            "already in the manifest",
        ),
        (
            vec![Edit::AddTable {
                cf: 0,
                level: 7,
                meta: table(6, b"a", b"b", 1, 1),
            }],
            "not below 7",
        ),
        (
            vec![Edit::AddTable {
                cf: 0,
                level: 1,
                meta: table(6, b"a", b"d", 1, 1),
            }],
            "overlap",
        ),
        (
            vec![Edit::AddTable {
                cf: 0,
                level: 0,
                meta: table(6, b"b", b"a", 1, 1),
            }],
            "smallest key is above",
        ),
        (
            vec![Edit::AddTable {
                cf: 0,
                level: 0,
                meta: TableMeta {
                    smallest: b"short".to_vec(),
                    ..table(6, b"a", b"b", 1, 1)
                },
            }],
            "smallest key has 5 bytes",
        ),
        (
            vec![Edit::AddTable {
                cf: 0,
                level: 0,
                meta: table(6, b"a", b"b", 3, 1),
            }],
            "smallest seqno",
        ),
        (vec![Edit::DropCf { id: 0 }], "cannot be dropped"),
        (vec![Edit::DropCf { id: 4 }], "no column family 4"),
        (
            vec![Edit::CreateCf {
                id: 1,
                name: "default".into(),
            }],
            "exists",
        ),
        (
            vec![Edit::CreateCf {
                id: 0,
                name: "x".into(),
            }],
            "column family 0 exists",
        ),
        (
            vec![Edit::CreateCf {
                id: 1,
                name: String::new(),
            }],
            "1 to 255 bytes",
        ),
        (
            vec![Edit::CreateCf {
                id: u32::MAX,
                name: "x".into(),
            }],
            "out of range",
        ),
        (vec![Edit::LogStart(99)], "move back"),
    ];
    for (edits, want) in cases {
        let err = apply_all(base.clone(), &edits).unwrap_err();
        assert!(err.contains(want), "{edits:?}: {err}");
    }
    // A compaction replaces overlapping tables in one record: checked as a whole.
    let s = apply_all(
        base,
        &[
            Edit::AddTable {
                cf: 0,
                level: 1,
                meta: table(6, b"a", b"e", 1, 3),
            },
            Edit::RemoveTable {
                cf: 0,
                level: 1,
                id: 5,
            },
            Edit::NextTableId(3),
        ],
    )
    .unwrap();
    assert_eq!(s.next_table_id, 7, "a high-water mark never moves back");
}

#[test]
fn blob_files_live_while_a_table_points_into_them() {
    let s = ManifestState::initial();
    let with = |id, refs: Vec<BlobRef>| Edit::AddTable {
        cf: 0,
        level: 0,
        meta: TableMeta {
            blobs: refs,
            ..table(id, b"a", b"b", id, id)
        },
    };
    // A table may not point into a blob file the state lacks, nor past its value bytes.
    assert!(
        apply_all(s.clone(), &[with(5, vec![BlobRef { id: 5, bytes: 10 }])])
            .unwrap_err()
            .contains("not in the manifest")
    );
    assert!(apply_all(
        s.clone(),
        &[
            Edit::AddBlob(blob(5, 10)),
            with(5, vec![BlobRef { id: 5, bytes: 11 }])
        ]
    )
    .unwrap_err()
    .contains("holds 10"));
    // Unsorted or repeated references are refused.
    let s2 = apply_all(
        s.clone(),
        &[
            Edit::AddBlob(blob(5, 10)),
            Edit::AddBlob(blob(6, 10)),
            with(
                6,
                vec![BlobRef { id: 5, bytes: 1 }, BlobRef { id: 6, bytes: 1 }],
            ),
        ],
    )
    .unwrap();
    assert!(apply_all(
        s2.clone(),
        &[with(
            7,
            vec![BlobRef { id: 6, bytes: 1 }, BlobRef { id: 5, bytes: 1 }]
        )]
    )
    .unwrap_err()
    .contains("ascending"));
    // Two blob files, one table pointing into both; next_table_id passed both.
    assert_eq!(s2.blobs.len(), 2);
    assert!(s2.next_table_id >= 7);
    // A blob file nobody points into leaves at the end of its record.
    let s3 = apply_all(s2.clone(), &[Edit::AddBlob(blob(8, 10))]).unwrap();
    assert_eq!(s3.blobs.len(), 2);
    // A second table into blob 5; removing the first keeps 5 (still pointed at), drops 6.
    let s4 = apply_all(s2, &[with(9, vec![BlobRef { id: 5, bytes: 2 }])]).unwrap();
    let s5 = apply_all(
        s4.clone(),
        &[Edit::RemoveTable {
            cf: 0,
            level: 0,
            id: 6,
        }],
    )
    .unwrap();
    assert_eq!(s5.blobs.keys().copied().collect::<Vec<_>>(), vec![5]);
    // The same blob id twice is refused.
    assert!(apply_all(s4.clone(), &[Edit::AddBlob(blob(5, 10))])
        .unwrap_err()
        .contains("already"));
    // A snapshot rebuilds the blob files with the tables.
    let rebuilt = apply_all(ManifestState::empty(), &s4.snapshot()).unwrap();
    assert_eq!(rebuilt, s4);
}
