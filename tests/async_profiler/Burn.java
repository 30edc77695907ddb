import java.util.*;
// Two named threads burning CPU and one allocating, for a few seconds.
public class Burn {
    static double burn(int n) { double s = 0; for (int i = 0; i < n; i++) s += Math.sqrt(i) * Math.sin(i); return s; }
    static volatile Object sink;
    static void allocate() { List<byte[]> l = new ArrayList<>(); for (int i = 0; i < 1000; i++) l.add(new byte[1024]); sink = l; }
    public static void main(String[] a) throws Exception {
        long end = System.currentTimeMillis() + Long.parseLong(a[0]) * 1000;
        List<Thread> ts = new ArrayList<>();
        for (String name : new String[] {"worker-1", "worker-2"}) {
            ts.add(new Thread(() -> { double s = 0; while (System.currentTimeMillis() < end) s += burn(50000); sink = s; }, name));
        }
        ts.add(new Thread(() -> { while (System.currentTimeMillis() < end) allocate(); }, "allocator"));
        for (Thread t : ts) t.start();
        for (Thread t : ts) t.join();
    }
}
