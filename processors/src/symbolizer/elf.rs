//! One ELF file read once into what symbolization needs: its identity
//! (GNU and Go build ids, `.gnu_debuglink`), its loadable segments (to
//! turn process addresses into the file's), its DWARF sections (owned,
//! decompressed) under an `addr2line` context, and its function symbols as
//! the fallback where DWARF has nothing. The file is read through a range
//! cache: only the headers, notes and the sections used are read.
//!
//! A debug file may leave part of its DWARF to companions, as distributions
//! and large C++ builds ship them: a dwz supplementary file
//! (`.gnu_debugaltlink`, Debian's and Fedora's debug packages), a `.dwp`
//! package or `.dwo` files (split DWARF, `-gsplit-dwarf`). They are read
//! only from the directories [`Companions`] allows.

use std::borrow::Cow;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

use addr2line::{Context, LookupResult};
use gimli::{EndianArcSlice, Reader as _, RunTimeEndian, Section as _};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, ReadCache, SymbolKind};

type Reader = EndianArcSlice<RunTimeEndian>;

/// One frame of a resolved address, innermost (inlined) first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// Demangled; the mangled name is `system_name`.
    pub name: Arc<str>,
    pub system_name: Arc<str>,
    pub file: Arc<str>,
    pub line: u32,
    pub column: u32,
}

/// Why a file is refused.
#[derive(Debug)]
pub(super) enum ElfError {
    Io(std::io::Error),
    NotElf,
    NotRegularFile,
    TooLarge(u64),
    Malformed(String),
}

impl std::fmt::Display for ElfError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Io(e) => write!(f, "{e}"),
            Self::NotElf => f.write_str("not an ELF file"),
            Self::NotRegularFile => f.write_str("not a regular file"),
            Self::TooLarge(n) => write!(f, "{n} bytes, over max_file_size_mib"),
            Self::Malformed(e) => write!(f, "malformed ELF: {e}"),
        }
    }
}

/// The identity of an ELF file, read without its sections' contents.
#[derive(Debug, Clone, Default)]
pub(super) struct Identity {
    pub gnu_build_id: Option<Vec<u8>>,
    pub go_build_id: Option<String>,
    pub debuglink: Option<String>,
    /// The OpenTelemetry file id of the whole file (set for files read
    /// from their start, not for debug files found elsewhere).
    pub htlhash: Option<[u8; 16]>,
    /// `(p_offset, p_vaddr, p_filesz)` of each `PT_LOAD`.
    pub loads: Vec<(u64, u64, u64)>,
}

impl Identity {
    /// The file's address of `file_offset`, through the segment holding it.
    pub(super) fn vaddr_of_offset(&self, file_offset: u64) -> Option<u64> {
        self.loads
            .iter()
            .find(|(off, _, size)| file_offset >= *off && file_offset - off < (*size).max(1))
            .map(|(off, vaddr, _)| vaddr + (file_offset - off))
    }

    /// Whether this file is the one a mapping's build id names.
    pub(super) fn matches(&self, id: &BuildId) -> bool {
        match id {
            BuildId::Gnu(b) => self.gnu_build_id.as_deref() == Some(b.as_slice()),
            BuildId::Go(s) => self.go_build_id.as_deref() == Some(s.as_str()),
            BuildId::Htl(h) => self.htlhash.as_ref() == Some(h),
        }
    }
}

/// What a mapping names its file by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) enum BuildId {
    Gnu(Vec<u8>),
    Go(String),
    /// `process.executable.build_id.htlhash`: what the eBPF profiler
    /// names every file by, and the only id of files built without one
    /// (Alpine's, stripped ones).
    Htl([u8; 16]),
}

impl BuildId {
    /// The GNU build id in hex: what debug directories and debuginfod
    /// name files by.
    pub(super) fn hex(&self) -> Option<String> {
        match self {
            Self::Gnu(b) => Some(b.iter().map(|x| format!("{x:02x}")).collect()),
            Self::Go(_) | Self::Htl(_) => None,
        }
    }
}

/// The OpenTelemetry profiles file id (`htlhash`): SHA-256 of the file's
/// first and last 4096 bytes (they may overlap) and its length as a
/// big-endian u64, truncated to 16 bytes.
pub(super) fn htlhash<'a>(file: impl object::ReadRef<'a>) -> Option<[u8; 16]> {
    use sha2::Digest as _;
    const PAGE: u64 = 4096;
    let len = file.len().ok()?;
    let n = len.min(PAGE);
    let mut h = sha2::Sha256::new();
    h.update(file.read_bytes_at(0, n).ok()?);
    h.update(file.read_bytes_at(len - n, n).ok()?);
    h.update(len.to_be_bytes());
    h.finalize()[..16].try_into().ok()
}

