//! `URL(url_string)`: the Collector's `parseutils.ParseURI` (semconv keys)
//! over Go's `net/url.Parse`, whose reading of a URL (what it refuses,
//! how it unescapes, how `String()` writes it back) is kept here, as the
//! `url` crate follows WHATWG's, which normalises what Go keeps.

use std::collections::BTreeMap;

use profcol_model::proto::{any_value::Value as A, AnyValue, ArrayValue, KeyValue, KeyValueList};

/// Go's escaping modes (`net/url`'s `encoding`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Path,
    Host,
    Zone,
    UserPassword,
    QueryComponent,
    Fragment,
}

/// RFC 3986's sub-delims.
const SUB_DELIMS: &[u8] = b"!$&'()*+,;=";

/// `shouldEscape` as `gen_encoding_table.go` states it.
fn should_escape(c: u8, mode: Mode) -> bool {
    if c.is_ascii_alphanumeric() {
        return false;
    }
    if matches!(mode, Mode::Host | Mode::Zone)
        && (SUB_DELIMS.contains(&c) || b":[]<>\"".contains(&c))
    {
        return false;
    }
    match c {
        b'-' | b'_' | b'.' | b'~' => return false,
        b'$' | b'&' | b'+' | b',' | b'/' | b':' | b';' | b'=' | b'?' | b'@' => match mode {
            Mode::Path => return c == b'?',
            Mode::UserPassword => return matches!(c, b'@' | b'/' | b'?' | b':'),
            Mode::QueryComponent => return true,
            Mode::Fragment => return false,
            Mode::Host | Mode::Zone => {}
        },
        _ => {}
    }
    !(mode == Mode::Fragment && matches!(c, b'!' | b'(' | b')' | b'*'))
}

fn unhex(c: u8) -> u8 {
    (c as char).to_digit(16).unwrap_or(0) as u8
}

fn unescape(s: &[u8], mode: Mode) -> Result<Vec<u8>, String> {
    let esc_err = |s: &[u8]| {
        format!(
            "invalid URL escape {:?}",
            String::from_utf8_lossy(&s[..s.len().min(3)])
        )
    };
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                if i + 2 >= s.len()
                    || !s[i + 1].is_ascii_hexdigit()
                    || !s[i + 2].is_ascii_hexdigit()
                {
                    return Err(esc_err(&s[i..]));
                }
                let v = unhex(s[i + 1]) << 4 | unhex(s[i + 2]);
                let pct25 = &s[i..i + 3] == b"%25";
                if mode == Mode::Host && unhex(s[i + 1]) < 8 && !pct25 {
                    return Err(esc_err(&s[i..]));
                }
                if mode == Mode::Zone && !pct25 && v != b' ' && should_escape(v, Mode::Host) {
                    return Err(esc_err(&s[i..]));
                }
                i += 3;
            }
            c => {
                if matches!(mode, Mode::Host | Mode::Zone) && c < 0x80 && should_escape(c, mode) {
                    return Err(format!(
                        "invalid character {:?} in host name",
                        (c as char).to_string()
                    ));
                }
                i += 1;
            }
        }
    }
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        match s[i] {
            b'%' => {
                out.push(unhex(s[i + 1]) << 4 | unhex(s[i + 2]));
                i += 3;
            }
            b'+' if mode == Mode::QueryComponent => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

fn escape(s: &[u8], mode: Mode) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut out = Vec::with_capacity(s.len());
    for &c in s {
        if c == b' ' && mode == Mode::QueryComponent {
            out.push(b'+');
        } else if should_escape(c, mode) {
            out.extend([b'%', HEX[(c >> 4) as usize], HEX[(c & 15) as usize]]);
        } else {
            out.push(c);
        }
    }
    out
}

fn valid_optional_port(port: &[u8]) -> bool {
    match port.split_first() {
        None => true,
        Some((b':', digits)) => digits.iter().all(u8::is_ascii_digit),
        Some(_) => false,
    }
}

fn valid_encoded(s: &[u8], mode: Mode) -> bool {
    s.iter()
        .all(|&c| SUB_DELIMS.contains(&c) || b":@[]%".contains(&c) || !should_escape(c, mode))
}

fn find(s: &[u8], c: u8) -> Option<usize> {
    s.iter().position(|&b| b == c)
}

