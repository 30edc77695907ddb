//! `multipart/form-data` bodies (RFC 7578) as pyroscope-go and Node SDKs up
//! to 0.6.1 send them, read from the body already in memory: the parts are
//! slices of it, nothing is copied.

/// One part: its form field name, file name and bytes.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Part<'a> {
    pub name: String,
    pub filename: Option<String>,
    pub data: &'a [u8],
}

/// The `boundary` parameter of a `multipart/form-data` content type; `None`
/// when the content type is not multipart.
pub(super) fn boundary(content_type: &str) -> Option<Result<String, String>> {
    let mut params = content_type.split(';');
    let mime = params.next()?.trim();
    if !mime.eq_ignore_ascii_case("multipart/form-data") {
        return None;
    }
    for p in params {
        if let Some((k, v)) = p.split_once('=') {
            if k.trim().eq_ignore_ascii_case("boundary") {
                let v = v.trim().trim_matches('"');
                if v.is_empty() || v.len() > 200 {
                    break;
                }
                return Some(Ok(v.to_owned()));
            }
        }
    }
    Some(Err("multipart/form-data without a boundary".into()))
}

/// Splits `body` into its parts. The preamble before the first boundary
/// and the epilogue after the last are ignored; a body that ends before
/// its closing boundary is an error.
pub(super) fn parse<'a>(body: &'a [u8], boundary: &str) -> Result<Vec<Part<'a>>, String> {
    let delim = format!("--{boundary}");
    let finder = memchr::memmem::Finder::new(delim.as_bytes());
    let mut parts = Vec::new();
    // The first delimiter may open the body or follow a preamble line.
    let mut at = match finder.find(body) {
        Some(i) if i == 0 || body[..i].ends_with(b"\n") => i + delim.len(),
        _ => return Err("no multipart boundary in the body".into()),
    };
    loop {
        let rest = &body[at..];
        if rest.starts_with(b"--") {
            return Ok(parts);
        }
        let rest =
            skip_line_end(rest).ok_or("a multipart boundary is not followed by a line end")?;
        let start = body.len() - rest.len();
        let next = find_delimiter(&finder, body, start)
            .ok_or("the multipart body ends before its closing boundary")?;
        // The part ends before the CRLF (or LF) that precedes the delimiter.
        let mut end = next;
        if body[..end].ends_with(b"\n") {
            end -= 1;
            if body[..end].ends_with(b"\r") {
                end -= 1;
            }
        }
        parts.push(part(&body[start..end.max(start)])?);
        at = next + delim.len();
    }
}

/// The next delimiter at or after `from` that begins a line.
fn find_delimiter(finder: &memchr::memmem::Finder<'_>, body: &[u8], from: usize) -> Option<usize> {
    let mut pos = from;
    while let Some(i) = finder.find(&body[pos..]) {
        let at = pos + i;
        if at == from || body[..at].ends_with(b"\n") {
            return Some(at);
        }
        pos = at + 1;
    }
    None
}

fn skip_line_end(b: &[u8]) -> Option<&[u8]> {
    // Transport padding (spaces, tabs) may precede the line end.
    let b = &b[b.iter().take_while(|c| **c == b' ' || **c == b'\t').count()..];
    b.strip_prefix(b"\r\n").or_else(|| b.strip_prefix(b"\n"))
}

/// One part: headers up to an empty line, then the data.
fn part(raw: &[u8]) -> Result<Part<'_>, String> {
    let (head, data) = match memchr::memmem::find(raw, b"\r\n\r\n") {
        Some(i) => (&raw[..i], &raw[i + 4..]),
        None => match memchr::memmem::find(raw, b"\n\n") {
            Some(i) => (&raw[..i], &raw[i + 2..]),
            // Headers only, no data.
            None => (raw, &raw[raw.len()..]),
        },
    };
    let head = String::from_utf8_lossy(head);
    let mut name = None;
    let mut filename = None;
    for line in head.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        if !k.trim().eq_ignore_ascii_case("content-disposition") {
            continue;
        }
        for param in v.split(';').skip(1) {
            let Some((pk, pv)) = param.split_once('=') else {
                continue;
            };
            let pv = pv.trim();
            let pv = pv
                .strip_prefix('"')
                .and_then(|s| s.strip_suffix('"'))
                .unwrap_or(pv)
                .to_owned();
            match pk.trim().to_ascii_lowercase().as_str() {
                "name" => name = Some(pv),
                "filename" => filename = Some(pv),
                _ => {}
            }
        }
    }
    let name = name.ok_or("a multipart part has no Content-Disposition name")?;
    Ok(Part {
        name,
        filename,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_as_undici_and_go_write_them() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"profile\"; filename=\"profile.pprof\"\r\nContent-Type: application/octet-stream\r\n\r\n\x1f\x8b--XyZ inside\r\n--XyZ\r\nContent-Disposition: form-data; name=\"sample_type_config\"\r\n\r\n{}\r\n--XyZ--\r\n";
        let parts = parse(body, "XyZ").unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].name, "profile");
        assert_eq!(parts[0].filename.as_deref(), Some("profile.pprof"));
        assert_eq!(parts[0].data, b"\x1f\x8b--XyZ inside");
        assert_eq!(
            (parts[1].name.as_str(), parts[1].data),
            ("sample_type_config", &b"{}"[..])
        );
        assert_eq!(
            boundary("multipart/form-data; boundary=----formdata-undici-092056671304"),
            Some(Ok("----formdata-undici-092056671304".into()))
        );
        assert_eq!(boundary("application/octet-stream"), None);
        assert!(boundary("multipart/form-data").unwrap().is_err());
    }

    #[test]
    fn broken_bodies_are_errors() {
        assert!(parse(b"no boundary here", "b").is_err());
        let open = b"--b\r\nContent-Disposition: form-data; name=\"profile\"\r\n\r\nabc";
        assert!(parse(open, "b").unwrap_err().contains("closing boundary"));
        let nameless = b"--b\r\nContent-Type: text/plain\r\n\r\nabc\r\n--b--";
        assert!(parse(nameless, "b")
            .unwrap_err()
            .contains("no Content-Disposition name"));
        assert_eq!(parse(b"--b--\r\n", "b").unwrap(), []);
    }
}
