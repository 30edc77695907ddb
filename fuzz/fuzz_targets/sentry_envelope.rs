//! Envelope framing as the Sentry receiver parses it: any bytes, no panic,
//! and every item's payload is a slice of the input in order.
#![no_main]

use libfuzzer_sys::fuzz_target;

use profcol_sentry::parse_envelope;

fuzz_target!(|bytes: &[u8]| {
    let Ok(env) = parse_envelope(bytes) else {
        return;
    };
    let range = bytes.as_ptr_range();
    let mut last = range.start;
    for item in &env.items {
        let _ = (item.item_type(), item.platform());
        let p = item.payload.as_ptr_range();
        assert!(
            p.start >= last && p.end <= range.end,
            "payloads lie in the input, in order"
        );
        last = p.end;
    }
    let _ = env.count_by_type();
});
