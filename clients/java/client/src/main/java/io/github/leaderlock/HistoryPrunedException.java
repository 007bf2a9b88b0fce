package io.github.leaderlock;

/**
 * The history's retention (leaderlock.history_retention, leaderlock.history_max_rows) deleted
 * transitions after a watcher's position before it read them (SQLSTATE LE002). Read the current
 * state, then watch again from now on.
 */
public class HistoryPrunedException extends RejectedException {
    private static final long serialVersionUID = 1L;
    private final long position;

    public HistoryPrunedException(String message, long position, Throwable cause) {
        super(message, "LE002", cause);
        this.position = position;
    }

    /** The position the watcher was to resume after. */
    public long position() {
        return position;
    }
}
