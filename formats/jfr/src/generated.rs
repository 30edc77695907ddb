//! JVM-generated class and library names merged as Pyroscope merges them
//! (`jfr-parser`'s `mergeJVMGeneratedClasses`, applied to every symbol of
//! the pool): a lambda's class carries a counter and an address that change
//! with every run and class load, so without this the same lambda becomes a
//! new function in every upload.
//!
//! Pyroscope uses six anchored regexps; each is a small matcher here, in
//! the same order, each rewriting what the one before left:
//!
//! | Pyroscope's pattern | becomes |
//! |---|---|
//! | `^(jdk/internal/reflect/GeneratedMethodAccessor)(\d+)$` | `…GeneratedMethodAccessor_` |
//! | `^(.+\$\$Lambda)(\$?\d*[./](0x)?[\da-f]+\|\d+)$` | `…$$Lambda_` |
//! | `^(\.?/tmp/)?(libzstd-jni-\d+\.\d+\.\d+-)(\d+)(\.so)( \(deleted\))?$` | `libzstd-jni-_.so` |
//! | `^(\.?/tmp/)?(lib)?(amazonCorrettoCryptoProvider)(NativeLibraries\.)?([0-9a-f]{16})(/libcrypto\|/libamazonCorrettoCryptoProvider)?(\.so)( \(deleted\))?$` | `libamazonCorrettoCryptoProvider_.so` |
//! | `^(\.?/tmp/)?(libasyncProfiler)-(linux-arm64\|linux-musl-x64\|linux-x64\|macos)-(17b9a1d8156277a98ccc871afa9a8f69215f92)(\.so)( \(deleted\))?$` | `libasyncProfiler-_.so` |
//! | `^(.+\$\$EnhancerBySpringCGLIB\$\$)(.*)$` | `…$$EnhancerBySpringCGLIB$$_` |
//!
//! Nothing else is merged, as in Pyroscope: `GeneratedConstructorAccessor`,
//! `sun/reflect/` (JDK 8) accessors, `$Proxy12` and the JDK's own JFR
//! names of hidden classes (`Foo$$Lambda$83+0x…/123`) keep their numbers.
//! Names are rewritten once per method of a chunk, never per sample.

use std::borrow::Cow;

const METHOD_ACCESSOR: &str = "jdk/internal/reflect/GeneratedMethodAccessor";
const LAMBDA: &str = "$$Lambda";
const CGLIB: &str = "$$EnhancerBySpringCGLIB$$";
const ASYNC_PROFILER_PLATFORMS: [&str; 4] = ["linux-arm64", "linux-musl-x64", "linux-x64", "macos"];
const ASYNC_PROFILER_BUILD: &str = "17b9a1d8156277a98ccc871afa9a8f69215f92";

/// `name` with its generated part merged, or as it is.
pub fn merge(name: &str) -> Cow<'_, str> {
    let mut out = Cow::Borrowed(name);
    let steps: [fn(&str) -> Option<String>; 6] = [
        method_accessor,
        lambda,
        zstd_jni,
        corretto,
        async_profiler,
        cglib,
    ];
    for step in steps {
        if let Some(s) = step(&out) {
            out = Cow::Owned(s);
        }
    }
    out
}

fn digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

fn lower_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn method_accessor(s: &str) -> Option<String> {
    digits(s.strip_prefix(METHOD_ACCESSOR)?).then(|| format!("{METHOD_ACCESSOR}_"))
}

/// `.+` before the marker: at least one character and, as a regexp's `.`,
/// no newline.
fn prefix_ok(p: &str) -> bool {
    !p.is_empty() && !p.contains('\n')
}

fn lambda(s: &str) -> Option<String> {
    // The suffix holds no `L`, so only the last `$$Lambda` can match.
    let at = s.rfind(LAMBDA)?;
    let (head, rest) = s.split_at(at + LAMBDA.len());
    if !prefix_ok(&head[..at]) {
        return None;
    }
    let suffix_ok = digits(rest) || {
        let r = rest.strip_prefix('$').unwrap_or(rest);
        let r = r.trim_start_matches(|c: char| c.is_ascii_digit());
        match r.strip_prefix(['.', '/']) {
            Some(hex) => lower_hex(hex) || hex.strip_prefix("0x").is_some_and(lower_hex),
            None => false,
        }
    };
    suffix_ok.then(|| format!("{head}_"))
}

