//! Kernel frames by `/proc/kallsyms` (`kernel_symbols: true`): the OTel
//! eBPF profiler names kernel frames itself, but other producers send a
//! kernel frame as its address alone. The table is read once, at start,
//! from the host's kallsyms (`kallsyms_path`, for a container that mounts
//! the host's `/proc` elsewhere); text symbols only, sorted by address.
//! Without the rights to see addresses (`kptr_restrict`), the kernel lists
//! every one as zero: that is refused with the reason, not used.

use std::sync::Arc;

use super::elf::Frame;
use super::resolver::Frames;

/// Text symbols by address.
pub(super) struct Kallsyms {
    addrs: Vec<u64>,
    /// A symbol's one frame, its module (`[ext4]`) as the file.
    frames: Vec<Frames>,
}

/// How far past the last symbol an address still counts as its.
const LAST_SYMBOL_SPAN: u64 = 64 << 10;

/// Larger files are refused (a kernel lists a few hundred thousand
/// symbols, about 15 MB).
pub(super) const MAX_BYTES: u64 = 64 << 20;

impl Kallsyms {
    pub(super) fn load(path: &std::path::Path) -> Result<Self, String> {
        use std::io::Read;
        let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut text = String::new();
        f.take(MAX_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if text.len() as u64 > MAX_BYTES {
            return Err(format!("{}: over {MAX_BYTES} bytes", path.display()));
        }
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// `address type name [module]` lines, as the kernel writes them.
    pub(super) fn parse(text: &str) -> Result<Self, String> {
        let mut syms: Vec<(u64, &str, Option<&str>)> = Vec::new();
        let mut listed = 0usize;
        for line in text.lines() {
            let mut f = line.split_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (f.next(), f.next(), f.next()) else {
                continue;
            };
            if !matches!(kind, "T" | "t" | "W" | "w") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            listed += 1;
            if addr != 0 {
                let module = f
                    .next()
                    .map(|m| m.trim_start_matches('[').trim_end_matches(']'));
                syms.push((addr, name, module));
            }
        }
        if syms.is_empty() {
            return Err(if listed > 0 {
                "every address is 0: the kernel hides them from this process (kptr_restrict); profcol needs to run as root or with CAP_SYSLOG on the host".into()
            } else {
                "no text symbol".into()
            });
        }
        syms.sort_by_key(|s| s.0);
        syms.dedup_by_key(|s| s.0);
        let kernel: Arc<str> = "[kernel.kallsyms]".into();
        let mut modules: Vec<Arc<str>> = Vec::new();
        let mut addrs = Vec::with_capacity(syms.len());
        let mut frames = Vec::with_capacity(syms.len());
        for (addr, name, module) in syms {
            let file = match module {
                None => kernel.clone(),
                Some(m) => match modules.iter().find(|k| &***k == m) {
                    Some(k) => k.clone(),
                    None => {
                        modules.push(m.into());
                        modules[modules.len() - 1].clone()
                    }
                },
            };
            let name: Arc<str> = name.into();
            addrs.push(addr);
            frames.push(Arc::from([Frame {
                name: name.clone(),
                system_name: name,
                file,
                line: 0,
                column: 0,
            }]));
        }
        Ok(Self { addrs, frames })
    }

    /// The function `addr` is in.
    pub(super) fn lookup(&self, addr: u64) -> Option<&Frames> {
        let i = self.addrs.partition_point(|&a| a <= addr).checked_sub(1)?;
        if i + 1 == self.addrs.len() && addr - self.addrs[i] > LAST_SYMBOL_SPAN {
            return None;
        }
        self.frames.get(i)
    }

    /// What the table holds, for the memory budget.
    pub(super) fn heap_bytes(&self) -> usize {
        let names: usize = self.frames.iter().map(|f| f[0].name.len() + 80).sum();
        self.addrs.capacity() * 8 + self.frames.capacity() * 16 + names
    }

    pub(super) fn len(&self) -> usize {
        self.addrs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
ffffffff81000000 T _stext
ffffffff81001000 t do_one_initcall
ffffffff81002000 D some_data
ffffffff81003000 T __x64_sys_write
ffffffffc0a00000 t ext4_file_write_iter\t[ext4]
";

    #[test]
    fn addresses_fall_in_the_text_symbol_below_them() {
        let k = Kallsyms::parse(TEXT).unwrap();
        assert_eq!(k.len(), 4);
        let name = |a| {
            k.lookup(a)
                .map(|f| (f[0].name.to_string(), f[0].file.to_string()))
        };
        assert_eq!(
            name(0xffffffff81000010),
            Some(("_stext".into(), "[kernel.kallsyms]".into()))
        );
        // Data symbols are not functions: the text symbol before holds it.
        assert_eq!(name(0xffffffff81002010).unwrap().0, "do_one_initcall");
        assert_eq!(name(0xffffffff81003abc).unwrap().0, "__x64_sys_write");
        assert_eq!(
            name(0xffffffffc0a00100),
            Some(("ext4_file_write_iter".into(), "ext4".into()))
        );
        assert_eq!(name(0xffffffff80000000), None, "below the first");
        assert_eq!(
            name(0xffffffffc0a00000 + LAST_SYMBOL_SPAN + 1),
            None,
            "far past the last"
        );
    }

    #[test]
    fn hidden_addresses_are_refused_with_the_reason() {
        let hidden = TEXT
            .lines()
            .map(|l| format!("0000000000000000{}\n", &l[16..]))
            .collect::<String>();
        let err = Kallsyms::parse(&hidden).err().unwrap();
        assert!(err.contains("kptr_restrict"), "{err}");
        assert!(Kallsyms::parse("garbage\n\n").is_err());
    }
}
