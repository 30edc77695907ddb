import java.util.concurrent.locks.LockSupport;

/** A distinctive CPU hot spot, allocation site, contended monitor and park. */
public class HotLoop {
    static volatile long sink;
    static final Object LOCK = new Object();

    static long burnTheCpu(long n) {
        long x = 0;
        for (long i = 0; i < n; i++) { x += (i * 31) ^ (x >>> 3); }
        return x;
    }

    static byte[] allocateBuffers(int n) {
        byte[] last = null;
        for (int i = 0; i < n; i++) { last = new byte[256 * 1024]; }
        return last;
    }

    static void holdTheLock() throws InterruptedException {
        synchronized (LOCK) { Thread.sleep(5); }
    }

    static void parkBriefly() { LockSupport.parkNanos(2_000_000); }

    public static void main(String[] args) throws Exception {
        long until = System.currentTimeMillis() + Long.parseLong(args.length > 0 ? args[0] : "3000");
        Thread holder = new Thread(() -> {
            try { while (System.currentTimeMillis() < until) { holdTheLock(); parkBriefly(); } }
            catch (InterruptedException e) { }
        }, "lock-holder");
        holder.start();
        while (System.currentTimeMillis() < until) {
            sink += burnTheCpu(5_000_000);
            sink += allocateBuffers(2).length;
            synchronized (LOCK) { sink++; }
        }
        holder.join();
    }
}