fn rfind(s: &[u8], c: u8) -> Option<usize> {
    s.iter().rposition(|&b| b == c)
}

#[derive(Default)]
struct Url {
    scheme: Vec<u8>,
    opaque: Vec<u8>,
    /// Username, and the password if one was given.
    user: Option<(Vec<u8>, Option<Vec<u8>>)>,
    host: Vec<u8>,
    path: Vec<u8>,
    raw_path: Vec<u8>,
    fragment: Vec<u8>,
    raw_fragment: Vec<u8>,
    raw_query: Vec<u8>,
    force_query: bool,
    omit_host: bool,
}

/// `url.Parse`.
fn parse(raw: &[u8]) -> Result<Url, String> {
    let (u, frag) = match find(raw, b'#') {
        Some(i) => (&raw[..i], &raw[i + 1..]),
        None => (raw, &b""[..]),
    };
    let mut url = parse_no_fragment(u)?;
    if !frag.is_empty() {
        url.fragment = unescape(frag, Mode::Fragment)?;
        if escape(&url.fragment, Mode::Fragment) != frag {
            url.raw_fragment = frag.to_vec();
        }
    }
    Ok(url)
}

fn parse_no_fragment(raw: &[u8]) -> Result<Url, String> {
    if raw.iter().any(|&b| b < b' ' || b == 0x7f) {
        return Err("net/url: invalid control character in URL".into());
    }
    let mut url = Url::default();
    if raw == b"*" {
        url.path = b"*".to_vec();
        return Ok(url);
    }
    let mut rest = raw;
    // getScheme
    for (i, &c) in raw.iter().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i > 0 => {}
            b':' if i == 0 => return Err("missing protocol scheme".into()),
            b':' => {
                url.scheme = raw[..i].to_ascii_lowercase();
                rest = &raw[i + 1..];
                break;
            }
            _ => break,
        }
    }
    if rest.ends_with(b"?") && rest.iter().filter(|&&c| c == b'?').count() == 1 {
        url.force_query = true;
        rest = &rest[..rest.len() - 1];
    } else if let Some(i) = find(rest, b'?') {
        url.raw_query = rest[i + 1..].to_vec();
        rest = &rest[..i];
    }
    if !rest.starts_with(b"/") {
        if !url.scheme.is_empty() {
            url.opaque = rest.to_vec();
            return Ok(url);
        }
        let segment = &rest[..find(rest, b'/').unwrap_or(rest.len())];
        if segment.contains(&b':') {
            return Err("first path segment in URL cannot contain colon".into());
        }
    }
    if (!url.scheme.is_empty() || !rest.starts_with(b"///")) && rest.starts_with(b"//") {
        let mut authority = &rest[2..];
        rest = b"";
        if let Some(i) = find(authority, b'/') {
            rest = &authority[i..];
            authority = &authority[..i];
        }
        parse_authority(&mut url, authority)?;
    } else if !url.scheme.is_empty() && rest.starts_with(b"/") {
        url.omit_host = true;
    }
    url.path = unescape(rest, Mode::Path)?;
    if escape(&url.path, Mode::Path) != rest {
        url.raw_path = rest.to_vec();
    }
    Ok(url)
}

fn parse_authority(url: &mut Url, authority: &[u8]) -> Result<(), String> {
    let at = rfind(authority, b'@');
    url.host = parse_host(&url.scheme, &authority[at.map_or(0, |i| i + 1)..])?;
    let Some(at) = at else {
        return Ok(());
    };
    let userinfo = &authority[..at];
    let valid = std::str::from_utf8(userinfo).is_ok_and(|s| {
        s.chars().all(|r| {
            r.is_ascii_alphanumeric()
                || matches!(
                    r,
                    '-' | '.'
                        | '_'
                        | ':'
                        | '~'
                        | '!'
                        | '$'
                        | '&'
                        | '\''
                        | '('
                        | ')'
                        | '*'
                        | '+'
                        | ','
                        | ';'
                        | '='
                        | '%'
                        | '@'
                )
        })
    });
    if !valid {
        return Err("net/url: invalid userinfo".into());
    }
    url.user = Some(match find(userinfo, b':') {
        None => (unescape(userinfo, Mode::UserPassword)?, None),
        Some(i) => (
            unescape(&userinfo[..i], Mode::UserPassword)?,
            Some(unescape(&userinfo[i + 1..], Mode::UserPassword)?),
        ),
    });
    Ok(())
}

