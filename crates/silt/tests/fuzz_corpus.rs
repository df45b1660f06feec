//! Replays the fuzz targets' corpora (`fuzz/corpus/*`) and a deterministic batch of random
//! and mutated inputs through the same entry points (`silt::fuzzing`), so `cargo test`
//! checks what the fuzzers found and keeps checking the decoders without a fuzzer.
//!
//! The corpora's seeds are written by `write_seed_corpus` (ignored; run it with
//! `cargo test -p silt --test fuzz_corpus -- --ignored` after a format change).

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use silt::fuzzing::{self, Summary};

const TARGETS: [&str; 4] = ["sstable_block", "sstable_file", "manifest", "write_batch"];

fn corpus_dir(target: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

fn corpus(target: &str) -> Vec<Vec<u8>> {
    let dir = corpus_dir(target);
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        out.push(std::fs::read(e.unwrap().path()).unwrap());
    }
    assert!(!out.is_empty(), "corpus {} is empty", dir.display());
    out
}

/// The valid inputs of `target`, as the engine writes them today.
fn seeds(target: &str) -> Vec<Vec<u8>> {
    let out: Vec<Vec<u8>> = fuzzing::seed_inputs()
        .into_iter()
        .filter(|(t, _, _)| *t == target)
        .map(|(_, _, bytes)| bytes)
        .collect();
    assert!(!out.is_empty(), "no seeds for {target}");
    out
}

fn random_inputs(rng: &mut ChaCha8Rng, n: usize, max_len: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let len = rng.random_range(0..max_len);
            (0..len).map(|_| rng.random()).collect()
        })
        .collect()
}

/// `n` inputs made from valid ones by one to four damages each: flipped bits, bytes set to
/// boundary values, truncation, cut-out or inserted ranges, and 32-bit words (lengths,
/// counts) replaced by boundary values.
fn mutated_inputs(rng: &mut ChaCha8Rng, valid: &[Vec<u8>], n: usize) -> Vec<Vec<u8>> {
    (0..n)
        .map(|_| {
            let mut d = valid[rng.random_range(0..valid.len())].clone();
            for _ in 0..rng.random_range(1..=4) {
                if d.is_empty() {
                    d.push(rng.random());
                    continue;
                }
                let i = rng.random_range(0..d.len());
                match rng.random_range(0..7) {
                    0 => d[i] ^= 1 << rng.random_range(0..8),
                    1 => d[i] = [0, 1, 0x7F, 0x80, 0xFF][rng.random_range(0..5)],
                    2 => d.truncate(i),
                    3 => {
                        let end = rng.random_range(i..=d.len().min(i + 64));
                        d.drain(i..end);
                    }
                    4 => {
                        let extra: Vec<u8> =
                            (0..rng.random_range(1..16)).map(|_| rng.random()).collect();
                        d.splice(i..i, extra);
                    }
                    5 if d.len() >= i + 4 => {
                        let w = [0u32, 1, 0x7F, 0x80, 0xFFFF, 0x7FFF_FFFF, u32::MAX]
                            [rng.random_range(0..7)];
                        d[i..i + 4].copy_from_slice(&w.to_le_bytes());
                    }
                    _ => {
                        let j = rng.random_range(0..d.len());
                        d.swap(i, j);
                    }
                }
            }
            d
        })
        .collect()
}

/// Runs `f` on the corpus, on every seed (which must be accepted), and on `n` random and
/// `n` mutated inputs.
fn replay(target: &str, seed: u64, n: usize, max_len: usize, f: fn(&[u8]) -> Summary) {
    for input in corpus(target) {
        f(&input);
    }
    let valid = seeds(target);
    for (i, s) in valid.iter().enumerate() {
        assert!(f(s).accepted, "{target}: seed {i} was refused");
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut accepted = 0;
    for input in random_inputs(&mut rng, n, max_len)
        .into_iter()
        .chain(mutated_inputs(&mut rng, &valid, n))
    {
        accepted += usize::from(f(&input).accepted);
    }
    // Some damage goes unnoticed by design (a bit of a value, bytes after a torn manifest
    // tail); most must be refused.
    assert!(
        accepted < 2 * n,
        "{target}: every damaged input was accepted"
    );
}

#[test]
fn sstable_block_corpus_and_random_inputs() {
    replay("sstable_block", 1, 2000, 600, fuzzing::sstable_block);
}

#[test]
fn sstable_file_corpus_and_random_inputs() {
    replay("sstable_file", 2, 2000, 600, fuzzing::sstable_file);
}

#[test]
fn manifest_corpus_and_random_inputs() {
    replay("manifest", 3, 2000, 300, fuzzing::manifest);
}

#[test]
fn write_batch_corpus_and_random_inputs() {
    replay("write_batch", 4, 2000, 300, fuzzing::write_batch);
}

/// The seeds are what the engine writes: a refused or empty seed would hollow the fuzzers.
#[test]
fn every_target_has_seeds_that_decode_something() {
    for target in TARGETS {
        let best = seeds(target)
            .iter()
            .map(|s| match target {
                "sstable_block" => fuzzing::sstable_block(s),
                "sstable_file" => fuzzing::sstable_file(s),
                "manifest" => fuzzing::manifest(s),
                _ => fuzzing::write_batch(s),
            })
            .map(|s| s.items)
            .max();
        assert!(best.unwrap_or(0) > 0, "{target}: no seed decodes an item");
    }
}

/// Writes the seeds into `fuzz/corpus/<target>/seed_<name>` (replacing earlier seeds, not
/// the inputs the fuzzers found).
#[test]
#[ignore = "writes files; run after a format change"]
fn write_seed_corpus() {
    for target in TARGETS {
        let dir = corpus_dir(target);
        std::fs::create_dir_all(&dir).unwrap();
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("seed_")
            {
                std::fs::remove_file(p).unwrap();
            }
        }
    }
    for (target, name, bytes) in fuzzing::seed_inputs() {
        assert!(
            bytes.len() < 20 << 10,
            "{target}/{name}: {} bytes",
            bytes.len()
        );
        std::fs::write(corpus_dir(target).join(format!("seed_{name}")), bytes).unwrap();
    }
}
