//! Unit tests of the symbolizer's parts; real binaries are in
//! tests/it/symbolizer.rs.

use std::time::{Duration, Instant};

use super::debuginfod::NegativeCache;
use super::elf::{BuildId, Identity};
use super::*;

#[test]
fn build_ids_are_parsed_and_forged_ones_refused() {
    assert_eq!(parse_hex("0aFf"), Some(vec![0x0a, 0xff]));
    for bad in ["", "abc", "zz", "é1", &"00".repeat(65)] {
        assert_eq!(parse_hex(bad), None, "{bad:?}");
    }
    assert_eq!(
        BuildId::Gnu(vec![0xab, 0x01]).hex().as_deref(),
        Some("ab01")
    );
    assert_eq!(BuildId::Go("x/y".into()).hex(), None);
}

#[test]
fn file_offsets_map_through_the_segment_holding_them() {
    let id = Identity {
        loads: vec![(0, 0x400000, 0x1000), (0x1000, 0x401000, 0x2000)],
        ..Default::default()
    };
    assert_eq!(id.vaddr_of_offset(0x10), Some(0x400010));
    assert_eq!(id.vaddr_of_offset(0x1800), Some(0x401800));
    assert_eq!(id.vaddr_of_offset(0x3000), None);
}

#[test]
fn negative_cache_expires_and_stays_bounded() {
    let mut n = NegativeCache::new(Duration::from_secs(10), 3);
    let t = Instant::now();
    for k in ["a", "b", "c", "d"] {
        n.insert(k.into(), t);
    }
    assert!(n.contains("d", t));
    assert!(n.bytes() <= 3 * 96);
    assert!(!n.contains("d", t + Duration::from_secs(11)));
}

#[test]
fn frame_types_other_than_native_and_kernel_are_left_alone() {
    use profcol_model::proto::{AnyValue, KeyValueAndUnit};
    let dict = ProfilesDictionary {
        string_table: vec!["".into(), FRAME_TYPE.into()],
        attribute_table: vec![
            KeyValueAndUnit::default(),
            KeyValueAndUnit {
                key_strindex: 1,
                value: Some(AnyValue {
                    value: Some(A::StringValue("python".into())),
                }),
                unit_strindex: 0,
            },
        ],
        ..Default::default()
    };
    assert_eq!(frame_type(&dict, &[1]), Some("python"));
    assert_eq!(frame_type(&dict, &[0, 9]), None);
}

#[test]
fn truncated_and_non_elf_files_are_refused_without_panic() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(
        resolve_file_bytes(dir.path(), b"root:x:0:0::/root:/bin/sh\n", &[1]),
        0
    );
    assert_eq!(resolve_file_bytes(dir.path(), b"\x7fELF", &[1]), 0);
    // This test binary (with DWARF), cut short at several lengths.
    let exe = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    for len in [64, 4096, exe.len() / 3, exe.len() - 1] {
        let _ = resolve_file_bytes(dir.path(), &exe[..len], &[0x1000, u64::MAX]);
    }
}

/// addr2line probes `[addr, addr + 1)`: the last address overflowed it
/// (found by fuzzing `symbolizer_elf`; a panic in debug builds).
#[test]
fn the_last_address_is_looked_up_without_panic() {
    let dir = tempfile::tempdir().unwrap();
    let elf = include_bytes!("../../../fuzz/seeds/symbolizer_elf/c-inline-O2-g.elf");
    let _ = resolve_file_bytes(dir.path(), elf, &[u64::MAX]);
    let found = include_bytes!("../../../fuzz/seeds/symbolizer_elf/last-address-overflow");
    let _ = resolve_file_bytes(dir.path(), found, &[u64::MAX]);
}

/// A symbol of size 0 (`_fini`, hand-written assembly) names addresses up
/// to the next symbol and within its section, as binutils does, not every
/// address past it: an address in `.fini_array` (data) is not `_fini`.
#[test]
fn a_size_zero_symbol_reaches_only_the_end_of_its_section() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("prog");
    let elf = include_bytes!("../../../fuzz/seeds/symbolizer_elf/c-inline-O2-g.elf");
    std::fs::write(&path, elf).unwrap();
    let info = elf::DebugInfo::load(&path, 1 << 20, &elf::Companions::default()).unwrap();
    let names = |addr: u64| -> Vec<String> {
        info.resolve(addr)
            .iter()
            .map(|f| f.name.to_string())
            .collect()
    };
    // .fini is 0x1188..0x1191.
    assert_eq!(names(0x1190), ["_fini"]);
    assert!(names(0x1191).is_empty(), "{:?}", names(0x1191));
    assert!(names(0x3e08).is_empty());
    assert!(names(u64::MAX - 1).is_empty());
}

#[test]
fn files_are_found_by_name_and_new_ones_after_a_rescan() {
    use super::names::{Names, RESCAN};
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("a/b")).unwrap();
    std::fs::write(root.join("a/b/libx.so.1"), b"x").unwrap();
    std::fs::write(root.join("libx.so.1"), b"x").unwrap();
    // A symlinked directory is not followed (it could loop or leave).
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("liby.so"), b"y").unwrap();
    std::os::unix::fs::symlink(other.path(), root.join("link")).unwrap();
    let roots = [root.clone()];
    let mut n = Names::default();
    let t = Instant::now();
    let mut found = n.find(&roots, "libx.so.1", t);
    found.sort();
    assert_eq!(found, [root.join("a/b/libx.so.1"), root.join("libx.so.1")]);
    assert!(n.find(&roots, "liby.so", t).is_empty());
    assert!(n.bytes() > 0);
    // A file deployed since is found once the index is old enough.
    std::fs::write(root.join("a/app"), b"z").unwrap();
    assert!(n.find(&roots, "app", t + RESCAN / 2).is_empty());
    assert_eq!(n.find(&roots, "app", t + RESCAN), [root.join("a/app")]);
}
