//! Fuzzes the trace reader that `gpustream replay` and `trace-info` run on
//! trace files: any bytes must end in records or a typed error, within the
//! line bound, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    use gpustream::runtime::trace::{TraceError, TraceReader, MAX_LINE_BYTES};
    let Ok(reader) = TraceReader::new("fuzz.trace", data) else {
        return;
    };
    let mut last_line = 1;
    for rec in reader.with_max_records(1000) {
        match rec {
            Ok((line, _)) => {
                // Lines only go forward, and every record is one line.
                assert!(line > last_line);
                last_line = line;
            }
            Err(TraceError::LineTooLong { limit, .. }) => assert_eq!(limit, MAX_LINE_BYTES),
            Err(_) => {}
        }
    }
});
