#!/usr/bin/env python3
"""Reads what profcol's metrics exporters produce with official parsers.

  metrics_check.py prom < exposition.txt
      Parses the Prometheus text format with the official Python client's
      parser (prometheus_client.parser); prints one JSON line per sample:
      {"name", "labels", "value"}.

  metrics_check.py otlp-receiver
      Serves OTLP/HTTP POST /v1/metrics on 127.0.0.1 (a free port, printed
      first as {"port": N}), parsing each body with the OpenTelemetry
      protos (opentelemetry-proto's ExportMetricsServiceRequest; gzip
      bodies too). When stdin closes it prints one JSON line per sum data
      point received: {"name", "unit", "monotonic", "temporality",
      "resource", "attributes", "value"}.
"""
import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def prom():
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(sys.stdin.read()):
        for s in family.samples:
            print(json.dumps({"name": s.name, "type": family.type, "labels": s.labels, "value": s.value}))


def attrs(kvs):
    out = {}
    for kv in kvs:
        v = kv.value
        which = v.WhichOneof("value")
        out[kv.key] = getattr(v, which) if which else None
    return out


def otlp_receiver():
    from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

    points = []
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            if self.path != "/v1/metrics" or self.headers.get("Content-Type") != "application/x-protobuf":
                self.send_response(400)
                self.end_headers()
                return
            req = metrics_service_pb2.ExportMetricsServiceRequest()
            req.ParseFromString(body)
            with lock:
                for rm in req.resource_metrics:
                    res = attrs(rm.resource.attributes)
                    for sm in rm.scope_metrics:
                        for m in sm.metrics:
                            if m.WhichOneof("data") != "sum":
                                continue
                            for p in m.sum.data_points:
                                value = p.as_int if p.WhichOneof("value") == "as_int" else p.as_double
                                points.append({
                                    "name": m.name,
                                    "unit": m.unit,
                                    "monotonic": m.sum.is_monotonic,
                                    "temporality": m.sum.aggregation_temporality,
                                    "resource": res,
                                    "attributes": attrs(p.attributes),
                                    "value": value,
                                })
            out = metrics_service_pb2.ExportMetricsServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    sys.stdin.read()
    server.shutdown()
    with lock:
        for p in points:
            print(json.dumps(p))


if __name__ == "__main__":
    {"prom": prom, "otlp-receiver": otlp_receiver}[sys.argv[1]]()
