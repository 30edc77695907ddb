import io.pyroscope.labels.v2.LabelsSet;
import io.pyroscope.labels.v2.Pyroscope;

/**
 * The program tests/it/pyroscope_jfr.rs runs under the Pyroscope Java agent:
 * a distinctive CPU hot spot and allocation site, both inside dynamic labels
 * (the agent's contextId and LabelsSnapshot). Runs for args[0] ms.
 */
public class AgentApp {
    static volatile long sink;

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

    public static void main(String[] args) throws Exception {
        long until = System.currentTimeMillis() + Long.parseLong(args[0]);
        LabelsSet labels = new LabelsSet("handler", "checkout");
        while (System.currentTimeMillis() < until) {
            Pyroscope.LabelsWrapper.run(labels, () -> {
                sink += burnTheCpu(5_000_000);
                sink += allocateBuffers(4).length;
            });
        }
    }
}
