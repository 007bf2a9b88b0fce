package io.github.leaderlock;

import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;

/**
 * A connection string as the other clients take it, made into what PgJDBC takes (a {@code
 * jdbc:postgresql:} URL and properties). Three forms:
 *
 * <ul>
 *   <li>libpq's {@code key=value} pairs: {@code host=db.internal port=5432 dbname=app user=app};
 *   <li>a libpq URL: {@code postgresql://app@db.internal:5432/app?sslmode=require} (or {@code
 *       postgres://});
 *   <li>a JDBC URL, used as it is: {@code jdbc:postgresql://db.internal:5432/app?user=app}.
 * </ul>
 *
 * <p>libpq's keys understood: host (several, comma-separated), hostaddr, port (one for all, or one
 * per host), dbname, user, password, application_name, connect_timeout, sslmode, sslrootcert,
 * sslcert, sslkey, sslpassword, target_session_attrs (any, read-write, read-only, primary, standby,
 * prefer-standby), options, and the keepalive settings (TCP keepalives are on). What is missing
 * comes from PGHOST, PGPORT, PGDATABASE, PGUSER, PGPASSWORD, PGAPPNAME, PGCONNECT_TIMEOUT,
 * PGSSLMODE and PGTARGETSESSIONATTRS, as libpq reads them; then localhost, 5432, the user's name. A
 * password not given is read from ~/.pgpass by PgJDBC. A key that is not understood, or a host that
 * is a directory (a Unix-domain socket, which PgJDBC cannot open), is a {@link
 * BadArgumentException}.
 *
 * <p>Every connection this library makes: autocommit, no server-side prepared statement kept (so
 * that it works through pgbouncer's transaction pooling), TCP keepalives, named {@code leaderlock
 * java} unless the string (or PGAPPNAME) names it.
 */
public final class Dsn {
    private final String url;
    private final Properties props;
    private final String text;

    private Dsn(String url, Properties props, String text) {
        this.url = url;
        this.props = props;
        this.text = text;
    }

    /** Parses a connection string (one of the three forms). */
    public static Dsn parse(String dsn) {
        if (dsn == null) {
            throw new BadArgumentException("leaderlock: the connection string must not be null");
        }
        String s = dsn.strip();
        if (s.startsWith("jdbc:postgresql:")) {
            return new Dsn(s, new Properties(), dsn);
        }
        Map<String, String> kv;
        if (s.startsWith("postgresql://") || s.startsWith("postgres://")) {
            kv = fromUrl(s);
        } else {
            kv = fromPairs(s);
        }
        return fromLibpq(kv, dsn);
    }

    /**
     * A new connection, in autocommit, with this library's settings (see the class): for
     * integrations that make their own connections (the ShedLock provider given a connection
     * string). Connecting may take 10 s unless the string sets connect_timeout.
     */
    public java.sql.Connection connect() throws java.sql.SQLException {
        java.sql.Connection c =
                new org.postgresql.Driver()
                        .connect(url, properties(Leaderlock.APPLICATION_NAME, 10_000));
        if (c == null) {
            throw new BadArgumentException("leaderlock: PgJDBC does not take " + this);
        }
        c.setAutoCommit(true);
        return c;
    }

    /** The JDBC URL. */
    String url() {
        return url;
    }

    /**
     * The properties of a new connection: the string's, and this library's defaults where it set
     * none. {@code name}: the application name unless the string (or PGAPPNAME) gives one; {@code
     * boundMillis}: how long connecting may take, unless the string sets connect_timeout.
     */
    Properties properties(String name, long boundMillis) {
        Properties p = new Properties();
        p.putAll(props);
        String given = p.getProperty("ApplicationName");
        if (given == null && !url.contains("ApplicationName=")) {
            String env = System.getenv("PGAPPNAME");
            p.setProperty("ApplicationName", env != null && !env.isEmpty() ? env : name);
        }
        if (!has(p, "prepareThreshold")) {
            p.setProperty("prepareThreshold", "0"); // unnamed statements only: pgbouncer's pooling
        }
        if (!has(p, "tcpKeepAlive")) {
            p.setProperty("tcpKeepAlive", "true");
        }
        long seconds = Math.max(2, (boundMillis + 999) / 1000);
        if (!has(p, "connectTimeout")) {
            p.setProperty("connectTimeout", Long.toString(seconds));
        }
        if (!has(p, "loginTimeout")) {
            p.setProperty("loginTimeout", p.getProperty("connectTimeout", Long.toString(seconds)));
        }
        if (!has(p, "socketTimeout")) {
            // the login's reads (each call then sets its own bound)
            p.setProperty("socketTimeout", p.getProperty("loginTimeout", Long.toString(seconds)));
        }
        return p;
    }

    private boolean has(Properties p, String key) {
        return p.containsKey(key) || url.contains(key + "=");
    }

    /** The string as given, for messages: with any password hidden. */
    @Override
    public String toString() {
        return text.replaceAll("(?i)(password\\s*=\\s*)('(?:[^'\\\\]|\\\\.)*'|\\S+)", "$1***")
                .replaceAll("://([^:/@]*):[^@/]*@", "://$1:***@");
    }

