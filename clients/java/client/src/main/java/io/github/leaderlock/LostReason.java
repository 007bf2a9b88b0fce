package io.github.leaderlock;

/** Why a lease, a session's lease or a scheduled run ended (the other clients' reasons). */
public enum LostReason {
    /**
     * The local deadline passed before a renewal succeeded (the process was paused, renewals were
     * late, or refused while the row was locked).
     */
    EXPIRED,
    /** The local deadline passed while the server could not be reached (or did not answer). */
    CONNECTION_LOST,
    /** The server refused the renewal: another holder has it now (a run: claimed again). */
    TAKEN,
    /**
     * The server refused the renewal: it lapsed there, or someone vacated it (le_force_release).
     */
    VACATED,
    /** The server rejected the renewal for good (no privilege, no extension). */
    REJECTED,
    /** le_assert_leader (a guard) said this process does not lead in this term (LE001). */
    NOT_LEADER,
    /** This process released it (close(), a session's release, Elector.stop()). */
    RELEASED,
    /** The Elector's work returned or threw: the lease was released. */
    RESIGNED,
    /** This process is shutting down (SIGTERM, with Leaderlock.releaseOnShutdown()). */
    SHUTDOWN;

    /** The name the other clients give it: expired, connection_lost... */
    public String word() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
