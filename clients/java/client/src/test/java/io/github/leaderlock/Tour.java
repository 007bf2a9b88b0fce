package io.github.leaderlock;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.BooleanSupplier;

/**
 * The Java client's tour (tests/clients/tours.py): every statement of the library, sent through its
 * public API (and the ShedLock provider's, when it is on the classpath), each answer checked. Run
 * by tests/clients/hostile.py against a database whose owner set a search_path full of traps, it
 * shows that no statement depends on the path.
 *
 * <pre>
 * Tour DSN PREFIX [--pooled]
 * </pre>
 *
 * Every key and job starts with PREFIX. --pooled: DSN goes through a transaction-pooling pgbouncer
 * (the library does there what it does anywhere: it LISTENs, and polls when no notification comes).
 * LEADERLOCK_SCHEMA, when set, names the extension's schema. LEADERLOCK_TOUR_EDITION= portable: the
 * database has the portable edition (no schedules kept in the database). One line per step; at the
 * end, the library's statements the tour did not send, with why. Exits 1 if a step failed or a
 * statement was not sent for no known reason.
 */
public final class Tour {
    /** Statements the tour cannot make the library send here, and why. */
    private static final Map<String, String> UNREACHABLE = new TreeMap<>();

    static {
        UNREACHABLE.put(
                "RENEW_LEGACY",
                "sent only on an extension schema before 0.5.0 (le_renew without a term), after le_renew's 42883");
        UNREACHABLE.put(
                "RELEASE_LEGACY",
                "sent only on an extension schema before 0.5.0 (le_release without a term), after le_release's 42883");
        UNREACHABLE.put(
                "WORKER_RUNS",
                "sent only on an extension schema before 0.5.0 (no le_capabilities())");
        UNREACHABLE.put(
                "EXPIRE_LAPSED",
                "sent only where no worker serves (the portable edition, the library not preloaded): "
                        + "le_capabilities() says one does here");
    }

    private final String dsn;
    private final String prefix;
    private final List<String> failed = new ArrayList<>();
    private final Set<String> sent = ConcurrentHashMap.newKeySet();
    private String schema;

    private Tour(String dsn, String prefix) {
        this.dsn = dsn;
        this.prefix = prefix;
    }