    private static Map<String, String> fromPairs(String s) {
        Map<String, String> kv = new LinkedHashMap<>();
        int i = 0;
        int n = s.length();
        while (i < n) {
            while (i < n && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
            if (i >= n) {
                break;
            }
            int eq = s.indexOf('=', i);
            if (eq < 0) {
                throw bad("missing \"=\" after " + Text.quote(s.substring(i)));
            }
            String key = s.substring(i, eq).strip();
            i = eq + 1;
            while (i < n && Character.isWhitespace(s.charAt(i))) {
                i++;
            }
            StringBuilder v = new StringBuilder();
            if (i < n && s.charAt(i) == '\'') {
                i++;
                boolean closed = false;
                while (i < n) {
                    char c = s.charAt(i++);
                    if (c == '\\' && i < n) {
                        v.append(s.charAt(i++));
                    } else if (c == '\'') {
                        closed = true;
                        break;
                    } else {
                        v.append(c);
                    }
                }
                if (!closed) {
                    throw bad("unterminated quoted value of " + key);
                }
            } else {
                while (i < n && !Character.isWhitespace(s.charAt(i))) {
                    char c = s.charAt(i++);
                    if (c == '\\' && i < n) {
                        v.append(s.charAt(i++));
                    } else {
                        v.append(c);
                    }
                }
            }
            if (key.isEmpty()) {
                throw bad("a value without a key");
            }
            kv.put(key, v.toString());
        }
        return kv;
    }

    private static Map<String, String> fromUrl(String s) {
        Map<String, String> kv = new LinkedHashMap<>();
        String rest = s.substring(s.indexOf("://") + 3);
        String query = null;
        int q = rest.indexOf('?');
        if (q >= 0) {
            query = rest.substring(q + 1);
            rest = rest.substring(0, q);
        }
        String path = null;
        int slash = rest.indexOf('/');
        if (slash >= 0) {
            path = rest.substring(slash + 1);
            rest = rest.substring(0, slash);
        }
        int at = rest.lastIndexOf('@');
        if (at >= 0) {
            String userinfo = rest.substring(0, at);
            rest = rest.substring(at + 1);
            int colon = userinfo.indexOf(':');
            if (colon >= 0) {
                kv.put("user", decode(userinfo.substring(0, colon)));
                kv.put("password", decode(userinfo.substring(colon + 1)));
            } else if (!userinfo.isEmpty()) {
                kv.put("user", decode(userinfo));
            }
        }
        if (!rest.isEmpty()) {
            List<String> hosts = new ArrayList<>();
            List<String> ports = new ArrayList<>();
            for (String hp : rest.split(",", -1)) {
                String h = hp;
                String p = "";
                if (hp.startsWith("[")) {
                    int end = hp.indexOf(']');
                    if (end < 0) {
                        throw bad("an IPv6 address without its closing ]");
                    }
                    h = hp.substring(0, end + 1);
                    if (hp.length() > end + 1 && hp.charAt(end + 1) == ':') {
                        p = hp.substring(end + 2);
                    }
                } else {
                    int c = hp.lastIndexOf(':');
                    if (c >= 0) {
                        h = hp.substring(0, c);
                        p = hp.substring(c + 1);
                    }
                }
                hosts.add(decode(h));
                ports.add(p);
            }
            kv.put("host", String.join(",", hosts));
            if (ports.stream().anyMatch(p -> !p.isEmpty())) {
                kv.put("port", String.join(",", ports));
            }
        }
        if (path != null && !path.isEmpty()) {
            kv.put("dbname", decode(path));
        }
        if (query != null && !query.isEmpty()) {
            for (String pair : query.split("&")) {
                if (pair.isEmpty()) {
                    continue;
                }
                int eq = pair.indexOf('=');
                if (eq < 0) {
                    throw bad("a URL parameter without a value: " + Text.quote(pair));
                }
                kv.put(decode(pair.substring(0, eq)), decode(pair.substring(eq + 1)));
            }
        }
        return kv;
    }

    private static String decode(String s) {
        try {
            return URLDecoder.decode(s.replace("+", "%2B"), StandardCharsets.UTF_8);
        } catch (IllegalArgumentException e) {
            throw bad("cannot decode " + Text.quote(s) + " in the URL");
        }
    }

    private static String env(String name) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? null : v;
    }

