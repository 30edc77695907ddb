import io.sentry.ProfileLifecycle;
import io.sentry.Sentry;
import io.sentry.SentryLevel;
import java.nio.file.Files;

/**
 * The Sentry Java SDK's JVM continuous profiler (async-profiler, wall clock)
 * around known CPU work, for tests/it/sentry_java.rs: a thread named
 * "burner" spends its whole life in burnTheCpu. Arguments: the DSN and the
 * milliseconds to burn. One profile chunk is sent when the SDK closes.
 */
public class App {
  static volatile long sink;

  static long burnTheCpu(long until) {
    long x = 1;
    while (System.nanoTime() < until) {
      for (int i = 0; i < 10_000; i++) {
        x = x * 6364136223846793005L + 1442695040888963407L;
      }
    }
    return x;
  }

  public static void main(String[] args) throws Exception {
    String dsn = args[0];
    long millis = Long.parseLong(args[1]);
    // The profiler writes each chunk's JFR here before converting it.
    String dir = Files.createTempDirectory("sentry-java-profiles").toString();
    Sentry.init(
        o -> {
          o.setDsn(dsn);
          o.setRelease("sentryjavaapp@1.0");
          o.setEnvironment("test");
          o.setProfileSessionSampleRate(1.0);
          o.setProfileLifecycle(ProfileLifecycle.MANUAL);
          o.setProfilingTracesDirPath(dir);
          // Its whole account (profiler start, chunk captured, envelope
          // sent), for the test's failure message: a run once sent
          // nothing, and said nothing at WARNING.
          o.setDebug(true);
          o.setDiagnosticLevel(SentryLevel.DEBUG);
          // Closing waits this long for the chunk to be converted and
          // sent: the default 2 s was too short on a loaded CI machine.
          o.setShutdownTimeoutMillis(30_000);
        });
    Sentry.startProfiler();
    Thread burner =
        new Thread(() -> sink = burnTheCpu(System.nanoTime() + millis * 1_000_000L), "burner");
    burner.start();
    burner.join();
    Sentry.stopProfiler();
    // Closing finishes the chunk (shorter than the SDK's 10 s) and sends it.
    Sentry.close();
  }
}
