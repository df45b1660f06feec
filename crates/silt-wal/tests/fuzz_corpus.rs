//! Replays the fuzz targets' corpora (`fuzz/corpus/*`) and a deterministic batch of random
//! inputs through the same entry points, so `cargo test` checks what the fuzzers found.

use rand::{Rng, SeedableRng};

fn corpus(name: &str) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(name);
    let mut out = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        out.push(std::fs::read(e.unwrap().path()).unwrap());
    }
    assert!(!out.is_empty(), "corpus {} is empty", dir.display());
    out
}

fn random_inputs(seed: u64, n: usize, max_len: usize) -> Vec<Vec<u8>> {
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let len = rng.random_range(0..max_len);
            (0..len).map(|_| rng.random()).collect()
        })
        .collect()
}

#[test]
fn record_decoder_corpus_and_random_inputs() {
    for input in corpus("record_decoder")
        .into_iter()
        .chain(random_inputs(1, 2000, 512))
    {
        silt_wal::decode::decode_bytes(&input);
    }
}

#[test]
fn recover_corpus_and_random_inputs() {
    for input in corpus("recover")
        .into_iter()
        .chain(random_inputs(2, 300, 400))
    {
        silt_wal::decode::recover_damaged(&input);
    }
}