    interface Step {
        String run() throws Exception;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2
                || args.length > 3
                || (args.length == 3 && !args[2].equals("--pooled"))) {
            System.err.println("usage: Tour DSN PREFIX [--pooled]");
            System.exit(2);
        }
        Tour t = new Tour(args[0], args[1]);
        Statements.trace = t.sent::add;
        long start = System.nanoTime();
        if (System.getenv("LEADERLOCK_SCHEMA") != null) {
            System.out.println(
                    "LEADERLOCK_SCHEMA=" + Text.quote(System.getenv("LEADERLOCK_SCHEMA")));
        }
        if (args.length == 3) {
            System.out.println(
                    "pooled: lead, Elector and HistoryWatcher LISTEN as anywhere; nothing relies on a notification");
        }
        try (Connection c = t.own()) {
            t.schema = Calls.findSchema(c, null);
        }
        HistoryWatcher[] w = {null};
        long[] since = {0};
        t.step(
                "history: watch from now on (the position)",
                () -> {
                    w[0] =
                            HistoryWatcher.open(
                                    t.dsn,
                                    new HistoryOptions()
                                            .keyPrefix(t.prefix)
                                            .poll(Duration.ofMillis(100)));
                    since[0] = w[0].position();
                    return "position " + since[0];
                });
        String key = t.prefix + "-lease";
        t.step(
                "lease: lead, guard, a renewal deferred by the lock, a follower, a handover on stop",
                () -> t.lease(key));
        t.step(
                "lease: a release that heard no answer is sent again before the next campaign",
                () -> t.releaseAgain(key));
        t.step(
                "refusal: a schema that does not hold leaderlock",
                () -> {
                    try {
                        Leaderlock.lead(
                                t.dsn,
                                key,
                                new LeaseOptions()
                                        .ttl(Duration.ofSeconds(1))
                                        .schema(t.prefix + "_nowhere"));
                        throw new AssertionError("led");
                    } catch (NotInstalledException e) {
                        return e.getMessage();
                    }
                });
        t.step(
                "refusal: a ttl above leaderlock.max_ttl",
                () -> {
                    try {
                        Leaderlock.lead(t.dsn, key, new LeaseOptions().ttl(Duration.ofHours(1000)));
                        throw new AssertionError("led");
                    } catch (BadArgumentException e) {
                        check(e.getMessage().contains("max_ttl"), e.getMessage());
                        return e.getMessage();
                    }
                });
        t.step(
                "session: open, acquire, wait, guard, a release sent again, renew, close",
                t::session);
        String job = t.prefix + "-job";
        t.step(
                "schedule: two replicas claim, renew, finish; the refused one reads the run",
                () -> t.schedule(job));
        if ("portable".equals(System.getenv("LEADERLOCK_TOUR_EDITION"))) {
            UNREACHABLE.put("NEXT_DUE", "the portable edition keeps no schedules in the database");
        } else {
            t.step(
                    "schedule by the job's name alone: its schedule kept in the database (le_schedule), every second, then paused",
                    () -> t.registered(t.prefix + "-registered"));
        }
        t.step(
                "group: two members share four partitions, a revoked one given back once onRevoked"
                        + " returned, the guard, both leave",
                () -> t.group(t.prefix + "-group"));
        t.step(
                "ShedLock: lock, the term, the guard, lockAtLeastFor kept, extend, release",
                () -> t.shedlock(t.prefix + "-shedlock"));
        if (w[0] != null) {
            t.step(
                    "history: the tour's transitions, in order",
                    () -> t.history(w[0], since[0], key, job));
        }
        t.report((System.nanoTime() - start) / 1e9);
    }

    private void step(String name, Step f) {
        long start = System.nanoTime();
        try {
            String detail = f.run();
            System.out.printf(
                    "ok   %s (%d ms): %s%n", name, (System.nanoTime() - start) / 1_000_000, detail);
        } catch (Throwable e) {
            System.out.printf(
                    "FAIL %s (%d ms): %s%n", name, (System.nanoTime() - start) / 1_000_000, e);
            e.printStackTrace(System.out);
            failed.add(name);
        }
        System.out.flush();
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    /** Whether the library sent the statement constant {@code name}. */
    private boolean reached(String name) {
        return sent.contains(Statements.ALL.get(name));
    }

    /** A connection of the tour's own (for the transactions a guard fences). */
    private Connection own() throws Exception {
        return Dsn.parse(dsn).connect();
    }

    private static boolean within(double seconds, BooleanSupplier ok) throws InterruptedException {
        long until = System.nanoTime() + (long) (seconds * 1e9);
        while (!ok.getAsBoolean()) {
            if (System.nanoTime() - until > 0) {
                return false;
            }
            Thread.sleep(20);
        }
        return true;
    }

    /** A statement of the tour's own, its objects named in leaderlock's schema (x). */
    private Object sql(Connection c, String text, Object... args) throws Exception {
        try (PreparedStatement st = c.prepareStatement(text.replace("x.", schema + "."))) {
            Db.bindAll(st, args);
            try (ResultSet rs = st.executeQuery()) {
                return rs.next() ? rs.getObject(1) : null;
            }
        }
    }

    /**
     * A leads (announcing a value); B, an Elector waiting, sees A lead; a transaction A's guard
     * fences holds the lease's row through a renewal, which is deferred (HOLDER_OF: still ours),
     * then goes on; A closed releases, and B leads in a later term.
     */
    @SuppressWarnings("try") // closed early on purpose: the handover is the step
    private String lease(String key) throws Exception {
        List<String> bSaw = new CopyOnWriteArrayList<>();
        List<Long> bTerms = new CopyOnWriteArrayList<>();
        try (Lease a =
                Leaderlock.lead(
                        dsn,
                        key,
                        new LeaseOptions()
                                .ttl(Duration.ofSeconds(3))
                                .id(prefix + "-a")
                                .value("{\"tour\": \"a\"}"))) {
            check(a.term() > 0 && a.isLeader(), "A's lease " + a);
            Elector b =
                    new Elector(
                                    dsn,
                                    key,
                                    new LeaseOptions()
                                            .ttl(Duration.ofSeconds(2))
                                            .id(prefix + "-b")
                                            .poll(Duration.ofMillis(200)),
                                    lease -> {
                                        bTerms.add(lease.term());
                                        while (true) {
                                            lease.check();
                                            lease.awaitLoss(Duration.ofMillis(50));
                                        }
                                    })
                            .listener(
                                    new Elector.Listener() {
                                        @Override
                                        public void onNewLeader(String holder) {
                                            bSaw.add(String.valueOf(holder));
                                        }
                                    });
            b.start();
            try {
                try (Connection c = own()) {
                    c.setAutoCommit(false);
                    check(a.guard(c) == a.term(), "guard's term");
                    long before = a.deadlineNanos();
                    Thread.sleep(1300); // across a renewal (every 1 s)
                    c.commit();
                    check(
                            reached("HOLDER_OF"),
                            "no renewal met the row locked (HOLDER_OF not sent)");
                    check(
                            within(2, () -> a.deadlineNanos() > before) && a.isLeader(),
                            "no renewal after the lock");
                }
                check(
                        within(
                                3,
                                () ->
                                        !bSaw.isEmpty()
                                                && bSaw.get(bSaw.size() - 1).equals(prefix + "-a")),
                        "B never saw A: " + bSaw);
                a.close();
                check(
                        within(5, () -> !bTerms.isEmpty()),
                        "B did not lead within 5 s of A's release");
                check(
                        bTerms.get(0) > a.term(),
                        "B's term " + bTerms.get(0) + " after A's " + a.term());
            } finally {
                b.stop();
            }
            return "A led in term "
                    + a.term()
                    + ", renewal deferred then made; B saw A, led in term "
                    + bTerms.get(0)
                    + "; both released";
        }
    }

    /**
     * A release under an id that heard no answer is sent again, and answered (RELEASE, then HOLDS:
     * the tenure is not held), before the next campaign under that id tries.
     */
    private String releaseAgain(String key) throws Exception {
        String me = prefix + "-again";
        Unanswered.record(dsn, key, me, 1L);
        try (Lease l =
                Leaderlock.lead(
                        dsn,
                        key,
                        new LeaseOptions()
                                .ttl(Duration.ofSeconds(2))
                                .id(me)
                                .timeout(Duration.ofSeconds(5)))) {
            check(reached("HOLDS"), "HOLDS not sent");
            check(
                    Unanswered.pending(dsn, key, me) == null,
                    "the unanswered release is still pending");
            return "led in term " + l.term() + " once the release sent again was answered";
        }
    }

    @SuppressWarnings("try") // closed early on purpose: the close is the step
    private String session() throws Exception {
        String k1 = prefix + "-s1";
        String k2 = prefix + "-s2";
        try (Session s =
                        Session.open(
                                dsn,
                                new SessionOptions()
                                        .ttl(Duration.ofMillis(1500))
                                        .id(prefix + "-s")
                                        .keepValues(true));
                Session rival =
                        Session.open(
                                dsn,
                                new SessionOptions()
                                        .ttl(Duration.ofMillis(1500))
                                        .id(prefix + "-rival")
                                        .lockDelay(Duration.ofMillis(100)))) {
            check(!s.handle().isEmpty() && s.isAlive(), "session " + s.handle());
            SessionLease l1 = s.tryAcquire(k1).orElseThrow();
            check(s.tryAcquire(k1).orElseThrow().term() == l1.term(), "the same tenure again");
            SessionLease r2 = rival.tryAcquire(k2).orElseThrow();
            check(s.tryAcquire(k2).isEmpty(), "acquired the rival's key");
            try {
                s.acquire(k2, Duration.ofMillis(300));
                throw new AssertionError("acquired the rival's key, waiting");
            } catch (NotAcquiredException expected) {
                // the rival holds it
            }
            Thread releaser =
                    new Thread(
                            () -> {
                                try {
                                    Thread.sleep(300);
                                } catch (InterruptedException e) {
                                    return;
                                }
                                r2.release();
                            });
            releaser.start();
            SessionLease l2 = s.acquire(k2, Duration.ofSeconds(5));
            releaser.join();
            check(l2.term() > r2.term(), "waited for: term " + l2.term());
            // a transaction l1's guard fences holds k1's row; a release of k1 that heard no answer
            // is sent again before k1 is acquired again, meets the row locked, and is asked
            // whether the tenure is still held: it is, so no try
            SessionLease l1b;
            try (Connection c = own()) {
                c.setAutoCommit(false);
                check(l1.guard(c) == l1.term(), "guard's term");
                s.releaseUnanswered(k1, l1.term());
                check(!l1.isLeader(), "the released lease is alive");
                check(
                        s.tryAcquire(k1).isEmpty(),
                        "acquired while the release sent again meets the lock");
                check(reached("HOLDS"), "HOLDS not sent");
                c.commit();
                l1b = s.tryAcquire(k1).orElseThrow();
                check(l1b.term() > l1.term(), "after the lock: term " + l1b.term());
            }
            long d = s.deadlineNanos();
            check(
                    within(2, () -> s.deadlineNanos() > d) && s.isAlive() && l1b.isLeader(),
                    "no renewal");
            s.close();
            check(!s.isAlive() && !l1b.isLeader() && !l2.isLeader(), "alive after close");
            return "terms "
                    + l1.term()
                    + ", "
                    + l2.term()
                    + " (waited for), "
                    + l1b.term()
                    + " (after the release sent again); renewed; closed";
        }
    }

    private String schedule(String job) throws Exception {
        Map<Instant, List<String>> runs = new ConcurrentHashMap<>();
        List<Scheduler> replicas = new ArrayList<>();
        for (String id : List.of(prefix + "-ra", prefix + "-rb")) {
            Scheduler s =
                    new Scheduler(
                            dsn,
                            job,
                            Schedule.every(Duration.ofSeconds(1)),
                            new SchedulerOptions()
                                    .id(id)
                                    .ttl(Duration.ofMillis(1500))
                                    .poll(Duration.ofMillis(100)));
            replicas.add(s);
            s.start(
                    run -> {
                        if (run.awaitLoss(
                                Duration.ofMillis(700))) { // across a renewal (every 0.5 s)
                            throw new IllegalStateException("tour: not ours after 700 ms");
                        }
                        run.check();
                        List<String> by =
                                runs.computeIfAbsent(run.due(), k -> new CopyOnWriteArrayList<>());
                        by.add(run.id() + " (term " + run.term() + ")");
                        if (runs.size() % 2 == 0) {
                            throw new IllegalStateException(
                                    "tour: a run that fails, recorded with its detail");
                        }
                    });
        }
        Thread.sleep(3200);
        for (Scheduler s : replicas) {
            check(s.stop(Duration.ofSeconds(5)), "a replica did not stop");
            check(s.error() == null, "a replica failed: " + s.error());
        }
        check(runs.size() >= 2, runs.size() + " runs in 3.2 s");
        List<String> parts = new ArrayList<>();
        for (Map.Entry<Instant, List<String>> e : new TreeMap<>(runs).entrySet()) {
            check(e.getValue().size() == 1, "the run due " + e.getKey() + " ran " + e.getValue());
            parts.add(e.getKey() + " by " + e.getValue().get(0));
        }
        for (String name : List.of("RENEW_RUN", "RUN_STATE", "FINISH_RUN")) {
            check(reached(name), name + " not sent");
        }
        return String.join(", ", parts);
    }

    /**
     * A scheduler given the job's name alone runs the schedule kept in the database (made here with
     * le_schedule), and stops claiming once it is paused.
     */
    private String registered(String job) throws Exception {
        try (Connection c = own()) {
            check(
                    sql(
                                    c,
                                    "SELECT x.le_schedule(job => ?, every => pg_catalog.make_interval(secs => 1))",
                                    job)
                            != null,
                    "le_schedule");
            try {
                List<Instant> dues = new CopyOnWriteArrayList<>();
                Scheduler s =
                        new Scheduler(
                                dsn,
                                job,
                                Schedule.registered(),
                                new SchedulerOptions()
                                        .id(prefix + "-registered")
                                        .ttl(Duration.ofMillis(1500))
                                        .poll(Duration.ofMillis(100)));
                s.start(
                        run -> {
                            dues.add(run.due());
                            run.check();
                        });
                boolean ran = within(4, () -> dues.size() >= 2);
                check(
                        Boolean.TRUE.equals(sql(c, "SELECT x.le_pause_schedule(job => ?)", job)),
                        "le_pause_schedule");
                Thread.sleep(300);
                int paused = dues.size();
                Thread.sleep(1200);
                check(s.stop(Duration.ofSeconds(5)), "the scheduler did not stop");
                check(ran, dues.size() + " runs in 4 s");
                check(dues.size() == paused, (dues.size() - paused) + " runs while paused");
                check(new HashSet<>(dues).size() == dues.size(), "runs due " + dues);
                for (Instant d : dues) {
                    check(d.getNano() == 0, "runs due " + dues);
                }
                check(reached("NEXT_DUE"), "NEXT_DUE not sent");
                return "runs due " + dues + "; none while paused";
            } finally {
                sql(c, "SELECT x.le_unschedule(job => ?)", job);
            }
        }
    }

    /**
     * A owns the group's four partitions; B joins: A is told to give two back (onRevoked, then
     * le_ack), B owns them; B's guard fences a write; B leaves, A owns all four again; A leaves.
     * Through the pooler no notification comes: rounds every 0.5 s do it.
     */
    private String group(String name) throws Exception {
        Map<String, List<Integer>> revoked = new ConcurrentHashMap<>();
        java.util.function.Function<String, MemberOptions> options =
                id ->
                        MemberOptions.of(name)
                                .member(prefix + "-" + id)
                                .ttl(Duration.ofMillis(1500))
                                .partitions(4)
                                .drain(Duration.ofSeconds(2))
                                .onRevoked(
                                        p ->
                                                revoked.computeIfAbsent(
                                                                id,
                                                                k -> new CopyOnWriteArrayList<>())
                                                        .add(p));
        String shared;
        try (Member a = Leaderlock.member(dsn, options.apply("ma"))) {
            check(a.owned().size() == 4, "A alone owns " + a.owned());
            try (Member b = Leaderlock.member(dsn, options.apply("mb"))) {
                check(
                        within(8, () -> a.owned().size() == 2 && b.owned().size() == 2),
                        "A owns " + a.owned() + ", B " + b.owned());
                check(reached("GROUP_ACK"), "A gave nothing back (GROUP_ACK not sent)");
                int p = b.owned().firstKey();
                long term = b.owned().get(p);
                try (Connection c = own()) {
                    c.setAutoCommit(false);
                    check(b.guard(c, p) == term, "B's guard of partition " + p);
                    c.commit();
                }
                shared = "A " + a.owned() + ", B " + b.owned() + " (A revoked " + revoked + ")";
            }
            check(within(8, () -> a.owned().size() == 4), "A owns " + a.owned() + " after B left");
        }
        check(reached("GROUP_LEAVE"), "GROUP_LEAVE not sent");
        return shared + "; B left, A owned all four again; A left";
    }

    /**
     * The ShedLock provider (when on the classpath): its lock, the term for the task, the guard,
     * lockAtLeastFor kept by the server, an extension, a release.
     */
    private String shedlock(String name) throws Exception {
        Class<?> step;
        try {
            step = Class.forName("io.github.leaderlock.shedlock.TourStep");
        } catch (ClassNotFoundException e) {
            return "the provider is not on the classpath: skipped";
        }
        return (String) step.getMethod("run", String.class, String.class).invoke(null, dsn, name);
    }

    /**
     * The transitions of the tour's keys and job since the start, once each, in order; then, from
     * the same position, one key's only.
     */
    private String history(HistoryWatcher w, long since, String key, String job) throws Exception {
        try (w) {
            Map<String, Boolean> want = new TreeMap<>();
            for (String k :
                    List.of(
                            "acquired " + key,
                            "released " + key,
                            "run_claimed " + job,
                            "run_finished " + job,
                            "acquired " + prefix + "-s1",
                            "released " + prefix + "-s1")) {
                want.put(k, false);
            }
            long last = since;
            Transition first = null;
            int n = 0;
            long until = System.nanoTime() + 10_000_000_000L;
            while (want.containsValue(false)) {
                Transition t = w.next(Duration.ofNanos(Math.max(1, until - System.nanoTime())));
                check(t != null, "after " + n + " transitions, not seen: " + want);
                check(
                        t.position() > last && t.key().startsWith(prefix),
                        "transition " + t + " after position " + last);
                last = t.position();
                n++;
                want.computeIfPresent(t.event() + " " + t.key(), (k, v) -> true);
                if (first == null && t.key().equals(key)) {
                    first = t;
                }
            }
            check(
                    w.position() >= last,
                    "position " + w.position() + " before the last transition delivered, " + last);
            try (HistoryWatcher w2 =
                    HistoryWatcher.open(dsn, new HistoryOptions().since(since).key(key))) {
                Transition t = w2.next(Duration.ofSeconds(5));
                check(
                        t != null
                                && t.position() == first.position()
                                && t.event().equals(first.event()),
                        "from position "
                                + since
                                + " for "
                                + key
                                + ": "
                                + t
                                + "; first time "
                                + first);
                return n
                        + " transitions after "
                        + since
                        + ", through "
                        + w.position()
                        + "; from "
                        + since
                        + " again for one key: "
                        + t;
            }
        }
    }

    /** Prints the statements the tour did not send and why, and exits. */
    private void report(double took) {
        int sentN = 0;
        boolean unknown = false;
        for (String name : Statements.ALL.keySet()) {
            if (reached(name)) {
                sentN++;
                continue;
            }
            String why = UNREACHABLE.get(name);
            if (why == null) {
                why = "no reason known: the tour should have sent it";
                unknown = true;
            }
            System.out.println("not sent: " + name + ": " + why);
        }
        System.out.printf(
                "%d of the library's %d statements sent, in %.1f s%n",
                sentN, Statements.ALL.size(), took);
        List<String> f = new ArrayList<>(failed);
        if (unknown) {
            f.add("statements not sent");
        }
        if (!f.isEmpty()) {
            System.out.println("FAILED: " + String.join("; ", f));
            System.exit(1);
        }
        System.out.println("tour ok");
        System.exit(0);
    }
}
