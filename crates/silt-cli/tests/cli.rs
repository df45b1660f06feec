//! The `silt` binary, driven as a user would (assert_cmd): every subcommand, exit codes
//! (0 / 1 error / 2 usage), key formats, the dump/load round trip, a damaged table found
//! by `verify`, `repair` after the manifest is deleted, backups, and a database another
//! handle holds: refused for writes, readable read-only.

use std::path::Path;

use assert_cmd::Command;
use predicates::prelude::*;
use predicates::str::contains;

fn silt(db: &Path) -> Command {
    let mut c = Command::cargo_bin("silt").unwrap();
    c.arg("--db").arg(db);
    c
}

/// An empty database with small log segments: every open walks the log's last segment
/// to its end, which with the default 64 MiB segments takes seconds in a debug build.
fn empty(db: &Path) -> silt::Db {
    silt::Db::builder(db)
        .wal_segment_bytes(64 << 10)
        .open()
        .unwrap()
}

/// A database with a flushed table, a column family, a blob and a log tail.
fn fixture(db: &Path) {
    let d = empty(db);
    let users = d.create_cf("users").unwrap();
    for i in 0..300u32 {
        d.put(format!("k{i:04}").as_bytes(), format!("v{i}").as_bytes())
            .unwrap();
    }
    d.put(b"bin\x00\xff\n", b"\x01\x02").unwrap();
    d.put(b"big", &[9u8; 3000]).unwrap();
    d.put_cf(&users, b"u1", b"ada").unwrap();
    d.flush().unwrap();
    d.put(b"tail", b"in the log").unwrap();
    d.close().unwrap();
}

