package io.github.leaderlock;

import java.sql.SQLException;

/** Renews a lease (le_renew with its term), and releases it. */
final class LeaseRenewer extends Renewer {
    private final Lease lease;
    private final String dsnText;

    LeaseRenewer(Dsn dsn, String dsnText, String named, Db db, Lease lease, Timing timing) {
        super(
                dsn,
                named,
                Leaderlock.APPLICATION_NAME,
                db,
                lease.tenure,
                timing,
                "renewals",
                lease.key());
        this.lease = lease;
        this.dsnText = dsnText;
    }

    @Override
    boolean renewed(long by) throws SQLException {
        return db.callNamed(
                by, Statements.RENEW, lease.key(), lease.id(), timing.ttlSeconds(), lease.term());
    }

    @Override
    boolean refused(long by) throws SQLException {
        return stillOurs(lease, db.row(by, Statements.HOLDER_OF, lease.key()));
    }

    /**
     * After a refused renewal, what the server's answer to HOLDER_OF says: true when the lease is
     * still ours and live (its row was locked: retry until the deadline); else the lease ends, with
     * the reason, and false.
     */
    static boolean stillOurs(Lease lease, Object[] row) {
        String holder = row == null ? null : (String) row[0];
        Long term = row == null || row[1] == null ? null : ((Number) row[1]).longValue();
        boolean live = row != null && Boolean.TRUE.equals(row[2]);
        if (lease.id().equals(holder) && term != null && term == lease.term() && live) {
            lease.tenure.failing(
                    LostReason.EXPIRED, "renewals were refused while the lease's row was locked");
            return true;
        }
        if (holder != null && !holder.equals(lease.id()) && live) {
            lease.tenure.end(
                    LostReason.TAKEN,
                    "the server refused the renewal: "
                            + Text.quote(holder)
                            + " holds it in term "
                            + term);
        } else {
            lease.tenure.end(
                    LostReason.VACATED,
                    "the server refused the renewal: the lease lapsed there, or someone vacated it");
        }
        return false;
    }

    /**
     * Hands over at once (once the body stopped acting), unless the server said the lease is not
     * ours anyway; on a new connection if need be. Takes ttl/3 at most. Whether it was released.
     */
    boolean release() {
        lease.tenure.end(LostReason.RELEASED, null);
        LostReason r = lease.tenure.reason();
        if (r == LostReason.TAKEN
                || r == LostReason.VACATED
                || r == LostReason.NOT_LEADER
                || r == LostReason.REJECTED) {
            return false;
        }
        long by = System.nanoTime() + timing.callTimeout;
        try {
            if (db == null || db.isClosed()) {
                drop();
                db = Db.connect(dsn, by, named, appName);
                by = System.nanoTime() + timing.callTimeout;
            }
            boolean released =
                    db.callNamed(by, Statements.RELEASE, lease.key(), lease.id(), lease.term());
            if (released) {
                Log.info("%s: released term %d", Text.quote(lease.key()), lease.term());
            }
            return released;
        } catch (SQLException | RuntimeException e) {
            Unanswered.record(dsnText, lease.key(), lease.id(), lease.term());
            Log.warn(
                    "%s: could not release term %d (%s); it lapses at its ttl",
                    Text.quote(lease.key()), lease.term(), Text.describe(e));
            drop();
            return false;
        }
    }
}
