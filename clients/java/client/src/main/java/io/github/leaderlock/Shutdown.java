package io.github.leaderlock;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Release on the way out, SIGTERM included: see {@link Leaderlock#releaseOnShutdown()}. Every
 * lease, elector, session, member and scheduler of this library registers here while it holds
 * something; the hook ends them all at once (their next check throws, reason SHUTDOWN), then waits
 * for each to be released or closed, each bounded by its local deadline.
 */
final class Shutdown {
    private Shutdown() {}

    /** What the hook ends, then waits for. */
    interface Participant {
        /** At once, for every participant, without waiting: nothing may start a step any more. */
        void beginShutdown();

        /** Then: the release or close, bounded (by the local deadline at the latest). */
        void finishShutdown();
    }

    private static final Set<Participant> PARTICIPANTS = ConcurrentHashMap.newKeySet();
    private static boolean installed;

    /** Set by the hook: no campaign wins any more, no run is claimed. */
    static volatile boolean down;

    static synchronized void install() {
        if (!installed) {
            installed = true;
            Runtime.getRuntime().addShutdownHook(new Thread(Shutdown::run, "leaderlock-shutdown"));
        }
    }

    static void register(Participant p) {
        PARTICIPANTS.add(p);
    }

    static void unregister(Participant p) {
        PARTICIPANTS.remove(p);
    }

    private static void run() {
        down = true;
        List<Participant> all = new ArrayList<>(PARTICIPANTS);
        for (Participant p : all) {
            try {
                p.beginShutdown();
            } catch (RuntimeException e) {
                Log.warn(e, "shutting down");
            }
        }
        List<Thread> waits = new ArrayList<>();
        for (Participant p : all) {
            Thread t =
                    new Thread(
                            () -> {
                                try {
                                    p.finishShutdown();
                                } catch (RuntimeException e) {
                                    Log.warn(e, "shutting down");
                                }
                            },
                            "leaderlock-shutdown-wait");
            t.setDaemon(true);
            t.start();
            waits.add(t);
        }
        for (Thread t : waits) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }

    /**
     * A campaign that meets the shutdown: waits until {@code until} (null: until the JVM halts).
     */
    static void park(Long until) {
        while (until == null || System.nanoTime() - until < 0) {
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }
}