/// A parsed debug file, queried by the file's (link-time) addresses.
pub(super) struct DebugInfo {
    pub identity: Identity,
    /// `addr2line` parses units lazily through cells: one query at a time.
    dwarf: Option<std::sync::Mutex<Context<Reader>>>,
    split: Split,
    /// Function symbols sorted by address: `(start, size, name)`.
    symbols: Vec<(u64, u64, Arc<str>)>,
    /// `(start, end)` of the executable sections: how far a symbol of
    /// size 0 reaches at most.
    code: Vec<(u64, u64)>,
    /// Bytes held at load: sections and symbols.
    bytes: usize,
}

fn open_regular(path: &Path, max_bytes: u64) -> Result<File, ElfError> {
    let mut f = File::open(path).map_err(ElfError::Io)?;
    let meta = f.metadata().map_err(ElfError::Io)?;
    if !meta.is_file() {
        return Err(ElfError::NotRegularFile);
    }
    if meta.len() > max_bytes {
        return Err(ElfError::TooLarge(meta.len()));
    }
    let mut magic = [0u8; 4];
    f.read_exact(&mut magic).map_err(|_| ElfError::NotElf)?;
    if magic != *b"\x7fELF" {
        return Err(ElfError::NotElf);
    }
    Ok(f)
}

fn malformed(e: impl std::fmt::Display) -> ElfError {
    ElfError::Malformed(e.to_string())
}

impl From<gimli::Error> for ElfError {
    fn from(e: gimli::Error) -> Self {
        malformed(e)
    }
}

/// Where a debug file's companions may be read from. They are named by
/// the debug file (paths from the build machine), not by the profile, and
/// still read only inside these directories.
#[derive(Debug, Clone, Default)]
pub(super) struct Companions {
    /// Canonical directories a companion may be read from; the debug
    /// file's and the executable's own directories are added.
    pub allowed: Vec<PathBuf>,
    /// Searched by build id (`.build-id/xx/rest.debug`) for the dwz file.
    pub debug_directories: Vec<PathBuf>,
    /// The executable mapped, whose `<exe>.dwp` and directory are looked in.
    pub exe: Option<PathBuf>,
}

impl Companions {
    /// `path`, canonical, when inside an allowed directory.
    fn admit(&self, path: &Path) -> Option<PathBuf> {
        let path = std::fs::canonicalize(path).ok()?;
        self.allowed
            .iter()
            .any(|d| path.starts_with(d))
            .then_some(path)
    }
}

/// An ELF file opened for its sections.
struct Elf {
    cache: ReadCache<File>,
}

impl Elf {
    fn open(path: &Path, max_bytes: u64) -> Result<Self, ElfError> {
        Ok(Self {
            cache: ReadCache::new(open_regular(path, max_bytes)?),
        })
    }

    fn parse(&self) -> Result<object::File<'_, &ReadCache<File>>, ElfError> {
        let obj = object::File::parse(&self.cache).map_err(malformed)?;
        if obj.format() != object::BinaryFormat::Elf {
            return Err(ElfError::NotElf);
        }
        Ok(obj)
    }
}

/// The section `name` of `obj`, decompressed and owned (empty when
/// absent); its size is added to `bytes`.
fn section<'a, R: object::ReadRef<'a>>(
    obj: &object::File<'a, R>,
    name: Option<&str>,
    endian: RunTimeEndian,
    max_bytes: u64,
    bytes: &mut usize,
) -> Result<Reader, ElfError> {
    let data: Cow<'_, [u8]> = match name.and_then(|n| obj.section_by_name(n)) {
        Some(s) => {
            let c = s.compressed_data().map_err(malformed)?;
            if c.uncompressed_size > max_bytes {
                return Err(ElfError::TooLarge(c.uncompressed_size));
            }
            c.decompress().map_err(malformed)?
        }
        None => Cow::Borrowed(&[]),
    };
    *bytes += data.len();
    Ok(EndianArcSlice::new(Arc::from(&*data), endian))
}

