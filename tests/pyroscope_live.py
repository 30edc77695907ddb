#!/usr/bin/env python3
"""Live check of the `pyroscope` receiver with the real Python SDK.

Starts profcol (a `pyroscope` receiver feeding the `pprof` exporter), runs a
small CPU-busy program profiled by `pyroscope-io` against it, stops profcol
(SIGTERM drains the queues) and checks the pprof files it wrote: the
program's hot functions must lead the CPU profile. Works with pyroscope-io
1.x (Push), 0.8.5+ (pprof to /ingest) and 0.8.4 and older (folded).
With `--token T` the receiver requires `Authorization: Bearer T`
(`bearertokenauth`), which the SDK sends through its `http_headers`.

Skipped (exit 0, "skipped: ...") when `pyroscope-io` is not importable: it
installs nothing. To run it:

    python3 -m venv /tmp/pyro && /tmp/pyro/bin/pip install pyroscope-io
    cargo build -p profcol
    /tmp/pyro/bin/python tests/pyroscope_live.py --profcol target/debug/profcol [--token T]

`cargo test --test pyroscope_e2e` runs it with the Python of the other
client tests ($PROFCOL_PYTHON, target/py or python3) when it has the SDK;
tests/python/requirements.txt pins pyroscope-io for `.ci/run`.
"""

import argparse
import gzip
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

BUSY = r'''
import inspect, sys, threading, time
import pyroscope

port, secs, token = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
kw = dict(application_name="livecheck", server_address="http://127.0.0.1:%%d" %% port,
          tags={"env": "live"})
if "upload_interval" in inspect.signature(pyroscope.configure).parameters:
    kw["upload_interval"] = %(interval)d  # 1.x; 0.8.x uploads every 10 s
if token:
    kw["http_headers"] = {"Authorization": "Bearer " + token}
pyroscope.configure(**kw)

def hot_leaf(n):
    x = 0
    for i in range(n):
        x = (x * 31 + i) %% 1000003
    return x

def hot_middle(n):
    return hot_leaf(n) + hot_leaf(n // 2)

def run(deadline):
    while time.time() < deadline:
        hot_middle(50000)

deadline = time.time() + secs
t = threading.Thread(target=run, args=(deadline,), name="worker-1")
t.start()
run(deadline)
t.join()
pyroscope.shutdown()
'''


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, proc, limit=30.0):
    end = time.time() + limit
    while time.time() < end:
        if proc.poll() is not None:
            raise SystemExit("profcol exited early with %s" % proc.returncode)
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("profcol did not listen on %d" % port)


# A minimal protobuf reader for the pprof fields this check needs.
def varint(b, i):
    n = shift = 0
    while True:
        c = b[i]
        i += 1
        n |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return n, i


def fields(b):
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = b[i:i + 8], i + 8
        elif wt == 5:
            v, i = b[i:i + 4], i + 4
        else:
            raise ValueError("wire type %d" % wt)
        yield num, wt, v


def ints(wt, v):
    if wt == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        n, i = varint(v, i)
        out.append(n)
    return out


def read_pprof(path):
    """(sample types, [(location ids, values)], location -> function names, period)."""
    data = gzip.decompress(open(path, "rb").read())
    strings, types, samples, locs, funcs, period = [], [], [], {}, {}, 0
    for num, wt, v in fields(data):
        if num == 12:
            period = v
        elif num == 6:
            strings.append(v.decode("utf-8", "replace"))
        elif num == 1:
            t = dict((n, x) for n, _, x in fields(v))
            types.append((t.get(1, 0), t.get(2, 0)))
        elif num == 2:
            ids, vals = [], []
            for n, w, x in fields(v):
                if n == 1:
                    ids += ints(w, x)
                elif n == 2:
                    vals += [(y - (1 << 64)) if y >= 1 << 63 else y for y in ints(w, x)]
            samples.append((ids, vals))
        elif num == 4:
            lid, fids = 0, []
            for n, w, x in fields(v):
                if n == 1:
                    lid = x
                elif n == 4:
                    fids += [y for m, _, y in fields(x) if m == 1]
            locs[lid] = fids
        elif num == 5:
            f = dict((n, x) for n, _, x in fields(v))
            funcs[f.get(1, 0)] = f.get(2, 0)
    names = {lid: [strings[funcs.get(f, 0)] for f in fids] for lid, fids in locs.items()}
    types = ["%s/%s" % (strings[t], strings[u]) for t, u in types]
    return types, samples, names, period


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profcol", default=os.environ.get("PROFCOL_BIN", "target/debug/profcol"))
    ap.add_argument("--seconds", type=float, default=12)
    ap.add_argument("--upload-interval", type=int, default=5)
    ap.add_argument("--token", default="",
                    help="require this bearer token (bearertokenauth); the SDK sends it "
                         "in http_headers")
    args = ap.parse_args()
    try:
        import pyroscope  # noqa: F401
    except ImportError:
        print("skipped: pyroscope-io is not installed for %s" % sys.executable)
        return 0

    with tempfile.TemporaryDirectory(prefix="profcol-pyroscope-live-") as tmp:
        return live(args, tmp)