fn parse_host(scheme: &[u8], host: &[u8]) -> Result<Vec<u8>, String> {
    match rfind(host, b'[') {
        Some(i) if i > 0 => Err("invalid IP-literal".into()),
        Some(_) => {
            let close = rfind(host, b']').ok_or("missing ']' in host")?;
            let colon_port = &host[close + 1..];
            if !valid_optional_port(colon_port) {
                return Err(format!(
                    "invalid port {:?} after host",
                    String::from_utf8_lossy(colon_port)
                ));
            }
            let colon_port = unescape(colon_port, Mode::Host)?;
            let hostname = &host[1..close];
            let unescaped = match hostname.windows(3).position(|w| w == b"%25") {
                Some(z) => {
                    let mut h = unescape(&hostname[..z], Mode::Host)?;
                    h.extend(unescape(&hostname[z..], Mode::Zone)?);
                    h
                }
                None => unescape(hostname, Mode::Host)?,
            };
            // netip.ParseAddr: an IPv6 address with an optional zone; an
            // IPv4 one is no IP-literal.
            let text = String::from_utf8_lossy(&unescaped);
            let (addr, zone) = match text.split_once('%') {
                Some((a, z)) => (a, Some(z)),
                None => (&*text, None),
            };
            match addr.parse::<std::net::IpAddr>() {
                Ok(std::net::IpAddr::V4(_)) if zone.is_none() => {
                    return Err("invalid IP-literal".into())
                }
                Ok(std::net::IpAddr::V6(_)) if zone != Some("") => {}
                _ => {
                    return Err(format!(
                        "invalid host: ParseAddr({text:?}): unable to parse"
                    ))
                }
            }
            let mut out = b"[".to_vec();
            out.extend(unescaped);
            out.push(b']');
            out.extend(colon_port);
            Ok(out)
        }
        None => {
            if let Some(first) = find(host, b':') {
                let last = rfind(host, b':').unwrap_or(first);
                // Go 1.26 takes the first colon in http(s) hosts
                // (urlstrictcolons), the last elsewhere.
                let i = if scheme == b"http" || scheme == b"https" {
                    first
                } else {
                    last
                };
                let colon_port = &host[i..];
                if !valid_optional_port(colon_port) {
                    return Err(format!(
                        "invalid port {:?} after host",
                        String::from_utf8_lossy(colon_port)
                    ));
                }
            }
            unescape(host, Mode::Host)
        }
    }
}

impl Url {
    fn escaped_path(&self) -> Vec<u8> {
        if !self.raw_path.is_empty()
            && valid_encoded(&self.raw_path, Mode::Path)
            && unescape(&self.raw_path, Mode::Path).is_ok_and(|p| p == self.path)
        {
            return self.raw_path.clone();
        }
        if self.path == b"*" {
            return b"*".to_vec();
        }
        escape(&self.path, Mode::Path)
    }

    fn escaped_fragment(&self) -> Vec<u8> {
        if !self.raw_fragment.is_empty()
            && valid_encoded(&self.raw_fragment, Mode::Fragment)
            && unescape(&self.raw_fragment, Mode::Fragment).is_ok_and(|f| f == self.fragment)
        {
            return self.raw_fragment.clone();
        }
        escape(&self.fragment, Mode::Fragment)
    }

    fn user_string(&self) -> Option<Vec<u8>> {
        let (name, password) = self.user.as_ref()?;
        let mut s = escape(name, Mode::UserPassword);
        if let Some(p) = password {
            s.push(b':');
            s.extend(escape(p, Mode::UserPassword));
        }
        Some(s)
    }

