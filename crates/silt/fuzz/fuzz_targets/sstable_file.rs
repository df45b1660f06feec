//! A whole table file on arbitrary bytes: opened, read forwards and backwards, searched and
//! point-read. `Corruption`, never a panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    silt::fuzzing::sstable_file(data);
});
