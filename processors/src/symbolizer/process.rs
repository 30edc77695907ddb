//! A mapping's file as the process that mapped it sees it
//! (`process_files`): its path in `/proc/<pid>/maps`, opened through
//! `/proc/<pid>/root`, so a container's files are its own, not the host's
//! at the same path. The eBPF profiler names the file by base name alone;
//! the process's maps name it in full. A file deleted since it was mapped
//! (a deploy replaced the binary under a running process) is opened as
//! the process maps it, `/proc/<pid>/map_files/<range>`. The file is still
//! proven by its build id.

use std::path::{Path, PathBuf};

/// Processes asked per mapping, at most.
pub(super) const MAX_PIDS: usize = 8;

/// `/proc/<pid>/root/<path>` of each file the processes map under the
/// base name `name`; for a deleted one, its first range in
/// `/proc/<pid>/map_files`.
pub(super) fn files_named(proc: &Path, pids: &[u32], name: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for &pid in pids.iter().take(MAX_PIDS) {
        let dir = proc.join(pid.to_string());
        let Ok(maps) = std::fs::read_to_string(dir.join("maps")) else {
            continue;
        };
        let mut deleted = Vec::new();
        for m in maps.lines().filter_map(mapped) {
            if m.path.rsplit('/').next() != Some(name) {
                continue;
            }
            let p = if m.deleted {
                if deleted.contains(&m.path) {
                    continue;
                }
                deleted.push(m.path);
                dir.join("map_files").join(m.range)
            } else {
                dir.join("root").join(m.path.trim_start_matches('/'))
            };
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// A file mapping of a `/proc/<pid>/maps` line.
#[derive(Debug, PartialEq)]
struct Mapped<'a> {
    /// `start-end`, as `map_files` names it.
    range: &'a str,
    path: &'a str,
    deleted: bool,
}

/// The file of a `/proc/<pid>/maps` line: the sixth field to the end
/// (a path may hold spaces); none for anonymous and pseudo mappings.
fn mapped(line: &str) -> Option<Mapped<'_>> {
    let range = line.split_once(' ')?.0;
    let mut rest = line;
    for _ in 0..5 {
        rest = rest.trim_start().split_once(' ')?.1;
    }
    let path = rest.trim_start();
    if !path.starts_with('/') {
        return None;
    }
    let (path, deleted) = match path.strip_suffix(" (deleted)") {
        Some(p) => (p, true),
        None => (path, false),
    };
    Some(Mapped {
        range,
        path,
        deleted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_lines_give_their_files() {
        let path = |l| mapped(l).map(|m| (m.path, m.deleted));
        let l = "7f1c2a000000-7f1c2a028000 r--p 00000000 fd:01 1835028                    /usr/lib/x86_64-linux-gnu/libc.so.6";
        assert_eq!(
            path(l),
            Some(("/usr/lib/x86_64-linux-gnu/libc.so.6", false))
        );
        assert_eq!(mapped(l).unwrap().range, "7f1c2a000000-7f1c2a028000");
        let spaced = "55d0-55d1 r-xp 00001000 00:2a 77 /opt/my app/bin/app";
        assert_eq!(path(spaced), Some(("/opt/my app/bin/app", false)));
        let gone = "55d0-55d1 r-xp 00001000 00:2a 77 /tmp/gone (deleted)";
        assert_eq!(path(gone), Some(("/tmp/gone", true)));
        for none in [
            "7ffc-7ffd rw-p 00000000 00:00 0                          [stack]",
            "7f00-7f01 rw-p 00000000 00:00 0 ",
            "garbage",
        ] {
            assert_eq!(mapped(none), None, "{none}");
        }
    }

    #[test]
    fn files_are_found_through_each_process_root() {
        let proc = tempfile::tempdir().unwrap();
        let root = tempfile::tempdir().unwrap();
        let pid = proc.path().join("4242");
        std::fs::create_dir_all(&pid).unwrap();
        std::os::unix::fs::symlink(root.path(), pid.join("root")).unwrap();
        std::fs::write(
            pid.join("maps"),
            "1000-2000 r-xp 00001000 fd:01 9 /srv/app/bin/app\n\
             3000-4000 r-xp 00001000 fd:01 9 /srv/app/bin/app\n\
             5000-6000 r-xp 00000000 fd:01 8 /lib/libc.so.6\n\
             7000-8000 r--p 00000000 fd:01 7 /srv/old/bin/old (deleted)\n\
             8000-9000 r-xp 00001000 fd:01 7 /srv/old/bin/old (deleted)\n",
        )
        .unwrap();
        let found = files_named(proc.path(), &[4242, 7], "app");
        assert_eq!(found, [pid.join("root/srv/app/bin/app")]);
        assert!(files_named(proc.path(), &[4242], "other").is_empty());
        assert_eq!(
            files_named(proc.path(), &[4242], "old"),
            [pid.join("map_files/7000-8000")]
        );
    }
}
