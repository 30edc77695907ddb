#!/usr/bin/env python3
"""Send OTLP profiles requests with the OpenTelemetry Python SDK's own
OTLP/HTTP client (opentelemetry-exporter-otlp-proto-http): its session,
headers, compression, retries and TLS settings, as an SDK configured for
`http/protobuf` uses them. The SDK has no profiles signal yet, so the span
exporter's client posts the serialized profiles requests to the profiles path.

Usage: otlp_http_export.py --endpoint URL [--compression gzip|deflate|none]
       [--ca FILE] [-H key=value]... FILE...
Prints one JSON line per file: {"file", "success", "status"}; exits 1 if any failed.
"""
import argparse
import json
import sys

from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--compression", default="gzip", choices=["gzip", "deflate", "none"])
    ap.add_argument("--ca")
    ap.add_argument("-H", "--header", action="append", default=[])
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    compression = {
        "gzip": Compression.Gzip,
        "deflate": Compression.Deflate,
        "none": Compression.NoCompression,
    }[a.compression]
    headers = dict(h.split("=", 1) for h in a.header)
    exporter = OTLPSpanExporter(
        endpoint=a.endpoint,
        certificate_file=a.ca,
        headers=headers,
        compression=compression,
        timeout=10,
    )
    ok = True
    for path in a.files:
        data = open(path, "rb").read()
        # Parse first: what is sent is what the SDK's protobuf serializes.
        req = profiles_service_pb2.ExportProfilesServiceRequest.FromString(data)
        result = exporter._client.export(req.SerializeToString())
        ok &= result.success
        print(json.dumps({"file": path, "success": result.success, "status": result.status_code}))
    exporter.shutdown()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