/// A shared library's file name, without the `/tmp/` or `./tmp/` it was
/// extracted to and the ` (deleted)` of an unlinked file.
fn library(s: &str) -> &str {
    let s = s
        .strip_prefix("./tmp/")
        .or_else(|| s.strip_prefix("/tmp/"))
        .unwrap_or(s);
    s.strip_suffix(" (deleted)").unwrap_or(s)
}

/// Splits off the leading ASCII digits, at least one.
fn number(s: &str) -> Option<&str> {
    let rest = s.trim_start_matches(|c: char| c.is_ascii_digit());
    (rest.len() < s.len()).then_some(rest)
}

fn zstd_jni(s: &str) -> Option<String> {
    let r = library(s).strip_prefix("libzstd-jni-")?;
    let r = number(r)?.strip_prefix('.')?;
    let r = number(r)?.strip_prefix('.')?;
    let r = number(r)?.strip_prefix('-')?;
    (number(r)? == ".so").then(|| "libzstd-jni-_.so".to_owned())
}

fn corretto(s: &str) -> Option<String> {
    let r = library(s);
    let r = r.strip_prefix("lib").unwrap_or(r);
    let r = r.strip_prefix("amazonCorrettoCryptoProvider")?;
    let r = r.strip_prefix("NativeLibraries.").unwrap_or(r);
    let (hex, r) = (r.get(..16)?, &r[16..]);
    let r = r
        .strip_prefix("/libcrypto")
        .or_else(|| r.strip_prefix("/libamazonCorrettoCryptoProvider"))
        .unwrap_or(r);
    (lower_hex(hex) && r == ".so").then(|| "libamazonCorrettoCryptoProvider_.so".to_owned())
}

fn async_profiler(s: &str) -> Option<String> {
    let r = library(s).strip_prefix("libasyncProfiler-")?;
    let r = ASYNC_PROFILER_PLATFORMS
        .iter()
        .find_map(|p| r.strip_prefix(p)?.strip_prefix('-'))?;
    (r.strip_prefix(ASYNC_PROFILER_BUILD)? == ".so").then(|| "libasyncProfiler-_.so".to_owned())
}

fn cglib(s: &str) -> Option<String> {
    // `.+` is greedy: the last marker with something before it.
    let at = s.rfind(CGLIB)?;
    (prefix_ok(&s[..at]) && !s.contains('\n')).then(|| format!("{}_", &s[..at + CGLIB.len()]))
}

#[cfg(test)]
mod tests {
    use super::merge;

