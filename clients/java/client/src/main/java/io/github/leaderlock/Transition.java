package io.github.leaderlock;

import java.time.Instant;

/**
 * One row of the history (contract 23).
 *
 * @param position only grows, in commit order: resume after it
 * @param at when it happened, on the server's lease clock
 * @param event acquired, released, expired, proclaimed, run_claimed, run_finished, run_missed...
 * @param key the lease's key, or the run's job (null where the server has none)
 * @param holder the holder, or the run's claimant (null where none)
 * @param term the term (0 where none)
 * @param role the role whose call made it; null for the server's worker
 * @param payload the JSON notification that announced it
 */
public record Transition(
        long position,
        Instant at,
        String event,
        String key,
        String holder,
        long term,
        String role,
        String payload) {
    @Override
    public String toString() {
        return "#"
                + position
                + " "
                + event
                + " "
                + Text.quote(key)
                + " holder "
                + Text.quote(holder)
                + " term "
                + term;
    }
}