    /// `URL.String()`.
    fn to_bytes(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        if !self.scheme.is_empty() {
            buf.extend(&self.scheme);
            buf.push(b':');
        }
        if !self.opaque.is_empty() {
            buf.extend(&self.opaque);
        } else {
            let has_user = self.user.is_some();
            let authority = !self.scheme.is_empty() || !self.host.is_empty() || has_user;
            // `scheme:/path` is written back without `//` (OmitHost).
            let omitted = self.omit_host && self.host.is_empty() && !has_user;
            if authority && !omitted {
                if !self.host.is_empty() || !self.path.is_empty() || has_user {
                    buf.extend(b"//");
                }
                if let Some(u) = self.user_string() {
                    buf.extend(u);
                    buf.push(b'@');
                }
                buf.extend(escape(&self.host, Mode::Host));
            }
            let path = self.escaped_path();
            if !path.is_empty() && path[0] != b'/' && !self.host.is_empty() {
                buf.push(b'/');
            }
            if buf.is_empty() {
                let segment = &path[..find(&path, b'/').unwrap_or(path.len())];
                if segment.contains(&b':') {
                    buf.extend(b"./");
                }
            }
            buf.extend(path);
        }
        if self.force_query || !self.raw_query.is_empty() {
            buf.push(b'?');
            buf.extend(&self.raw_query);
        }
        if !self.fragment.is_empty() {
            buf.push(b'#');
            buf.extend(self.escaped_fragment());
        }
        buf
    }

    /// `splitHostPort`.
    fn host_port(&self) -> (&[u8], &[u8]) {
        let mut host = &self.host[..];
        let mut port = &b""[..];
        if let Some(colon) = rfind(host, b':') {
            if valid_optional_port(&host[colon..]) {
                port = &host[colon + 1..];
                host = &host[..colon];
            }
        }
        if host.len() >= 2 && host.starts_with(b"[") && host.ends_with(b"]") {
            host = &host[1..host.len() - 1];
        }
        (host, port)
    }
}

/// A value of the result map.
#[derive(Debug, PartialEq)]
pub(super) enum Part {
    Str(String),
    Int(i64),
    /// A query's parameters, each with its values in order.
    Query(BTreeMap<String, Vec<String>>),
}

fn text(b: &[u8]) -> Part {
    Part::Str(String::from_utf8_lossy(b).into_owned())
}

/// `url.ParseQuery`: every parameter it could read, or its first error.
fn parse_query(query: &[u8]) -> Result<BTreeMap<String, Vec<String>>, String> {
    if query.iter().filter(|&&c| c == b'&').count() + 1 > 10_000 {
        return Err("number of URL query parameters exceeded limit".into());
    }
    let mut m: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut err = None;
    for pair in query.split(|&c| c == b'&') {
        if pair.contains(&b';') {
            err = Some("invalid semicolon separator in query".to_owned());
            continue;
        }
        if pair.is_empty() {
            continue;
        }
        let (k, v) = match find(pair, b'=') {
            Some(i) => (&pair[..i], &pair[i + 1..]),
            None => (pair, &b""[..]),
        };
        match (
            unescape(k, Mode::QueryComponent),
            unescape(v, Mode::QueryComponent),
        ) {
            (Ok(k), Ok(v)) => m
                .entry(String::from_utf8_lossy(&k).into_owned())
                .or_default()
                .push(String::from_utf8_lossy(&v).into_owned()),
            (Err(e), _) | (_, Err(e)) => {
                err.get_or_insert(e);
            }
        }
    }
    match err {
        Some(e) => Err(e),
        None => Ok(m),
    }
}

/// `parseutils.ParseURI(s, true)`: the `url.*` attributes of an absolute
/// or relative URL, or the parameters of a bare `?query`.
pub(super) fn parse_uri(s: &str) -> Result<BTreeMap<&'static str, Part>, String> {
    let mut m = BTreeMap::new();
    if let Some(q) = s.strip_prefix('?') {
        let params = parse_query(q.as_bytes())?;
        if !params.is_empty() {
            m.insert("query", Part::Query(params));
        }
        return Ok(m);
    }
    let u = parse(s.as_bytes()).map_err(|e| format!("parse {s:?}: {e}"))?;
    let (host, port) = u.host_port();
    m.insert("url.original", text(&u.to_bytes()));
    m.insert("url.domain", text(host));
    m.insert("url.scheme", text(&u.scheme));
    m.insert("url.path", text(&u.path));
    if !port.is_empty() {
        let port = std::str::from_utf8(port)
            .ok()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| {
                format!(
                    "strconv.Atoi: parsing {:?}: value out of range",
                    String::from_utf8_lossy(port)
                )
            })?;
        m.insert("url.port", Part::Int(port));
    }
    if !u.fragment.is_empty() {
        m.insert("url.fragment", text(&u.fragment));
    }
    if let Some((name, password)) = &u.user {
        m.insert("url.user_info", text(&u.user_string().unwrap_or_default()));
        if !name.is_empty() {
            m.insert("url.username", text(name));
        }
        if let Some(p) = password {
            m.insert("url.password", text(p));
        }
    }
    if !u.raw_query.is_empty() {
        m.insert("url.query", text(&u.raw_query));
    }
    if let Some(dot) = rfind(&u.path, b'.') {
        if dot < u.path.len() - 1 {
            m.insert("url.extension", text(&u.path[dot + 1..]));
        }
    }
    Ok(m)
}