    /// Pyroscope's own cases (`parser_jvm_generated_class_merge_test.go`)
    /// and the names the agent 2.9.2 wrote on JDK 17.
    #[test]
    fn generated_classes_merge_as_in_pyroscope() {
        for (name, want) in [
            (
                "org/example/rideshare/EnclosingClass$$Lambda$4/1283928880",
                "org/example/rideshare/EnclosingClass$$Lambda_",
            ),
            (
                "org/example/rideshare/EnclosingClass$$Lambda$8/0x0000000800c01220",
                "org/example/rideshare/EnclosingClass$$Lambda_",
            ),
            ("Fib$$Lambda.0x00007ffa600c4da0", "Fib$$Lambda_"),
            (
                "GeneratedApp$$Lambda$62.0x00007fd368085498",
                "GeneratedApp$$Lambda_",
            ),
            ("Fib$$Lambda123", "Fib$$Lambda_"),
            (
                "java/util/concurrent/Executors$RunnableAdapter",
                "java/util/concurrent/Executors$RunnableAdapter",
            ),
            (
                "jdk/internal/reflect/GeneratedMethodAccessor31",
                "jdk/internal/reflect/GeneratedMethodAccessor_",
            ),
            (
                "foo/bar/Baz$$EnhancerBySpringCGLIB$$1234567890",
                "foo/bar/Baz$$EnhancerBySpringCGLIB$$_",
            ),
            (
                "foo/bar/Baz$$EnhancerBySpringCGLIB$$",
                "foo/bar/Baz$$EnhancerBySpringCGLIB$$_",
            ),
            // What Pyroscope's patterns leave alone.
            ("Fib$$Lambda$123", "Fib$$Lambda$123"),
            ("$$Lambda.0x1", "$$Lambda.0x1"),
            ("Fib$$Lambda.0x", "Fib$$Lambda.0x"),
            ("Fib$$Lambda.0xABC", "Fib$$Lambda.0xABC"),
            (
                "Fib$$Lambda$83+0x00007f1eb8015800/1708570683",
                "Fib$$Lambda$83+0x00007f1eb8015800/1708570683",
            ),
            ("a\nb$$Lambda$1/0x1", "a\nb$$Lambda$1/0x1"),
            (
                "jdk/internal/reflect/GeneratedConstructorAccessor7",
                "jdk/internal/reflect/GeneratedConstructorAccessor7",
            ),
            (
                "sun/reflect/GeneratedMethodAccessor7",
                "sun/reflect/GeneratedMethodAccessor7",
            ),
            (
                "jdk/internal/reflect/GeneratedMethodAccessor",
                "jdk/internal/reflect/GeneratedMethodAccessor",
            ),
            ("com/sun/proxy/$Proxy12", "com/sun/proxy/$Proxy12"),
            ("$$EnhancerBySpringCGLIB$$1", "$$EnhancerBySpringCGLIB$$1"),
            // Chained as in Pyroscope: the lambda step, then the CGLIB one.
            (
                "A$$EnhancerBySpringCGLIB$$B$$Lambda$1/0x1",
                "A$$EnhancerBySpringCGLIB$$_",
            ),
        ] {
            assert_eq!(merge(name), want, "{name}");
        }
    }

    /// Pyroscope's shared library cases, each also as unlinked (` (deleted)`)
    /// and under `/tmp/` and `./tmp/`.
    #[test]
    fn extracted_libraries_merge_as_in_pyroscope() {
        for (name, want) in [
            (
                "libasyncProfiler-linux-arm64-17b9a1d8156277a98ccc871afa9a8f69215f92.so",
                "libasyncProfiler-_.so",
            ),
            (
                "libasyncProfiler-linux-musl-x64-17b9a1d8156277a98ccc871afa9a8f69215f92.so",
                "libasyncProfiler-_.so",
            ),
            (
                "libasyncProfiler-linux-x64-17b9a1d8156277a98ccc871afa9a8f69215f92.so",
                "libasyncProfiler-_.so",
            ),
            (
                "libasyncProfiler-macos-17b9a1d8156277a98ccc871afa9a8f69215f92.so",
                "libasyncProfiler-_.so",
            ),
            (
                "libamazonCorrettoCryptoProvider109b39cf33c563eb.so",
                "libamazonCorrettoCryptoProvider_.so",
            ),
            (
                "amazonCorrettoCryptoProviderNativeLibraries.7382c2f79097f415/libcrypto.so",
                "libamazonCorrettoCryptoProvider_.so",
            ),
            (
                "amazonCorrettoCryptoProviderNativeLibraries.24e42b0d5ecf5f50/libamazonCorrettoCryptoProvider.so",
                "libamazonCorrettoCryptoProvider_.so",
            ),
            ("libzstd-jni-1.5.1-16931311898282279136.so", "libzstd-jni-_.so"),
        ] {
            for n in [
                name.to_owned(),
                format!("{name} (deleted)"),
                format!("/tmp/{name} (deleted)"),
                format!("./tmp/{name} (deleted)"),
            ] {
                assert_eq!(merge(&n), want, "{n}");
            }
        }
        for kept in [
            // Another build of async-profiler, another platform.
            "libasyncProfiler-linux-x64-0000000000000000000000000000000000000000.so",
            "libasyncProfiler-windows-17b9a1d8156277a98ccc871afa9a8f69215f92.so",
            "libzstd-jni-1.5-1.so",
            "libamazonCorrettoCryptoProvider109b39cf33c563e.so",
            "/usr/lib/libzstd-jni-1.5.1-1.so",
            "libc.so.6",
        ] {
            assert_eq!(merge(kept), kept);
        }
    }
}
