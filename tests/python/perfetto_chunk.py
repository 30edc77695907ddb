"""A Perfetto profile_chunk envelope as sentry-java (8.x, Android 15+
ProfilingManager) sends one, the trace built with Perfetto's own generated
protobuf classes (PyPI `perfetto`), so the field numbers are upstream's and
not profcol's. Run by tests/it/sentry_perfetto.rs:

    perfetto_chunk.py OUT.envelope  ->  prints the expected folded stacks

The trace holds what a stack-sampling trace of an app holds: a clock
snapshot, the process tree, a thread track descriptor, interned Java
(.odex) and native (libc, with a build id) frames on two packet sequences,
an incremental-state reset that reuses ids with new meanings, and
PerfSample packets on four threads.
"""

import json
import sys
import uuid

from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

CLOCK_REALTIME, CLOCK_MONOTONIC, CLOCK_BOOTTIME = 1, 3, 6
SEQ_INCREMENTAL_STATE_CLEARED = 1
PID = 4242
BOOT_NS = 86_400_000_000_000
REAL_NS = 1_795_000_000_000_000_000
THREADS = {PID: "main", 4243: "RenderThread", 4244: "OkHttp Dispatcher", 4245: "DefaultDispatch"}

ODEX = ["data", "app", "io.sentry.samples.android-1", "oat", "arm64", "base.odex"]
LIBC = ["apex", "com.android.runtime", "lib64", "bionic", "libc.so"]
BUILD_ID = bytes.fromhex("a1b2c3d4e5f60718293a4b5c6d7e8f9001020304")

# Callstacks root first, as Perfetto writes them: (function, mapping).
STACKS_BEFORE = {
    1: [("android.os.Looper.loop", ODEX), ("io.sentry.samples.android.MainActivity.computeFibonacci", ODEX)],
    2: [("android.os.Looper.loop", ODEX), ("io.sentry.samples.android.MainActivity.onDraw", ODEX), ("memcpy", LIBC)],
    3: [("java.lang.Thread.run", ODEX), ("okhttp3.internal.connection.RealCall.execute", ODEX), ("__epoll_wait", LIBC)],
}
# After the reset, callstack 1 means something else.
STACKS_AFTER = {
    1: [("android.os.Looper.loop", ODEX), ("io.sentry.samples.android.MainActivity.parseJson", ODEX)],
}
# Sequence 2 (another producer) numbers its own ids from 1 too.
STACKS_SEQ2 = {
    1: [("kotlinx.coroutines.scheduling.CoroutineScheduler$Worker.run", ODEX), ("io.sentry.samples.android.Repo.load", ODEX)],
}


def interned(stacks):
    """InternedData for `stacks`, every id numbered from 1."""
    data = pb.InternedData()
    names, segments, frames = {}, {}, {}

    def intern(table, key, make):
        if key not in table:
            table[key] = len(table) + 1
            make(table[key])
        return table[key]

    def add_name(iid, name):
        data.function_names.add(iid=iid, str=name.encode())

    def add_segment(iid, seg):
        data.mapping_paths.add(iid=iid, str=seg.encode())

    data.build_ids.add(iid=1, str=BUILD_ID)
    mappings = {}
    for path in (ODEX, LIBC):
        ids = [intern(segments, s, lambda i, s=s: add_segment(i, s)) for s in path]
        m = data.mappings.add(iid=len(mappings) + 1, path_string_ids=ids)
        if path is LIBC:
            m.build_id, m.start, m.end, m.load_bias = 1, 0x7F00000000, 0x7F00100000, 0
        else:
            m.start, m.end = 0x70000000, 0x72000000
        mappings[tuple(path)] = m.iid
    for cs_iid, stack in stacks.items():
        frame_ids = []
        for fn, path in stack:
            name_id = intern(names, fn, lambda i, fn=fn: add_name(i, fn))

            def add_frame(i, name_id=name_id, path=path):
                data.frames.add(iid=i, function_name_id=name_id, mapping_id=mappings[tuple(path)], rel_pc=0x1000 + 16 * i)

            frame_ids.append(intern(frames, (fn, tuple(path)), add_frame))
        data.callstacks.add(iid=cs_iid, frame_ids=frame_ids)
    return data