fn table_files(db: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(db.join("tables"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    v.sort();
    v
}

#[test]
fn help_version_and_usage_errors() {
    let mut c = Command::cargo_bin("silt").unwrap();
    c.arg("--help")
        .assert()
        .success()
        .stdout(contains("Examples:"));
    let mut c = Command::cargo_bin("silt").unwrap();
    c.arg("--version").assert().success();
    let dir = tempfile::tempdir().unwrap();
    silt(dir.path()).arg("--bogus").arg("scan").assert().code(2);
    silt(dir.path()).arg("frobnicate").assert().code(2);
    silt(dir.path())
        .args(["scan", "--limit", "many"])
        .assert()
        .code(2);
    silt(dir.path())
        .args(["--hex", "--escaped", "get", "aa"])
        .assert()
        .code(2);
    silt(dir.path())
        .args(["scan", "--prefix", "a", "--from", "b"])
        .assert()
        .code(2);
    silt(dir.path()).arg("get").assert().code(2);
    // A command that needs --db without it is an error (1), with the reason.
    let mut c = Command::cargo_bin("silt").unwrap();
    c.args(["get", "k"])
        .assert()
        .code(1)
        .stderr(contains("--db"));
}

#[test]
fn data_commands_and_formats() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    silt(&db)
        .args(["put", "a", "1"])
        .assert()
        .code(1)
        .stderr(contains("--create-if-missing"));
    silt(&db)
        .args(["--create-if-missing", "put", "a", "1"])
        .assert()
        .success();
    silt(&db).args(["put", "b", "2"]).assert().success();
    silt(&db)
        .args(["--hex", "put", "00ff", "0a0b"])
        .assert()
        .success();
    silt(&db)
        .args(["--escaped", "put", r"c\tx", r"line\n"])
        .assert()
        .success();
    silt(&db)
        .args(["get", "a"])
        .assert()
        .success()
        .stdout("1\n");
    silt(&db)
        .args(["--hex", "get", "00ff"])
        .assert()
        .success()
        .stdout("0a0b\n");
    silt(&db)
        .args(["--escaped", "get", r"\x00\xff"])
        .assert()
        .success()
        .stdout("\\n\\x0b\n");
    silt(&db)
        .args(["--utf8", "get", "c\tx"])
        .assert()
        .success()
        .stdout("line\n\n");
    silt(&db)
        .args(["get", "zz"])
        .assert()
        .code(1)
        .stderr(contains("not found"));
    silt(&db).args(["delete", "b"]).assert().success();
    silt(&db).args(["get", "b"]).assert().code(1);
    silt(&db).arg("count").assert().success().stdout("3\n");
    silt(&db)
        .args(["scan", "--format", "json"])
        .assert()
        .success()
        .stdout(contains(r#""key": "\\0\\xff""#));
    silt(&db)
        .args(["scan", "--reverse", "--limit", "1", "--format", "json"])
        .assert()
        .success()
        .stdout(contains(r#""key": "c\\tx""#).and(contains(r#""key": "a""#).not()));
    silt(&db)
        .args(["scan", "--from", "a", "--to", "c"])
        .assert()
        .success()
        .stdout(contains("│ a").and(contains("c\\tx").not()));
    silt(&db)
        .args(["scan", "--prefix", "c"])
        .assert()
        .success()
        .stdout(contains("c\\tx"));
    // Column families.
    silt(&db).args(["cf", "create", "users"]).assert().success();
    silt(&db)
        .args(["--cf", "users", "put", "u1", "ada"])
        .assert()
        .success();
    silt(&db)
        .args(["--cf", "users", "count"])
        .assert()
        .success()
        .stdout("1\n");
    silt(&db)
        .args(["--cf", "nope", "get", "x"])
        .assert()
        .code(1)
        .stderr(contains("nope"));
    silt(&db)
        .args(["cf", "list", "--format", "json"])
        .assert()
        .success()
        .stdout(contains("users").and(contains("default")));
    silt(&db).args(["cf", "drop", "users"]).assert().success();
    silt(&db)
        .args(["cf", "list"])
        .assert()
        .success()
        .stdout(contains("users").not());
    silt(&db)
        .args(["compact"])
        .assert()
        .success()
        .stdout(contains("level"));
    silt(&db)
        .args(["compact", "--from", "a", "--to", "b"])
        .assert()
        .success();
    silt(&db)
        .args(["get", "a"])
        .assert()
        .success()
        .stdout("1\n");
}

#[test]
fn dump_load_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let (db, copy) = (dir.path().join("db"), dir.path().join("copy"));
    fixture(&db);
    empty(&copy).close().unwrap();
    let dump = dir.path().join("d.txt");
    silt(&db)
        .arg("dump")
        .arg("--output")
        .arg(&dump)
        .assert()
        .success();
    let text = std::fs::read_to_string(&dump).unwrap();
    assert!(text.starts_with("silt-dump 1\n"));
    silt(&copy)
        .args(["load", "--input"])
        .arg(&dump)
        .assert()
        .success();
    // The same bytes come out again, every family.
    let again = silt(&copy)
        .arg("dump")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(String::from_utf8(again).unwrap(), text);
    let a = silt::Db::open(&db).unwrap();
    let b = silt::Db::open(&copy).unwrap();
    for name in a.list_cfs() {
        let (ca, cb) = (a.cf(&name).unwrap(), b.cf(&name).unwrap());
        let x: Vec<_> = a
            .range_cf::<&[u8], _>(&ca, ..)
            .map(|kv| kv.unwrap())
            .collect();
        let y: Vec<_> = b
            .range_cf::<&[u8], _>(&cb, ..)
            .map(|kv| kv.unwrap())
            .collect();
        assert_eq!(x, y, "column family {name}");
    }
    drop((a, b));
    // A bad line is an error naming it.
    let bad = dir.path().join("bad.txt");
    std::fs::write(&bad, "silt-dump 1\n00\tzz\t00\n").unwrap();
    silt(&copy)
        .args(["load", "--input"])
        .arg(&bad)
        .assert()
        .code(1)
        .stderr(contains("line 2"));
    std::fs::write(&bad, "not a dump\n").unwrap();
    silt(&copy)
        .args(["load", "--input"])
        .arg(&bad)
        .assert()
        .code(1)
        .stderr(contains("line 1"));
}

#[test]
fn inspection_commands() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    fixture(&db);
    silt(&db)
        .args(["wal", "dump"])
        .assert()
        .success()
        .stdout(contains("tail").and(contains("clean")));
    silt(&db)
        .args(["wal", "dump", "--format", "json"])
        .assert()
        .success()
        .stdout(contains(r#""key": "tail""#));
    silt(&db)
        .args(["manifest", "dump"])
        .assert()
        .success()
        .stdout(contains("add_table").and(contains("create_cf id=1 name=\"users\"")));
    silt(&db)
        .arg("stats")
        .assert()
        .success()
        .stdout(contains("blob_files"));
    silt(&db)
        .args(["stats", "--format", "json"])
        .assert()
        .success()
        .stdout(contains("\"levels\""));
    let t = &table_files(&db)[0];
    let mut sst = Command::cargo_bin("silt").unwrap();
    sst.args(["sst", "dump"])
        .arg(t)
        .assert()
        .success()
        .stdout(contains("bloom_probes"));
    for (cmd, want) in [
        ("scan", "k0000"),
        ("index", "offset"),
        ("raw", "properties"),
        ("verify", "ok"),
    ] {
        let mut c = Command::cargo_bin("silt").unwrap();
        c.args(["sst", "dump"])
            .arg(t)
            .args(["--command", cmd])
            .assert()
            .success()
            .stdout(contains(want));
    }
    let mut c = Command::cargo_bin("silt").unwrap();
    c.args(["sst", "dump"])
        .arg(t)
        .args(["--command", "nope"])
        .assert()
        .code(2);
    silt(&db)
        .arg("verify")
        .assert()
        .success()
        .stdout(contains("ok"));
}

#[test]
fn verify_names_a_damaged_table_and_repair_recovers_a_deleted_manifest() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    fixture(&db);
    // Damage: one byte in the first data block of the first table.
    let t = table_files(&db)[0].clone();
    let mut bytes = std::fs::read(&t).unwrap();
    bytes[20] ^= 0x55;
    std::fs::write(&t, &bytes).unwrap();
    silt(&db)
        .arg("verify")
        .assert()
        .code(1)
        .stderr(contains(t.display().to_string()).and(contains("at offset 0")));
    let mut c = Command::cargo_bin("silt").unwrap();
    c.args(["sst", "dump"])
        .arg(&t)
        .args(["--command", "raw"])
        .assert()
        .success()
        .stdout(contains("checksum"));
    bytes[20] ^= 0x55;
    std::fs::write(&t, &bytes).unwrap();

    // Repair after MANIFEST-* and CURRENT are deleted: everything back.
    let before = silt(&db)
        .arg("dump")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    for e in std::fs::read_dir(&db).unwrap() {
        let p = e.unwrap().path();
        let n = p.file_name().unwrap().to_string_lossy().into_owned();
        if n == "CURRENT" || n.starts_with("MANIFEST-") {
            std::fs::remove_file(p).unwrap();
        }
    }
    silt(&db)
        .arg("get")
        .arg("k0001")
        .assert()
        .code(1)
        .stderr(contains("CURRENT"));
    silt(&db)
        .arg("repair")
        .assert()
        .success()
        .stdout(contains("tables_recovered"));
    silt(&db)
        .args(["get", "k0001"])
        .assert()
        .success()
        .stdout("v1\n");
    silt(&db)
        .args(["get", "tail"])
        .assert()
        .success()
        .stdout("in the log\n");
    // Families the log wrote to come back; without the manifest their names are lost.
    let after = silt(&db)
        .arg("dump")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let keys = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .lines()
            .map(|l| l.split('\t').skip(1).collect::<Vec<_>>().join("\t"))
            .collect::<std::collections::BTreeSet<_>>()
    };
    assert_eq!(keys(&before), keys(&after));
}

#[test]
fn checkpoint_and_backups() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    fixture(&db);
    let ck = dir.path().join("ck");
    silt(&db)
        .arg("checkpoint")
        .arg(&ck)
        .assert()
        .success()
        .stdout(contains("files_linked"));
    silt(&ck)
        .args(["get", "tail"])
        .assert()
        .success()
        .stdout("in the log\n");
    silt(&db)
        .arg("checkpoint")
        .arg(&ck)
        .assert()
        .code(1)
        .stderr(contains("exists"));
    let store = dir.path().join("store");
    silt(&db)
        .args(["backup", "create", "--store"])
        .arg(&store)
        .assert()
        .success();
    silt(&db).args(["put", "after", "1"]).assert().success();
    silt(&db)
        .args(["backup", "create", "--store"])
        .arg(&store)
        .assert()
        .success();
    silt(&db)
        .args(["backup", "list", "--format", "json", "--store"])
        .arg(&store)
        .assert()
        .success()
        .stdout(contains("\"id\": 1").and(contains("\"id\": 2")));
    silt(&db)
        .args(["backup", "verify", "--id", "1", "--store"])
        .arg(&store)
        .assert()
        .success();
    let r = dir.path().join("r1");
    silt(&db)
        .args(["backup", "restore", "--id", "1", "--store"])
        .arg(&store)
        .arg("--to")
        .arg(&r)
        .assert()
        .success();
    silt(&r).args(["get", "after"]).assert().code(1);
    silt(&r)
        .args(["get", "k0002"])
        .assert()
        .success()
        .stdout("v2\n");
    silt(&db)
        .args(["backup", "purge", "--keep", "1", "--store"])
        .arg(&store)
        .assert()
        .success();
    silt(&db)
        .args(["backup", "restore", "--id", "1", "--store"])
        .arg(&store)
        .arg("--to")
        .arg(dir.path().join("r1b"))
        .assert()
        .code(1)
        .stderr(contains("no backup 1"));
}

#[test]
fn a_held_database_refuses_writes_and_serves_reads() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    fixture(&db);
    let holder = silt::Db::open(&db).unwrap();
    holder.put(b"live", b"yes").unwrap();
    silt(&db)
        .args(["put", "x", "1"])
        .assert()
        .code(1)
        .stderr(contains("Another process holds this database"));
    silt(&db)
        .arg("repair")
        .assert()
        .code(1)
        .stderr(contains("locked"));
    silt(&db)
        .args(["get", "live"])
        .assert()
        .success()
        .stdout("yes\n");
    silt(&db).arg("count").assert().success();
    silt(&db).arg("verify").assert().success();
    drop(holder);
}

#[test]
fn put_with_a_ttl_expires() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    silt(&db)
        .args(["--create-if-missing", "put", "--ttl", "3600", "long", "1"])
        .assert()
        .success();
    silt(&db)
        .args(["put", "--ttl", "0", "gone", "2"])
        .assert()
        .success();
    silt(&db)
        .args(["get", "long"])
        .assert()
        .success()
        .stdout("1\n");
    // A time to live of 0 s: expired at once, so absent.
    silt(&db).args(["get", "gone"]).assert().code(1);
    silt(&db)
        .args(["put", "--ttl", "soon", "k", "v"])
        .assert()
        .code(2);
}

