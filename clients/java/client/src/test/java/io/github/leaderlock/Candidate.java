package io.github.leaderlock;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The Java client as a candidate of the scenario suite (tests/clients/scenarios.py):
 *
 * <pre>
 * Candidate DSN KEY ID TTL_SECONDS RECORDS [lead|elector|shedlock]
 * </pre>
 *
 * Each idiom is the README's, word for word, with appending "tick ID TERM UNIX_SECONDS" to RECORDS
 * every 20 ms as the unit of work: releaseOnShutdown (SIGTERM: released, exit 143), and {@code
 * lease.check()} before each unit of work. {@code lead} (the default): Leaderlock.lead in a
 * try-with-resources, in a loop; {@code elector}: an Elector whose work ticks; {@code shedlock}:
 * the ShedLock provider's (io.github.leaderlock.shedlock.ShedLockCandidate, of the shedlock
 * module's tests).
 */
public final class Candidate {
    private Candidate() {}

    private static FileOutputStream records;

    private static void tick(Lease lease) throws IOException {
        double now = System.currentTimeMillis() / 1000.0;
        String line =
                String.format(Locale.ROOT, "tick %s %d %.6f%n", lease.id(), lease.term(), now);
        records.write(line.getBytes(StandardCharsets.UTF_8)); // one write per line, O_APPEND
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 5
                || args.length > 6
                || (args.length == 6
                        && !List.of("lead", "elector", "shedlock").contains(args[5]))) {
            System.err.println(
                    "usage: Candidate DSN KEY ID TTL_SECONDS RECORDS [lead|elector|shedlock]");
            System.exit(2);
        }
        if (args.length == 6 && args[5].equals("shedlock")) {
            Class.forName("io.github.leaderlock.shedlock.ShedLockCandidate")
                    .getMethod("main", String[].class)
                    .invoke(null, (Object) Arrays.copyOf(args, 5));
            return;
        }
        String dsn = args[0];
        String key = args[1];
        String id = args[2];
        Duration ttl = Duration.ofNanos((long) (Double.parseDouble(args[3]) * 1e9));
        records = new FileOutputStream(args[4], true);
        if (args.length == 6 && args[5].equals("elector")) {
            elector(dsn, key, id, ttl);
        } else {
            lead(dsn, key, id, ttl);
        }
    }

    /** The README's first idiom. */
    static void lead(String dsn, String key, String id, Duration ttl) throws Exception {
        Leaderlock.releaseOnShutdown(); // SIGTERM: every lease ends, is released; exit 143
        LeaseOptions options = new LeaseOptions().ttl(ttl).id(id);
        while (true) { // campaign again after a loss
            try (Lease lease = Leaderlock.lead(dsn, key, options)) {
                while (true) {
                    lease.check(); // LeaseLostException past the local deadline
                    tick(lease); // one unit of work
                    lease.awaitLoss(Duration.ofMillis(20));
                }
            } catch (LeaseLostException lost) {
                System.err.println("candidate: " + lost.getMessage());
            }
        }
    }

    /** The README's Elector. */
    static void elector(String dsn, String key, String id, Duration ttl) throws Exception {
        Leaderlock.releaseOnShutdown(); // SIGTERM: the work stops, the lease is released; exit 143
        Elector elector =
                new Elector(
                        dsn,
                        key,
                        new LeaseOptions().ttl(ttl).id(id),
                        lease -> {
                            while (true) {
                                lease.check(); // LeaseLostException: the elector campaigns again
                                tick(lease);
                                lease.awaitLoss(Duration.ofMillis(20));
                            }
                        });
        elector.start();
        elector.join();
    }
}