def short(fn, path):
    """The frame's name as Sentry and OTLP show it: a Java frame's method."""
    return fn.rsplit(".", 1)[1] if path is ODEX else fn


def main(out):
    trace = pb.Trace()
    expected = {}
    ts = BOOT_NS

    def packet(seq, **kw):
        p = trace.packet.add(trusted_packet_sequence_id=seq, **kw)
        return p

    clock = packet(9).clock_snapshot
    for cid, t in ((CLOCK_MONOTONIC, BOOT_NS - 5_000), (CLOCK_BOOTTIME, BOOT_NS), (CLOCK_REALTIME, REAL_NS)):
        clock.clocks.add(clock_id=cid, timestamp=t)
    tree = packet(9).process_tree
    tree.processes.add(pid=PID, ppid=1, cmdline=["io.sentry.samples.android"])
    for tid, name in THREADS.items():
        if tid != PID and tid != 4245:
            tree.threads.add(tid=tid, tgid=PID, name=name)
    packet(9).track_descriptor.thread.CopyFrom(pb.ThreadDescriptor(pid=PID, tid=4245, thread_name=THREADS[4245]))

    def samples(seq, stacks, plan):
        nonlocal ts
        for tid, cs_iid, n in plan:
            for _ in range(n):
                p = packet(seq, timestamp=ts)
                p.perf_sample.CopyFrom(pb.PerfSample(cpu=1, pid=PID, tid=tid, callstack_iid=cs_iid))
                ts += 10_000_000
                stack = ";".join(short(fn, path) for fn, path in stacks[cs_iid])
                key = f"{stack} [{THREADS[tid]}]"
                expected[key] = expected.get(key, 0) + 1

    packet(1, sequence_flags=SEQ_INCREMENTAL_STATE_CLEARED).interned_data.CopyFrom(interned(STACKS_BEFORE))
    samples(1, STACKS_BEFORE, [(PID, 1, 37), (4243, 2, 21), (4244, 3, 9)])
    packet(2, sequence_flags=SEQ_INCREMENTAL_STATE_CLEARED).interned_data.CopyFrom(interned(STACKS_SEQ2))
    samples(2, STACKS_SEQ2, [(4245, 1, 6)])
    packet(1, sequence_flags=SEQ_INCREMENTAL_STATE_CLEARED).interned_data.CopyFrom(interned(STACKS_AFTER))
    samples(1, STACKS_AFTER, [(PID, 1, 13)])

    pftrace = trace.SerializeToString()
    chunk_id, profiler_id = uuid.uuid4().hex, uuid.uuid4().hex
    meta = json.dumps({
        "profiler_id": profiler_id,
        "chunk_id": chunk_id,
        "client_sdk": {"name": "sentry.java.android", "version": "8.28.0"},
        "platform": "android",
        "release": "io.sentry.samples.android@8.28.0+1",
        "environment": "production",
        "version": "2",
        "timestamp": REAL_NS / 1e9,
        "content_type": "perfetto",
    }, separators=(",", ":")).encode()
    header = {
        "type": "profile_chunk",
        "content_type": "application/x-perfetto-trace",
        "filename": "profile.pftrace",
        "platform": "android",
        "length": len(meta) + len(pftrace),
        "meta_length": len(meta),
    }
    env_header = {"event_id": uuid.uuid4().hex, "sdk": {"name": "sentry.java.android", "version": "8.28.0"}}
    with open(out, "wb") as f:
        f.write(json.dumps(env_header).encode() + b"\n")
        f.write(json.dumps(header).encode() + b"\n")
        f.write(meta + pftrace + b"\n")
    json.dump({"chunk_id": chunk_id, "folded": expected, "first_ns": REAL_NS, "samples": sum(expected.values())}, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
