package io.github.leaderlock;

import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;

/** Where leaderlock is, as FIND_SCHEMA answered on a connection. */
final class Schemas {
    private Schemas() {}

    /**
     * The schema a user named: {@code schema}, else LEADERLOCK_SCHEMA (set and not empty), else
     * null.
     */
    static String option(String schema) {
        if (schema == null) {
            String env = System.getenv(Statements.SCHEMA_ENV);
            return env == null || env.isEmpty() ? null : env;
        }
        if (schema.isEmpty()) {
            throw new BadArgumentException(
                    "leaderlock: the schema option must be null or a schema's name, not \"\"");
        }
        return schema;
    }

    /** The one schema FIND_SCHEMA found: NotInstalled when none, BadArgument when several. */
    static String found(List<Object[]> rows, Db db, String named) {
        if (rows.size() == 1) {
            return (String) rows.get(0)[0];
        }
        String where = "database " + Text.quote(database(db));
        if (rows.isEmpty()) {
            if (named != null) {
                throw new NotInstalledException(
                        "leaderlock: extension leaderlock is not installed in schema "
                                + Text.quote(named)
                                + " of "
                                + where
                                + " (the schema option or "
                                + Statements.SCHEMA_ENV
                                + " named that schema; CREATE EXTENSION leaderlock, or install the"
                                + " portable edition)",
                        "42883",
                        null);
            }
            throw new NotInstalledException(
                    "leaderlock: extension leaderlock is not installed in "
                            + where
                            + " (CREATE EXTENSION leaderlock, or install the portable edition)",
                    "42883",
                    null);
        }
        List<String> names = new ArrayList<>();
        for (Object[] r : rows) {
            names.add(Text.quote((String) r[0]));
        }
        throw new BadArgumentException(
                "leaderlock: leaderlock's functions are in several schemas of "
                        + where
                        + ": "
                        + String.join(", ", names)
                        + "; name the one to use with the schema option or "
                        + Statements.SCHEMA_ENV);
    }

    static String database(Db db) {
        try {
            return db.conn.getCatalog();
        } catch (SQLException e) {
            return "?";
        }
    }
}
