//! `Decode(target, encoding)`: base64 variants and character sets, as
//! `ottlfuncs/func_decode.go` with `textutils.LookupEncoding`.

use std::borrow::Cow;

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine as _;

use crate::error::EvalResult;
use crate::fail;
use crate::value::Val;

#[derive(Debug, Clone, Copy)]
pub enum Decoder {
    Base64(&'static GeneralPurpose),
    /// Valid UTF-8 as it is, each invalid byte U+FFFD (Go's `unicode.UTF8`;
    /// also `nop` and `utf8-raw`, whose invalid bytes Go keeps in a string
    /// an attribute here cannot hold).
    Utf8,
    /// ISO-8859-1 as IANA has it (WHATWG's labels read it as windows-1252).
    Latin1,
    Charset(&'static encoding_rs::Encoding),
}

/// Go's `base64` encodings: padding as each says, trailing bits allowed.
const fn engine(alphabet: &alphabet::Alphabet, padded: bool) -> GeneralPurpose {
    let padding = if padded {
        DecodePaddingMode::RequireCanonical
    } else {
        DecodePaddingMode::RequireNone
    };
    GeneralPurpose::new(
        alphabet,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(padding),
    )
}

static STD: GeneralPurpose = engine(&alphabet::STANDARD, true);
static RAW_STD: GeneralPurpose = engine(&alphabet::STANDARD, false);
static URL: GeneralPurpose = engine(&alphabet::URL_SAFE, true);
static RAW_URL: GeneralPurpose = engine(&alphabet::URL_SAFE, false);

const LATIN1: &[&str] = &[
    "iso-8859-1",
    "iso_8859-1",
    "iso_8859-1:1987",
    "iso-ir-100",
    "latin1",
    "l1",
    "ibm819",
    "cp819",
    "csisolatin1",
];

pub(super) fn decoder(encoding: &str) -> EvalResult<Decoder> {
    Ok(match encoding {
        "base64" => Decoder::Base64(&STD),
        "base64-raw" => Decoder::Base64(&RAW_STD),
        "base64-url" => Decoder::Base64(&URL),
        "base64-raw-url" => Decoder::Base64(&RAW_URL),
        _ => {
            let lower = encoding.to_ascii_lowercase();
            match lower.as_str() {
                // textutils' overrides: ASCII read as UTF-8, UTF-16 as
                // little endian without a byte order mark.
                "utf-8" | "utf8" | "ascii" | "us-ascii" | "" | "utf-8-raw" | "utf8-raw" | "nop" => {
                    Decoder::Utf8
                }
                "utf-16" | "utf16" => Decoder::Charset(encoding_rs::UTF_16LE),
                l if LATIN1.contains(&l) => Decoder::Latin1,
                l => match encoding_rs::Encoding::for_label(l.as_bytes()) {
                    // `replacement` is WHATWG's, not a character set.
                    Some(e) if e != encoding_rs::REPLACEMENT => Decoder::Charset(e),
                    _ => fail!("unsupported encoding '{encoding}'"),
                },
            }
        }
    })
}

pub(super) fn decode(d: Decoder, v: &Val) -> EvalResult<Val<'static>> {
    let bytes: &[u8] = match v {
        Val::Str(s) => s.as_bytes(),
        Val::Bytes(b) => b,
        other => fail!(
            "unsupported type provided to Decode function: {}",
            other.type_name()
        ),
    };
    let text = match d {
        Decoder::Base64(engine) => {
            // Go's decoder skips line breaks.
            let clean: Cow<[u8]> = if bytes.iter().any(|&b| b == b'\r' || b == b'\n') {
                bytes
                    .iter()
                    .copied()
                    .filter(|&b| b != b'\r' && b != b'\n')
                    .collect()
            } else {
                Cow::Borrowed(bytes)
            };
            match engine.decode(clean) {
                Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                Err(e) => fail!("could not decode: {e}"),
            }
        }
        Decoder::Utf8 => String::from_utf8_lossy(bytes).into_owned(),
        Decoder::Latin1 => bytes.iter().map(|&b| b as char).collect(),
        Decoder::Charset(e) => e.decode_without_bom_handling(bytes).0.into_owned(),
    };
    Ok(Val::Str(Cow::Owned(text)))
}