fn endian_of<'a, R: object::ReadRef<'a>>(obj: &object::File<'a, R>) -> RunTimeEndian {
    if obj.is_little_endian() {
        RunTimeEndian::Little
    } else {
        RunTimeEndian::Big
    }
}

/// The split units' DWARF: a `.dwp` package, or `.dwo` files read when
/// addr2line first asks for a unit (it keeps what it was given).
struct Split {
    dwp: Option<gimli::DwarfPackage<Reader>>,
    /// Where a `.dwo` is looked for by its file name: beside the debug
    /// file and the executable.
    near: Vec<PathBuf>,
    companions: Companions,
    endian: RunTimeEndian,
    max_bytes: u64,
    /// Bytes of the `.dwo` files read since the load.
    read: AtomicUsize,
}

impl Split {
    fn unit(&self, load: &addr2line::SplitDwarfLoad<Reader>) -> Option<Arc<gimli::Dwarf<Reader>>> {
        if let Some(dwp) = &self.dwp {
            return match dwp.find_cu(load.dwo_id, &load.parent) {
                Ok(Some(d)) => Some(Arc::new(d)),
                _ => None,
            };
        }
        let bytes = |r: &Option<Reader>| {
            r.as_ref()
                .and_then(|r| r.to_slice().ok().map(|s| s.to_vec()))
        };
        let name = PathBuf::from(std::ffi::OsStr::from_bytes(&bytes(&load.path)?));
        let mut candidates = Vec::new();
        match bytes(&load.comp_dir) {
            _ if name.is_absolute() => candidates.push(name.clone()),
            Some(dir) => candidates.push(Path::new(std::ffi::OsStr::from_bytes(&dir)).join(&name)),
            None => {}
        }
        if let Some(file) = name.file_name() {
            candidates.extend(self.near.iter().map(|d| d.join(file)));
        }
        candidates.into_iter().find_map(|c| {
            let path = self.companions.admit(&c)?;
            let mut read = 0;
            let elf = Elf::open(&path, self.max_bytes).ok()?;
            let obj = elf.parse().ok()?;
            let mut dwarf = gimli::Dwarf::load(|id| {
                section(&obj, id.dwo_name(), self.endian, self.max_bytes, &mut read)
            })
            .ok()?;
            // Another build's .dwo of the same name is not this unit.
            let mut units = dwarf.units();
            let ours = std::iter::from_fn(|| units.next().ok().flatten())
                .filter_map(|h| dwarf.unit(h).ok())
                .any(|u| u.dwo_id == Some(load.dwo_id));
            if !ours {
                return None;
            }
            dwarf.make_dwo(&load.parent);
            self.read.fetch_add(read, Relaxed);
            Some(Arc::new(dwarf))
        })
    }
}

/// The dwz supplementary file `.gnu_debugaltlink` names (`path`, build
/// id): by build id in the debug directories, or by its path (relative to
/// the debug file's directory), when its build id is the one named.
fn supplementary(
    link: (&[u8], &[u8]),
    dir: Option<&Path>,
    companions: &Companions,
    max_bytes: u64,
) -> Option<Elf> {
    let (name, id) = link;
    let hex: String = id.iter().map(|x| format!("{x:02x}")).collect();
    let mut candidates: Vec<PathBuf> = Vec::new();
    if hex.len() > 2 {
        candidates.extend(companions.debug_directories.iter().map(|d| {
            d.join(".build-id")
                .join(&hex[..2])
                .join(format!("{}.debug", &hex[2..]))
        }));
    }
    let name = Path::new(std::ffi::OsStr::from_bytes(name));
    match dir {
        Some(dir) if name.is_relative() => candidates.push(dir.join(name)),
        _ => candidates.push(name.to_path_buf()),
    }
    candidates.into_iter().find_map(|c| {
        let path = companions.admit(&c)?;
        let elf = Elf::open(&path, max_bytes).ok()?;
        let same = elf.parse().ok()?.build_id().ok().flatten() == Some(id);
        same.then_some(elf)
    })
}

fn identity_of<'a, R: object::ReadRef<'a>>(obj: &object::File<'a, R>, file: R) -> Identity {
    let go_build_id = obj
        .section_by_name(".note.go.buildid")
        .and_then(|s| s.data().ok())
        .and_then(go_note);
    Identity {
        gnu_build_id: obj.build_id().ok().flatten().map(<[u8]>::to_vec),
        go_build_id,
        htlhash: htlhash(file),
        debuglink: obj
            .gnu_debuglink()
            .ok()
            .flatten()
            .map(|(name, _crc)| String::from_utf8_lossy(name).into_owned()),
        loads: obj
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, s.address(), size)
            })
            .collect(),
    }
}

