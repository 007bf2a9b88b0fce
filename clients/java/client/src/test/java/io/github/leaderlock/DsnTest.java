package io.github.leaderlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Properties;
import org.junit.jupiter.api.Test;

/** Connection strings in the three forms, made into PgJDBC's URL and properties (no server). */
class DsnTest {
    @Test
    void libpqPairs() {
        Dsn d =
                Dsn.parse(
                        "host=db.internal port=5433 dbname=app user=alice password='a b\\'c' sslmode=require");
        assertEquals("jdbc:postgresql://db.internal:5433/app", d.url());
        Properties p = d.properties("leaderlock java", 1000);
        assertEquals("alice", p.getProperty("user"));
        assertEquals("a b'c", p.getProperty("password"));
        assertEquals("require", p.getProperty("sslmode"));
        assertEquals("0", p.getProperty("prepareThreshold"));
        assertEquals("leaderlock java", p.getProperty("ApplicationName"));
        assertEquals("2", p.getProperty("connectTimeout"));
        assertFalse(d.toString().contains("b\\'c"), d.toString());
    }

    @Test
    void severalHostsAndTheirPorts() {
        Dsn d = Dsn.parse("host=a,b,c port=1,2,3 dbname=x user=u target_session_attrs=read-write");
        assertEquals("jdbc:postgresql://a:1,b:2,c:3/x", d.url());
        assertEquals("primary", d.properties("n", 0).getProperty("targetServerType"));
        assertEquals(
                "jdbc:postgresql://a:7,b:7/x", Dsn.parse("host=a,b port=7 dbname=x user=u").url());
        assertThrows(BadArgumentException.class, () -> Dsn.parse("host=a,b,c port=1,2 user=u"));
    }

    @Test
    void libpqUrls() {
        Dsn d =
                Dsn.parse(
                        "postgresql://bob:s%40cret@127.0.0.1:5432,[::1]:6543/my%20db?application_name=mine&sslmode=disable");
        assertEquals("jdbc:postgresql://127.0.0.1:5432,[::1]:6543/my+db", d.url());
        Properties p = d.properties("leaderlock java", 5000);
        assertEquals("bob", p.getProperty("user"));
        assertEquals("s@cret", p.getProperty("password"));
        assertEquals("mine", p.getProperty("ApplicationName"), "the user's name is kept");
        assertEquals("disable", p.getProperty("sslmode"));
        assertEquals("5", p.getProperty("connectTimeout"));
        assertFalse(d.toString().contains("s%40cret"), d.toString());
        assertEquals(
                "jdbc:postgresql://h:5432/postgres",
                Dsn.parse("postgres://postgres@h/postgres").url());
    }

    @Test
    void jdbcUrlsAsTheyAre() {
        Dsn d = Dsn.parse("jdbc:postgresql://h:1/d?user=u&prepareThreshold=3");
        assertEquals("jdbc:postgresql://h:1/d?user=u&prepareThreshold=3", d.url());
        assertFalse(d.properties("n", 0).containsKey("prepareThreshold"), "the URL's own is kept");
    }

    @Test
    void whatPgJdbcCannotDoIsRefused() {
        for (String bad :
                new String[] {
                    "host=/var/run/postgresql",
                    "nosuchkey=1",
                    "port=x",
                    "sslmode=sometimes",
                    "host='unclosed",
                    "target_session_attrs=whatever",
                    "postgresql://h/db?x"
                }) {
            BadArgumentException e =
                    assertThrows(BadArgumentException.class, () -> Dsn.parse(bad), bad);
            assertTrue(
                    e.getMessage().startsWith("leaderlock: the connection string cannot be used"),
                    e.getMessage());
        }
    }
}