/// The log's segment file holding `needle`, and where.
fn find_in_log(db: &Path, needle: &[u8]) -> (std::path::PathBuf, usize) {
    for e in std::fs::read_dir(db.join("wal")).unwrap() {
        let p = e.unwrap().path();
        let bytes = std::fs::read(&p).unwrap();
        if let Some(at) = bytes.windows(needle.len()).position(|w| w == needle) {
            return (p, at);
        }
    }
    panic!("{:?} is in no log segment", String::from_utf8_lossy(needle));
}

fn flip_byte(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at] ^= 0x5a;
    std::fs::write(path, bytes).unwrap();
}

/// `wal dump --format json`'s `log` facts.
fn wal_facts(db: &Path) -> serde_json::Value {
    let out = silt(db)
        .args(["wal", "dump", "--format", "json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    v["log"].clone()
}

#[test]
fn wal_dump_tells_a_torn_tail_from_damage_in_the_middle() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let d = empty(&db);
    for i in 0..20u32 {
        d.put(
            format!("key{i:02}").as_bytes(),
            format!("VALUE-{i:02}-payload").as_bytes(),
        )
        .unwrap();
    }
    d.close().unwrap();
    let clean = wal_facts(&db);
    assert_eq!(clean["end"], "clean", "{clean}");
    let records = clean["records"].as_u64().unwrap();
    assert!(records >= 20, "{clean}");

    // The last record damaged: nothing valid follows it, so a torn tail.
    let tail = dir.path().join("tail");
    copy_dir(&db, &tail);
    let (seg, at) = find_in_log(&tail, b"VALUE-19-payload");
    flip_byte(&seg, at + 3);
    let f = wal_facts(&tail);
    assert_eq!(f["end"], "torntail", "{f}");
    assert_eq!(f["valid_records_after"], 0, "{f}");
    assert_eq!(
        f["bad_file"].as_str().unwrap(),
        seg.display().to_string(),
        "{f}"
    );
    assert!(f["bad_offset"].as_u64().unwrap() <= at as u64, "{f}");
    assert_eq!(f["records"].as_u64().unwrap(), records - 1, "{f}");

    // A record in the middle damaged: valid records follow it, so damage, not a tail,
    // and the dump says how many it cannot replay.
    let mid = dir.path().join("mid");
    copy_dir(&db, &mid);
    let (seg, at) = find_in_log(&mid, b"VALUE-05-payload");
    flip_byte(&seg, at + 3);
    let f = wal_facts(&mid);
    let end = f["end"].as_str().unwrap();
    assert!(end == "recordsfollow" || end == "durable_lost", "{f}");
    assert!(f["valid_records_after"].as_u64().unwrap() >= 14, "{f}");
    assert!(f["bad_offset"].as_u64().unwrap() <= at as u64, "{f}");
    assert!(f["records"].as_u64().unwrap() < records, "{f}");
    // The table form names the damage too.
    silt(&mid)
        .args(["wal", "dump"])
        .assert()
        .success()
        .stdout(contains(end).and(contains("valid_records_after")));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else if e.file_name() != "LOCK" {
            std::fs::copy(e.path(), target).unwrap();
        }
    }
}