/// The Go linker's note: name "Go", type 4, the build id string.
fn go_note(data: &[u8]) -> Option<String> {
    let word = |i: usize| -> Option<usize> {
        let b = data.get(i..i + 4)?;
        Some(u32::from_le_bytes(b.try_into().ok()?) as usize)
    };
    let (namesz, descsz, kind) = (word(0)?, word(4)?, word(8)?);
    if namesz != 4 || kind != 4 || data.get(12..15)? != b"Go\0" {
        return None;
    }
    let desc = data.get(16..16 + descsz)?;
    std::str::from_utf8(desc).ok().map(str::to_string)
}

/// Reads the identity of the ELF file at `path` (headers and notes only).
pub(super) fn identify(path: &Path, max_bytes: u64) -> Result<Identity, ElfError> {
    let elf = Elf::open(path, max_bytes)?;
    Ok(identity_of(&elf.parse()?, &elf.cache))
}

impl DebugInfo {
    /// Parses `path` once: identity, DWARF sections (and those of its
    /// dwz supplementary file and `.dwp` package), symbols. A section
    /// whose uncompressed size exceeds `max_bytes` refuses the file.
    pub(super) fn load(
        path: &Path,
        max_bytes: u64,
        companions: &Companions,
    ) -> Result<Self, ElfError> {
        let elf = Elf::open(path, max_bytes)?;
        let obj = elf.parse()?;
        let identity = identity_of(&obj, &elf.cache);
        let endian = endian_of(&obj);
        let mut bytes = 0usize;
        let mut dwarf =
            gimli::Dwarf::load(|id| section(&obj, Some(id.name()), endian, max_bytes, &mut bytes))?;
        let any_dwarf = !dwarf.debug_info.reader().is_empty();
        let mut companions = companions.clone();
        let dir = std::fs::canonicalize(path)
            .ok()
            .and_then(|p| p.parent().map(Path::to_path_buf));
        let exe_dir = companions
            .exe
            .as_deref()
            .and_then(Path::parent)
            .map(Path::to_path_buf);
        let near: Vec<PathBuf> = dir.iter().chain(exe_dir.iter()).cloned().collect();
        companions.allowed.extend(near.iter().cloned());
        if let Some(link) = obj.gnu_debugaltlink().ok().flatten() {
            match supplementary(link, dir.as_deref(), &companions, max_bytes) {
                Some(sup) => {
                    let sup = sup.parse()?;
                    dwarf.load_sup(|id| {
                        section(&sup, Some(id.name()), endian, max_bytes, &mut bytes)
                    })?;
                }
                None => {
                    tracing::debug!(path = %path.display(), "symbolizer: dwz supplementary file not found")
                }
            }
        }
        let mut dwps: Vec<PathBuf> = vec![path.with_extension(match path.extension() {
            Some(e) => format!("{}.dwp", e.to_string_lossy()),
            None => "dwp".to_owned(),
        })];
        if let Some(exe) = &companions.exe {
            dwps.push(PathBuf::from(format!("{}.dwp", exe.display())));
        }
        let dwp = dwps.iter().find_map(|p| {
            let p = companions.admit(p)?;
            let elf = Elf::open(&p, max_bytes).ok()?;
            let obj = elf.parse().ok()?;
            let empty = EndianArcSlice::new(Arc::from(&[][..]), endian);
            gimli::DwarfPackage::load(
                |id| section(&obj, id.dwo_name(), endian, max_bytes, &mut bytes),
                empty,
            )
            .ok()
        });
        let split = Split {
            dwp,
            near,
            companions,
            endian,
            max_bytes,
            read: AtomicUsize::new(0),
        };
        let dwarf = if any_dwarf {
            Some(std::sync::Mutex::new(
                Context::from_dwarf(dwarf).map_err(malformed)?,
            ))
        } else {
            None
        };
        let mut symbols: Vec<(u64, u64, Arc<str>)> = obj
            .symbols()
            .chain(obj.dynamic_symbols())
            .filter(|s| s.kind() == SymbolKind::Text && s.address() != 0)
            .filter_map(|s| Some((s.address(), s.size(), Arc::<str>::from(s.name().ok()?))))
            .filter(|(_, _, n)| !n.is_empty())
            .collect();
        symbols.sort_by_key(|s| (s.0, std::cmp::Reverse(s.1)));
        symbols.dedup_by_key(|s| s.0);
        let code = obj
            .sections()
            // By flag, not kind: a debug file's code sections are
            // SHT_NOBITS but keep their address range and flags.
            .filter(|s| {
                let exec = matches!(s.flags(), object::SectionFlags::Elf { sh_flags, .. }
                    if sh_flags.contains(object::elf::SHF_EXECINSTR));
                exec && s.size() > 0
            })
            .map(|s| (s.address(), s.address().saturating_add(s.size())))
            .collect();
        bytes += symbols
            .iter()
            .map(|s| s.2.len() + std::mem::size_of::<(u64, u64, Arc<str>)>() + 16)
            .sum::<usize>();
        Ok(Self {
            identity,
            dwarf,
            split,
            symbols,
            code,
            bytes,
        })
    }

