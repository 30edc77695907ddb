import io.pyroscope.PyroscopeAsyncProfiler;
import io.pyroscope.labels.v2.LabelsSet;
import io.pyroscope.labels.v2.Pyroscope;
import io.pyroscope.vendor.one.profiler.AsyncProfiler;

import java.lang.reflect.Method;
import java.util.function.LongUnaryOperator;

/**
 * Recorded under the Pyroscope Java agent for the JFR fixture
 * agent-2.9.2-jdk-17.0.15-generated: CPU in JVM-generated classes (a
 * lambda, and a reflective call that -Dsun.reflect.noInflation=true makes a
 * GeneratedMethodAccessor), whose names carry numbers and addresses that
 * change from run to run. The lambda runs inside a span, set as
 * otel-profiling-java's PyroscopeOtelSpanProcessor sets it (span id and
 * the span name registered as a label constant), and inside the
 * handler=checkout labels; the reflective call outside both.
 */
public class GeneratedApp {
    static final long SPAN_ID = 0x00f067aa0ba902b7L;
    static volatile long sink;

    public static long spinReflectively(long n) {
        long x = 0;
        for (long i = 0; i < n; i++) { x += (i * 17) ^ (x >>> 5); }
        return x;
    }

    public static void main(String[] args) throws Exception {
        long until = System.currentTimeMillis() + Long.parseLong(args.length > 0 ? args[0] : "3000");
        LongUnaryOperator viaLambda = n -> {
            long x = 0;
            for (long i = 0; i < n; i++) { x += (i * 31) ^ (x >>> 3); }
            return x;
        };
        Method m = GeneratedApp.class.getMethod("spinReflectively", long.class);
        AsyncProfiler asprof = PyroscopeAsyncProfiler.getAsyncProfiler();
        long spanName = Pyroscope.LabelsWrapper.registerConstant("GET /checkout");
        LabelsSet labels = new LabelsSet("handler", "checkout");
        while (System.currentTimeMillis() < until) {
            asprof.setTracingContext(SPAN_ID, spanName);
            Pyroscope.LabelsWrapper.run(labels, () -> { sink += viaLambda.applyAsLong(2_000_000); });
            asprof.setTracingContext(0, 0);
            sink += (Long) m.invoke(null, 2_000_000L);
        }
    }
}