#[test]
fn load_reads_standard_input() {
    let dir = tempfile::tempdir().unwrap();
    let (db, copy) = (dir.path().join("db"), dir.path().join("copy"));
    fixture(&db);
    empty(&copy).close().unwrap();
    let dump = silt(&db)
        .arg("dump")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    silt(&copy)
        .arg("load")
        .write_stdin(dump.clone())
        .assert()
        .success();
    silt(&copy)
        .args(["get", "tail"])
        .assert()
        .success()
        .stdout("in the log\n");
    silt(&copy)
        .args(["get", "--cf", "users", "u1"])
        .assert()
        .success()
        .stdout("ada\n");
    let again = silt(&copy)
        .arg("dump")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(again, dump);
    // A bad line on standard input names its line, as from a file.
    silt(&copy)
        .arg("load")
        .write_stdin("silt-dump 1\nnot hex\n")
        .assert()
        .code(1)
        .stderr(contains("line 2"));
}

#[test]
fn stats_shows_the_live_counters_of_the_process_holding_the_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    fixture(&db);
    let stats = |db: &Path| -> serde_json::Value {
        let out = silt(db)
            .args(["stats", "--format", "json"])
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        serde_json::from_slice(&out).unwrap()
    };
    // Nobody holds it: the cold view, and no live counters.
    let cold = stats(&db);
    assert!(
        cold["live"]["status"]
            .as_str()
            .unwrap()
            .starts_with("absent"),
        "{cold}"
    );
    assert!(cold["levels"].is_array());

    let holder = silt::Db::builder(&db)
        .wal_segment_bytes(64 << 10)
        .stats_dump_period(Some(std::time::Duration::from_millis(20)))
        .open()
        .unwrap();
    for i in 0..50u32 {
        holder.put(format!("live{i}").as_bytes(), b"x").unwrap();
    }
    let want = holder.stats().user_bytes;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let live = loop {
        let s = stats(&db);
        // "live" also needs the file fresh (within three dump periods): the flush thread
        // may wake late on a loaded machine, so a single read may find it stale.
        if s["live"]["user_bytes"].as_u64().unwrap_or(0) >= want && s["live"]["status"] == "live" {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no live counters: {s}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let l = &live["live"];
    assert_eq!(l["status"], "live", "{live}");
    assert_eq!(l["pid"], std::process::id(), "{live}");
    assert_eq!(l["writer_running"], true, "{live}");
    assert!(
        l["write_amp"].is_number() && l["level.0.tables"].is_u64(),
        "{live}"
    );
    // The table form shows the section too.
    silt(&db)
        .arg("stats")
        .assert()
        .success()
        .stdout(contains("live:").and(contains("user_bytes")));
    holder.close().unwrap();
    let after = stats(&db);
    assert!(
        after["live"]["status"]
            .as_str()
            .unwrap()
            .starts_with("absent"),
        "{after}"
    );
}