/// [`parse_uri`] as the map the Collector makes of it: `url.port` an int,
/// `query` a map of each parameter's values.
pub(super) fn attributes(s: &str) -> Result<Vec<KeyValue>, String> {
    let text = |s: String| AnyValue {
        value: Some(A::StringValue(s)),
    };
    let kv = |key: String, value: A| KeyValue {
        key,
        value: Some(AnyValue { value: Some(value) }),
        ..Default::default()
    };
    Ok(parse_uri(s)?
        .into_iter()
        .map(|(key, part)| {
            let value = match part {
                Part::Str(s) => A::StringValue(s),
                Part::Int(i) => A::IntValue(i),
                Part::Query(q) => A::KvlistValue(KeyValueList {
                    values: q
                        .into_iter()
                        .map(|(k, vs)| {
                            let values = vs.into_iter().map(text).collect();
                            kv(k, A::ArrayValue(ArrayValue { values }))
                        })
                        .collect(),
                }),
            };
            kv(key.into(), value)
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strs(s: &str) -> Vec<(&'static str, String)> {
        parse_uri(s)
            .unwrap()
            .into_iter()
            .map(|(k, v)| {
                let v = match v {
                    Part::Str(s) => s,
                    Part::Int(i) => i.to_string(),
                    Part::Query(q) => format!("{q:?}"),
                };
                (k, v)
            })
            .collect()
    }

    /// The Collector's own cases (parseutils/uri_test.go, semconv).
    #[test]
    fn parse_uri_as_the_collector() {
        assert_eq!(
            strs("http://myusername:mypassword@www.example.com:80/webapp/doc.html?v=1&b=2#frag"),
            [
                ("url.domain", "www.example.com".into()),
                ("url.extension", "html".into()),
                ("url.fragment", "frag".into()),
                (
                    "url.original",
                    "http://myusername:mypassword@www.example.com:80/webapp/doc.html?v=1&b=2#frag"
                        .into()
                ),
                ("url.password", "mypassword".into()),
                ("url.path", "/webapp/doc.html".into()),
                ("url.port", "80".into()),
                ("url.query", "v=1&b=2".into()),
                ("url.scheme", "http".into()),
                ("url.user_info", "myusername:mypassword".into()),
                ("url.username", "myusername".into()),
            ]
        );
        assert_eq!(
            strs("/a%20b/c.tar.gz"),
            [
                ("url.domain", "".into()),
                ("url.extension", "gz".into()),
                ("url.original", "/a%20b/c.tar.gz".into()),
                ("url.path", "/a b/c.tar.gz".into()),
                ("url.scheme", "".into()),
            ]
        );
        assert_eq!(
            strs("?a=1&a=2&b=x+y"),
            [("query", r#"{"a": ["1", "2"], "b": ["x y"]}"#.into())]
        );
        for bad in ["http://a b.com/", "1http://x", "http://x:port/", "%zz"] {
            assert!(parse_uri(bad).is_err(), "{bad}");
        }
        assert!(parse_uri("mailto:a@b.c").is_ok());
    }
}

#[cfg(test)]
mod properties {
    use proptest::prelude::*;

    proptest! {
        /// Any text is read or refused, never a panic; what is read writes
        /// back (`url.original`) to a URL that reads again the same way.
        #[test]
        fn any_text_is_read_or_refused(s in "[ -~]{0,40}|[a-z]{1,5}://[ -~]{0,30}") {
            if let Ok(m) = super::parse_uri(&s) {
                if let Some(super::Part::Str(original)) = m.get("url.original") {
                    let again = super::parse_uri(original).expect("its own writing reads");
                    prop_assert_eq!(again.get("url.path"), m.get("url.path"));
                }
            }
        }
    }
}