    private static Dsn fromLibpq(Map<String, String> kv, String text) {
        Properties p = new Properties();
        String hosts = null;
        String ports = null;
        String dbname = null;
        String user = null;
        for (Map.Entry<String, String> e : kv.entrySet()) {
            String k = e.getKey();
            String v = e.getValue();
            switch (k) {
                case "host" -> hosts = v;
                case "hostaddr" -> {
                    if (hosts == null) {
                        hosts = v;
                    }
                }
                case "port" -> ports = v;
                case "dbname" -> dbname = v;
                case "user" -> user = v;
                case "password" -> p.setProperty("password", v);
                case "application_name" -> p.setProperty("ApplicationName", v);
                case "fallback_application_name" -> {
                    // the library's own name is the fallback
                }
                case "connect_timeout" -> p.setProperty("connectTimeout", timeout(v));
                case "sslmode" -> p.setProperty("sslmode", sslmode(v));
                case "sslrootcert" -> p.setProperty("sslrootcert", v);
                case "sslcert" -> p.setProperty("sslcert", v);
                case "sslkey" -> p.setProperty("sslkey", v);
                case "sslpassword" -> p.setProperty("sslpassword", v);
                case "target_session_attrs" -> p.setProperty("targetServerType", target(v));
                case "options" -> p.setProperty("options", v);
                case "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count" -> {
                    // TCP keepalives are on; the system's timings apply
                }
                default ->
                        throw bad(
                                "the connection parameter "
                                        + Text.quote(k)
                                        + " is not understood here");
            }
        }
        if (hosts == null) {
            hosts = env("PGHOST");
        }
        if (ports == null) {
            ports = env("PGPORT");
        }
        if (dbname == null) {
            dbname = env("PGDATABASE");
        }
        if (user == null) {
            user = env("PGUSER");
        }
        if (user == null) {
            user = System.getProperty("user.name");
        }
        if (dbname == null) {
            dbname = user;
        }
        if (!p.containsKey("password") && env("PGPASSWORD") != null) {
            p.setProperty("password", env("PGPASSWORD"));
        }
        if (!p.containsKey("ApplicationName") && env("PGAPPNAME") != null) {
            p.setProperty("ApplicationName", env("PGAPPNAME"));
        }
        if (!p.containsKey("connectTimeout") && env("PGCONNECT_TIMEOUT") != null) {
            p.setProperty("connectTimeout", timeout(env("PGCONNECT_TIMEOUT")));
        }
        if (!p.containsKey("sslmode") && env("PGSSLMODE") != null) {
            p.setProperty("sslmode", sslmode(env("PGSSLMODE")));
        }
        if (!p.containsKey("targetServerType") && env("PGTARGETSESSIONATTRS") != null) {
            p.setProperty("targetServerType", target(env("PGTARGETSESSIONATTRS")));
        }
        if (user != null) {
            p.setProperty("user", user);
        }
        String[] hostList = (hosts == null || hosts.isEmpty() ? "localhost" : hosts).split(",", -1);
        String[] portList = (ports == null || ports.isEmpty() ? "" : ports).split(",", -1);
        if (portList.length != 1 && portList.length != hostList.length) {
            throw bad(
                    "could not match "
                            + portList.length
                            + " port numbers to "
                            + hostList.length
                            + " hosts");
        }
        StringBuilder url = new StringBuilder("jdbc:postgresql://");
        for (int i = 0; i < hostList.length; i++) {
            String h = hostList[i].strip();
            if (h.isEmpty()) {
                h = "localhost";
            }
            if (h.startsWith("/") || h.startsWith("@")) {
                throw bad(
                        "host "
                                + Text.quote(h)
                                + " is a Unix-domain socket, which PgJDBC cannot open: give a host name"
                                + " or an address (host=127.0.0.1)");
            }
            String port = (portList.length == 1 ? portList[0] : portList[i]).strip();
            if (port.isEmpty()) {
                port = "5432";
            }
            try {
                int n = Integer.parseInt(port);
                if (n < 1 || n > 65535) {
                    throw new NumberFormatException();
                }
            } catch (NumberFormatException e) {
                throw bad("invalid port number: " + Text.quote(port));
            }
            if (i > 0) {
                url.append(',');
            }
            if (h.contains(":") && !h.startsWith("[")) {
                h = "[" + h + "]"; // IPv6
            }
            url.append(h).append(':').append(port);
        }
        url.append('/').append(java.net.URLEncoder.encode(dbname, StandardCharsets.UTF_8));
        return new Dsn(url.toString(), p, text);
    }

    private static String timeout(String v) {
        try {
            long s = Long.parseLong(v.strip());
            // libpq: 0 or none waits for ever; a positive value is at least 2 s
            return Long.toString(s <= 0 ? 0 : Math.max(2, s));
        } catch (NumberFormatException e) {
            throw bad("invalid connect_timeout: " + Text.quote(v));
        }
    }

    private static String sslmode(String v) {
        return switch (v) {
            case "disable", "allow", "prefer", "require", "verify-ca", "verify-full" -> v;
            default -> throw bad("invalid sslmode: " + Text.quote(v));
        };
    }

    private static String target(String v) {
        return switch (v.toLowerCase(Locale.ROOT)) {
            case "any" -> "any";
            case "read-write", "primary" -> "primary";
            case "read-only", "standby" -> "secondary";
            case "prefer-standby" -> "preferSecondary";
            default -> throw bad("invalid target_session_attrs: " + Text.quote(v));
        };
    }

    private static BadArgumentException bad(String what) {
        return new BadArgumentException(
                "leaderlock: the connection string cannot be used: " + what);
    }
}
