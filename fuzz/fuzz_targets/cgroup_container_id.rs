//! `/proc/<pid>/cgroup` as k8sattributes reads it on the node to find a
//! process's container: any text, no panic, and an id found is 64
//! lowercase hex digits that the text holds, not part of a longer run.
#![no_main]

use libfuzzer_sys::fuzz_target;

use profcol_processors::k8sattributes::container_in_cgroup;

fuzz_target!(|bytes: &[u8]| {
    let Ok(text) = std::str::from_utf8(bytes) else {
        return;
    };
    let Some(id) = container_in_cgroup(text) else {
        return;
    };
    assert_eq!(id.len(), 64);
    assert!(id.bytes().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)));
    let lower = text.to_ascii_lowercase();
    assert!(
        lower.match_indices(&id).any(|(i, _)| {
            let b = lower.as_bytes();
            let before = i == 0 || !b[i - 1].is_ascii_hexdigit();
            let after = b.get(i + 64).is_none_or(|c| !c.is_ascii_hexdigit());
            before && after
        }),
        "the id is a whole run of hex digits"
    );
});
