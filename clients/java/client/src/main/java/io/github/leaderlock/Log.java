package io.github.leaderlock;

import java.lang.System.Logger;
import java.lang.System.Logger.Level;

/**
 * This library's log: the System.Logger named {@code leaderlock} (java.util.logging unless the
 * application routes System.Logger elsewhere, e.g. to SLF4J). Warnings: a connection lost, a lease
 * lost, a key held with another number of slots; info: leading, released, connected again.
 */
final class Log {
    private Log() {}

    static final Logger LOG = System.getLogger("leaderlock");

    static void info(String format, Object... args) {
        if (LOG.isLoggable(Level.INFO)) {
            LOG.log(Level.INFO, "leaderlock: " + String.format(format, args));
        }
    }

    static void warn(String format, Object... args) {
        if (LOG.isLoggable(Level.WARNING)) {
            LOG.log(Level.WARNING, "leaderlock: " + String.format(format, args));
        }
    }

    static void warn(Throwable t, String format, Object... args) {
        if (LOG.isLoggable(Level.WARNING)) {
            LOG.log(Level.WARNING, "leaderlock: " + String.format(format, args), t);
        }
    }

    static void error(String format, Object... args) {
        if (LOG.isLoggable(Level.ERROR)) {
            LOG.log(Level.ERROR, "leaderlock: " + String.format(format, args));
        }
    }

    static void debug(String format, Object... args) {
        if (LOG.isLoggable(Level.DEBUG)) {
            LOG.log(Level.DEBUG, "leaderlock: " + String.format(format, args));
        }
    }
}