    /// The frames at `addr` (a file address), innermost first; empty when
    /// neither DWARF nor the symbol table covers it.
    pub(super) fn resolve(&self, addr: u64) -> Vec<Frame> {
        let mut out = Vec::new();
        // addr2line probes [addr, addr + 1): the last address would
        // overflow it, and no code lives there.
        if let Some(ctx) = self.dwarf.as_ref().filter(|_| addr < u64::MAX) {
            let ctx = ctx.lock().unwrap_or_else(|e| e.into_inner());
            // A split unit not found resolves from the skeleton's line
            // table, or falls back to the symbols.
            let mut lookup = ctx.find_frames(addr);
            let frames = loop {
                match lookup {
                    LookupResult::Output(r) => break r,
                    LookupResult::Load { load, continuation } => {
                        lookup = addr2line::LookupContinuation::resume(
                            continuation,
                            self.split.unit(&load),
                        );
                    }
                }
            };
            if let Ok(mut frames) = frames {
                while let Ok(Some(f)) = frames.next() {
                    let (name, system_name) = match &f.function {
                        Some(func) => {
                            let raw = func.raw_name().map(|n| n.into_owned()).unwrap_or_default();
                            let demangled =
                                addr2line::demangle_auto(Cow::Borrowed(&raw), func.language)
                                    .into_owned();
                            (Arc::from(demangled), Arc::from(raw))
                        }
                        None => (Arc::from(""), Arc::from("")),
                    };
                    let (file, line, column) = match &f.location {
                        Some(l) => (
                            Arc::from(l.file.unwrap_or("")),
                            l.line.unwrap_or(0),
                            l.column.unwrap_or(0),
                        ),
                        None => (Arc::from(""), 0, 0),
                    };
                    out.push(Frame {
                        name,
                        system_name,
                        file,
                        line,
                        column,
                    });
                }
            }
        }
        // Outermost frame without a name (no DWARF function): the symbol.
        let unnamed = out.last().is_none_or(|f| f.name.is_empty());
        if unnamed {
            if let Some(sym) = self.symbol(addr) {
                let name: Arc<str> =
                    Arc::from(addr2line::demangle_auto(Cow::Borrowed(&*sym), None).as_ref());
                match out.last_mut() {
                    Some(f) => {
                        f.name = name;
                        f.system_name = sym;
                    }
                    None => out.push(Frame {
                        name,
                        system_name: sym,
                        file: Arc::from(""),
                        line: 0,
                        column: 0,
                    }),
                }
            }
        }
        out
    }

    /// Bytes held: sections and symbols, and the `.dwo` files read since.
    pub(super) fn bytes(&self) -> usize {
        self.bytes + self.split.read.load(Relaxed)
    }

    pub(super) fn has_dwarf(&self) -> bool {
        self.dwarf.is_some()
    }

    pub(super) fn has_symbols(&self) -> bool {
        !self.symbols.is_empty()
    }

    fn symbol(&self, addr: u64) -> Option<Arc<str>> {
        let i = self
            .symbols
            .partition_point(|s| s.0 <= addr)
            .checked_sub(1)?;
        let (start, size, name) = &self.symbols[i];
        // Size 0 (hand-written assembly): trust it up to the next symbol
        // and within its section, as binutils does.
        let within = |&(from, to): &(u64, u64)| from <= *start && addr < to;
        let reaches = match size {
            0 => self.code.is_empty() || self.code.iter().any(within),
            n => addr - start < *n,
        };
        reaches.then(|| name.clone())
    }
}
