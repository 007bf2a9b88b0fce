package io.github.leaderlock;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Locale;

/**
 * The Java client as a runner of scheduled runs for the scenario suite
 * (tests/clients/runs_scenario.py):
 *
 * <pre>
 * RunCandidate DSN JOB ID PERIOD_MS TTL_SECONDS GRACE_SECONDS RECORDS WORK_SECONDS
 * </pre>
 *
 * It schedules JOB every PERIOD_MS milliseconds as ID, with a claim ttl of TTL_SECONDS and a
 * misfire grace of GRACE_SECONDS (0: the default, the period; negative: none). For each run it
 * appends to RECORDS (O_APPEND, one write per line) "start ID TERM DUE UNIX_SECONDS", then until
 * WORK_SECONDS have passed: if the run is no longer ours, "lost ..." and the function returns; else
 * "tick ..." and a 20 ms sleep; then "end ...". DUE is the due instant in UTC with microseconds,
 * UNIX_SECONDS the time of the line. SIGTERM ends it with status 143, once the run under way has
 * returned and its outcome was recorded (releaseOnShutdown).
 */
public final class RunCandidate {
    private RunCandidate() {}

    public static void main(String[] args) throws Exception {
        if (args.length != 8) {
            System.err.println(
                    "usage: RunCandidate DSN JOB ID PERIOD_MS TTL_SECONDS GRACE_SECONDS RECORDS WORK_SECONDS");
            System.exit(2);
        }
        String dsn = args[0];
        String job = args[1];
        String id = args[2];
        Duration period = Duration.ofMillis(Long.parseLong(args[3]));
        Duration ttl = seconds(args[4]);
        double grace = Double.parseDouble(args[5]);
        FileOutputStream records = new FileOutputStream(args[6], true);
        long work = seconds(args[7]).toNanos();

        Leaderlock.releaseOnShutdown(); // SIGTERM: the run under way ends, its outcome is recorded
        SchedulerOptions options = new SchedulerOptions().id(id).ttl(ttl);
        if (grace != 0) {
            options.misfireGrace(Duration.ofNanos((long) (grace * 1e9)));
        }
        Scheduler scheduler = new Scheduler(dsn, job, Schedule.every(period), options);
        scheduler.run(
                run -> {
                    // Each record bears the time read before the check that allowed it: a
                    // pause between the check and the write (a SIGSTOP) must not date the
                    // unit of work after the pause.
                    double at = now();
                    if (!run.isOurs()) { // (paused right after the claim)
                        record(records, "lost", run, at);
                        return;
                    }
                    record(records, "start", run, at);
                    long end = System.nanoTime() + work;
                    while (System.nanoTime() - end < 0) {
                        // right before each unit of work: isOurs reads the clock
                        at = now();
                        if (!run.isOurs()) {
                            record(records, "lost", run, at);
                            return;
                        }
                        record(records, "tick", run, at);
                        Thread.sleep(20);
                    }
                    record(records, "end", run, now());
                });
    }

    private static Duration seconds(String s) {
        return Duration.ofNanos((long) (Double.parseDouble(s) * 1e9));
    }

    private static double now() {
        return System.currentTimeMillis() / 1000.0;
    }

    private static void record(FileOutputStream records, String kind, ScheduledRun run, double at)
            throws IOException {
        String line =
                String.format(
                        Locale.ROOT,
                        "%s %s %d %s %.6f%n",
                        kind,
                        run.id(),
                        run.term(),
                        ScheduledRun.DUE.format(run.due()),
                        at);
        records.write(line.getBytes(StandardCharsets.UTF_8)); // one write per line
    }
}