def live(args, tmp):
    """Runs profcol and the SDK with their files in `tmp`; checks the pprof files."""
    port, metrics = free_port(), free_port()
    out_dir = os.path.join(tmp, "pprof")
    config = os.path.join(tmp, "config.yaml")
    auth = ", auth: {authenticator: bearertokenauth}" if args.token else ""
    extensions = ("extensions:\n  bearertokenauth: {token: \"%s\"}\n" % args.token
                  if args.token else "")
    with open(config, "w") as f:
        f.write("""receivers:
  pyroscope: {endpoint: "127.0.0.1:%d"%s}
exporters:
  pprof: {directory: "%s"}
%sservice:
  extensions: [%s]
  telemetry: {metrics: {address: "127.0.0.1:%d"}}
  pipelines:
    profiles: {receivers: [pyroscope], exporters: [pprof]}
""" % (port, auth, out_dir, extensions, "bearertokenauth" if args.token else "", metrics))
    log = open(os.path.join(tmp, "profcol.log"), "w")
    proc = subprocess.Popen([args.profcol, "--config", config], stdout=log, stderr=log)
    try:
        wait_port(port, proc)
        busy = os.path.join(tmp, "busy.py")
        with open(busy, "w") as f:
            f.write(BUSY % {"interval": args.upload_interval})
        subprocess.run([sys.executable, busy, str(port), str(args.seconds), args.token],
                       check=True,
                       timeout=args.seconds + 60)
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        log.close()
    if code != 0:
        print(open(log.name).read())
        raise SystemExit("profcol exited with %d" % code)

    files = sorted(os.listdir(out_dir)) if os.path.isdir(out_dir) else []
    print("pprof files:", files)
    if not files:
        print(open(log.name).read())
        raise SystemExit("FAILED: profcol wrote no pprof file")
    self_time, total = {}, 0
    for name in files:
        if not name.startswith("livecheck-"):
            raise SystemExit("FAILED: %s is not named after service.name=livecheck" % name)
        types, samples, names, period = read_pprof(os.path.join(out_dir, name))
        # pprof bodies (1.x, 0.8.5+) carry CPU time; folded ones (0.8.4 and
        # older) sample counts, each worth the period (1/sampleRate).
        if types == ["cpu/nanoseconds"]:
            scale = 1
        elif types == ["samples/count"] and period > 0:
            scale = period
        else:
            raise SystemExit("FAILED: %s has sample types %s (period %d)" % (name, types, period))
        for ids, vals in samples:
            leaf = names.get(ids[0], ["?"])[0] if ids else "?"
            leaf = leaf.rsplit(" - ", 1)[-1]  # folded frames: "file.py:LINE - function"
            self_time[leaf] = self_time.get(leaf, 0) + vals[0] * scale
            total += vals[0] * scale
    top = sorted(self_time.items(), key=lambda kv: -kv[1])
    print("CPU self time by function (s):")
    for fn, v in top[:5]:
        print("  %-20s %6.2f  %4.1f%%" % (fn, v / 1e9, 100.0 * v / total))
    expect_seconds = args.seconds * 0.5
    if total / 1e9 < expect_seconds:
        raise SystemExit("FAILED: %.1f s of CPU profiled, expected at least %.1f s"
                         % (total / 1e9, expect_seconds))
    if top[0][0] != "hot_leaf" or top[0][1] < 0.5 * total:
        raise SystemExit("FAILED: hot_leaf does not lead the profile: %s" % top[:3])
    print("ok: hot_leaf leads with %.0f%% of %.1f s CPU in %d files"
          % (100.0 * top[0][1] / total, total / 1e9, len(files)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
