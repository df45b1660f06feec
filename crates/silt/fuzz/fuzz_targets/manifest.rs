//! The manifest reader on arbitrary bytes, as the manifest file, as `CURRENT` and as one
//! sealed record's payload: `Corruption`, never a panic; a manifest that opens reopens to
//! the same state.
#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    silt::fuzzing::manifest(data);
});
