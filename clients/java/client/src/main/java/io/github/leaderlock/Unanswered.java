package io.github.leaderlock;

import java.util.HashMap;
import java.util.Map;
import java.util.Objects;

/**
 * Releases that heard no answer, by (connection string, key, id): their term (null for an
 * interrupted try's). Such a release may still reach the server, so a campaign under the same id
 * sends it again, and hears an answer, before its first try: a try before that would extend the
 * very tenure the late release then ends, while this process leads in it (docs/verification.md).
 */
final class Unanswered {
    private Unanswered() {}

    private record Slot(String dsn, String key, String id) {}

    /** A pending release: its term (null: whichever tenure the id holds). */
    record Pending(Long term) {}

    private static final Map<Slot, Pending> PENDING = new HashMap<>();

    static synchronized void record(String dsn, String key, String id, Long term) {
        PENDING.put(new Slot(dsn, key, id), new Pending(term));
    }

    /** The release of {@code term} sent again was answered: forget it (not one recorded since). */
    static synchronized void answered(String dsn, String key, String id, Long term) {
        Slot s = new Slot(dsn, key, id);
        Pending p = PENDING.get(s);
        if (p != null && Objects.equals(p.term(), term)) {
            PENDING.remove(s);
        }
    }

    /** The release under this id that heard no answer, or null. */
    static synchronized Pending pending(String dsn, String key, String id) {
        return PENDING.get(new Slot(dsn, key, id));
    }
}
