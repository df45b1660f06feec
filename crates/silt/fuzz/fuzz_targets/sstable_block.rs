//! One table block on arbitrary bytes, read as decoded contents, as a stored block (trailer
//! checked, then decompressed) and as a freshly sealed payload; every block that decodes is
//! walked both ways and searched: an error, never a panic.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    silt::fuzzing::sstable_block(data);
});
