use std::time::{Duration, UNIX_EPOCH};

use super::support::*;
use crate::envelope::{parse, EnvelopeError};
use crate::{chunk_to_otlp, otlp_to_chunks, write_envelope, ExportOptions, ReceiveOptions};

#[test]
fn recorded_python_chunk_envelope() {
    let bytes = fixture("sentry-python/manual/0001.envelope");
    let env = parse(&bytes).unwrap();
    assert_eq!(
        env.header,
        serde_json::json!({}),
        "empty envelope header is fine"
    );
    assert_eq!(env.items.len(), 1);
    let item = &env.items[0];
    assert_eq!(item.item_type(), "profile_chunk");
    assert_eq!(item.platform(), Some("python"));
    assert_eq!(item.header.length, Some(89240));
    assert_eq!(item.payload.len(), 89240);
    assert_eq!(item.payload[0], b'{');
    // Zero-copy: the payload is a slice of the input.
    let base = bytes.as_ptr() as usize;
    let at = item.payload.as_ptr() as usize;
    assert!(at > base && at < base + bytes.len());
}

#[test]
fn recorded_node_envelopes_without_length_or_final_newline() {
    let bytes = fixture("sentry-node/manual/0001.envelope");
    assert_ne!(
        *bytes.last().unwrap(),
        b'\n',
        "the recording has no final newline"
    );
    let env = parse(&bytes).unwrap();
    assert_eq!(env.header["sdk"]["name"], "sentry.javascript.node");
    assert_eq!(env.items.len(), 1);
    assert_eq!(env.items[0].header.length, None);
    assert_eq!(env.items[0].payload.len(), 45665);
    assert!(env.items[0].payload.ends_with(b"}}"));

    let bytes = fixture("sentry-node/manual/0002.envelope");
    let env = parse(&bytes).unwrap();
    assert_eq!(env.count_by_type(), vec![("session", 1)]);
    assert_eq!(env.items[0].payload.len(), 253);
}

#[test]
fn recorded_v1_envelope_has_profile_and_transaction() {
    let bytes = fixture("sentry-python/v1/0001.envelope");
    let env = parse(&bytes).unwrap();
    assert_eq!(
        env.count_by_type(),
        vec![("profile", 1), ("transaction", 1)]
    );
    assert_eq!(env.items[0].payload.len(), 47205);
    assert_eq!(env.items[1].payload.len(), 1335);
    assert_eq!(
        env.header["trace"]["trace_id"],
        "9558c43617dd4a2b9bcde612fb8eb31c"
    );
}

#[test]
fn framing_cases_relay_accepts() {
    // Implicit length, payload to the newline.
    let env = parse(b"{}\n{\"type\":\"attachment\"}\nhelloworld\n").unwrap();
    assert_eq!(env.items[0].payload, b"helloworld");
    // Implicit length at EOF.
    let env = parse(b"{}\n{\"type\":\"attachment\"}\nhelloworld").unwrap();
    assert_eq!(env.items[0].payload, b"helloworld");
    // Empty item at EOF without a newline after its header.
    let env = parse(b"{}\n{\"type\":\"attachment\"}").unwrap();
    assert_eq!(env.items[0].payload, b"");
    // Explicit length covers newlines inside the payload; blank lines between items.
    let env = parse(
        b"{\"event_id\":\"9ec79c33ec9942ab8353589fcb2e04dc\"}\n{\"type\":\"attachment\",\"length\":7}\nHel\nlo\n\n\n{\"type\":\"event\",\"length\":0}\n\n",
    )
    .unwrap();
    assert_eq!(env.items.len(), 2);
    assert_eq!(env.items[0].payload, b"Hel\nlo\n");
    assert_eq!(env.items[1].item_type(), "event");
    assert_eq!(env.items[1].payload, b"");
    // Header only, with or without a newline.
    assert!(parse(b"{}").unwrap().items.is_empty());
    assert!(parse(b"{}\n").unwrap().items.is_empty());
    // Unknown item header fields are ignored.
    let env =
        parse(b"{}\n{\"type\":\"x\",\"length\":1,\"filename\":\"a\",\"custom\":[1]}\nz").unwrap();
    assert_eq!(env.items[0].payload, b"z");
}

#[test]
fn framing_errors_explain_themselves() {
    let err = |b: &[u8]| parse(b).unwrap_err();
    assert_eq!(err(b""), EnvelopeError::MissingHeader);
    assert_eq!(err(b"   \n"), EnvelopeError::MissingHeader);
    assert!(matches!(err(b"{\"a\":\n"), EnvelopeError::InvalidHeader(_)));
    assert!(matches!(err(b"[1]\n"), EnvelopeError::InvalidHeader(_)));
    assert!(matches!(
        err(b"{} x\n"),
        EnvelopeError::MissingNewline {
            what: "envelope header",
            ..
        }
    ));
    assert!(matches!(
        err(b"{}\n{\"length\":2}\nab\n"),
        EnvelopeError::InvalidItemHeader { index: 0, .. }
    ));
    let e = err(b"{}\n{\"type\":\"event\",\"length\":10}\nabc\n");
    assert_eq!(
        e,
        EnvelopeError::UnexpectedEof {
            index: 0,
            length: 10,
            available: 4
        }
    );
    assert!(e.to_string().contains("10 bytes"), "{e}");
    let e = err(b"{}\n{\"type\":\"event\",\"length\":2}\nabc\n");
    assert!(matches!(
        e,
        EnvelopeError::MissingNewline {
            what: "item payload",
            ..
        }
    ));
    assert!(e.to_string().contains("newline"), "{e}");
}

#[test]
fn written_envelope_parses_back_and_matches_relay_expectations() {
    let conv = chunk_to_otlp(&python_chunk(), Some("python"), &ReceiveOptions::default()).unwrap();
    let chunks = otlp_to_chunks(&conv.data, &ExportOptions::default());
    let sent_at = UNIX_EPOCH + Duration::from_micros(1_795_318_604_638_532);
    let dsn = "https://key@o1.ingest.sentry.io/42";
    let bytes = write_envelope(&chunks, Some(dsn), sent_at);
    assert!(
        bytes.ends_with(b"}\n") && !bytes.ends_with(b"\n\n"),
        "one trailing newline"
    );

    let env = parse(&bytes).unwrap();
    assert_eq!(env.header["sent_at"], "2026-11-22T03:36:44.638532Z");
    assert_eq!(env.header["dsn"], dsn);
    assert_eq!(env.items.len(), 1);
    let item = &env.items[0];
    assert_eq!(item.item_type(), "profile_chunk");
    assert_eq!(item.header.length, Some(item.payload.len() as u64));
    assert_eq!(item.payload, &chunks[0].payload[..]);
    // The item header's platform equals the payload's, which the receive
    // side checks.
    chunk_to_otlp(item.payload, item.platform(), &ReceiveOptions::default()).unwrap();

    let no_dsn = write_envelope(&chunks, None, sent_at);
    assert!(parse(&no_dsn).unwrap().header.get("dsn").is_none());
}
