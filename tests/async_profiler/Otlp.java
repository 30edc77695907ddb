import one.profiler.AsyncProfiler;
import java.nio.file.*;
import java.util.*;

// Burns CPU on two named threads and allocates on a third. Profiled by
// async-profiler's agent from outside (`Otlp agent SECONDS`, the live test
// tests/it/async_profiler.rs), or through its Java API for 3 s, then writes
// its OTLP dump (ProfilesData bytes): from dumpOtlp(), or with `file` as
// its agent writes `-o otlp -f FILE` (`Otlp OUT START_COMMAND [file|total]`,
// the recordings in tests/fixtures/otlp-revisions/async-profiler-*).
public class Otlp {
    static double burn(int n) { double s = 0; for (int i = 0; i < n; i++) s += Math.sqrt(i) * Math.sin(i); return s; }
    static volatile Object sink;
    static void allocate() { List<byte[]> l = new ArrayList<>(); for (int i = 0; i < 1000; i++) l.add(new byte[1024]); sink = l; }

    static void work(long millis) throws InterruptedException {
        long end = System.currentTimeMillis() + millis;
        List<Thread> ts = new ArrayList<>();
        for (String name : new String[] {"worker-1", "worker-2"}) {
            ts.add(new Thread(() -> { double s = 0; while (System.currentTimeMillis() < end) s += burn(50000); sink = s; }, name));
        }
        ts.add(new Thread(() -> { while (System.currentTimeMillis() < end) allocate(); }, "allocator"));
        for (Thread t : ts) t.start();
        for (Thread t : ts) t.join();
    }

    // 4.5's Java API takes the counter (SAMPLES, or TOTAL); 4.2 to 4.4 none.
    @SuppressWarnings({"unchecked", "rawtypes"})
    static byte[] dump(AsyncProfiler p, boolean total) throws Exception {
        for (java.lang.reflect.Method m : AsyncProfiler.class.getMethods()) {
            if (!m.getName().equals("dumpOtlp")) continue;
            if (m.getParameterCount() == 0) return (byte[]) m.invoke(p);
            Class counter = m.getParameterTypes()[0];
            return (byte[]) m.invoke(p, Enum.valueOf(counter, total ? "TOTAL" : "SAMPLES"));
        }
        throw new IllegalStateException("no dumpOtlp in this async-profiler");
    }

    public static void main(String[] a) throws Exception {
        if (a[0].equals("agent")) {
            work(Long.parseLong(a[1]) * 1000);
            return;
        }
        AsyncProfiler p = AsyncProfiler.getInstance();
        System.out.println("async-profiler " + p.getVersion().trim());
        System.out.println(p.execute(a[1]).trim());
        work(3000);
        if (a.length > 2 && a[2].equals("file")) {
            // As the agent and asprof write it: `-o otlp -f FILE`.
            System.out.println(p.execute("stop,otlp,file=" + a[0]).trim());
        } else {
            p.stop();
            byte[] b = dump(p, a.length > 2 && a[2].equals("total"));
            Files.write(Paths.get(a[0]), b);
            System.out.println("wrote " + b.length + " bytes");
        }
    }
}
