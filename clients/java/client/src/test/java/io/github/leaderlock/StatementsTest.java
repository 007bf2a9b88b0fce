package io.github.leaderlock;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * No statement depends on the session's search_path (Statements): every statement constant writes
 * PostgreSQL's functions, types and operators in pg_catalog and leaderlock's objects in
 * {@code @extschema@}; no SQL is written outside the constants; the lookup of the schema is the
 * other clients' statement. The checker is clients/go's statements_test.go's, tested on careless
 * statements too. No server needed.
 */
class StatementsTest {
    private static final Pattern LITERAL = Pattern.compile("'(?:[^']|'')*'");
    private static final Pattern QUOTED_NAME = Pattern.compile("\"(?:[^\"]|\"\")*\"");
    private static final Pattern OPERATOR =
            Pattern.compile("(?i)OPERATOR\\(\\s*pg_catalog\\s*\\.\\s*[^)\\s]+\\s*\\)");
    private static final Pattern CALL =
            Pattern.compile("([A-Za-z_@][\\w@]*(?:\\.[A-Za-z_]\\w*)*)\\s*\\(");
    private static final Pattern CAST =
            Pattern.compile("(?i)::\\s*([\\w@]+(?:\\.\\w+)?(?:\\s+precision)?)");
    private static final Pattern EXTRACT = Pattern.compile("(?i)\\bextract\\(\\s*\\w+\\s+FROM\\b");
    private static final Pattern FROM_JOIN = Pattern.compile("(?i)\\b(?:FROM|JOIN)\\s+([^\\s(]+)");
    private static final Pattern WORD = Pattern.compile("[@\\w.]*\\w");
    private static final Pattern SYMBOL = Pattern.compile("[=<>!~+\\-*/%|&^#@?]");

    /**
     * A bind parameter: ? followed by a cast, a closing parenthesis, a comma, IS, OR, AND, the end.
     */
    private static final Pattern PARAMETER =
            Pattern.compile("\\?(?=\\s*(::|\\)|,|$|(?i:IS|OR|AND|AS)\\b))");

    private static final Pattern CASE_SIMPLE = Pattern.compile("(?i)\\bCASE\\s+(\\S+)");
    private static final Pattern BARE_NAME =
            Pattern.compile("(?i)(^|[^\\w.@])((?:le_|leaderlock|pg_)\\w*)");

    /** Grammar that looks like a call: keywords followed by a parenthesis. */
    private static final Set<String> CALL_WORDS =
            Set.of(
                    "coalesce",
                    "exists",
                    "extract",
                    "greatest",
                    "least",
                    "array",
                    "row",
                    "values",
                    "any",
                    "operator",
                    "select",
                    "from",
                    "where",
                    "and",
                    "or",
                    "not",
                    "on",
                    "then",
                    "when",
                    "else",
                    "as",
                    "join");

    /** Types the grammar names (keywords): resolved in pg_catalog whatever the path. */
    private static final Set<String> KEYWORD_TYPES =
            Set.of(
                    "boolean",
                    "bigint",
                    "integer",
                    "int",
                    "smallint",
                    "interval",
                    "double precision",
                    "numeric",
                    "real",
                    "float",
                    "timestamp");

    /** Constructs that hide an operator (=, ~~) that the path would resolve. */
    private static final Set<String> HIDDEN_OPERATORS =
            Set.of("in", "like", "ilike", "similar", "between", "distinct", "nullif", "overlaps");

    /** What in a statement the search_path would resolve. */
    static List<String> pathProblems(String stmt) {
        List<String> problems = new ArrayList<>();
        String s = LITERAL.matcher(stmt).replaceAll(" L ");
        s = QUOTED_NAME.matcher(s).replaceAll(" Q ");
        Matcher m = CAST.matcher(s);
        while (m.find()) {
            String t = String.join(" ", m.group(1).toLowerCase(Locale.ROOT).split("\\s+"));
            if (!t.startsWith("pg_catalog.")
                    && !t.startsWith("@extschema@.")
                    && !KEYWORD_TYPES.contains(t)) {
                problems.add("type " + m.group(1) + " not in pg_catalog");
            }
        }
        s = CAST.matcher(s).replaceAll(" ");
        m = CALL.matcher(s);
        while (m.find()) {
            String name = m.group(1);
            if (name.contains(".")) {
                if (!name.startsWith("pg_catalog.") && !name.startsWith("@extschema@.")) {
                    problems.add(
                            "call " + name + "( in a schema neither pg_catalog nor @extschema@");
                }
            } else if (!CALL_WORDS.contains(name.toLowerCase(Locale.ROOT))) {
                problems.add("unqualified call " + name + "(");
            }
        }
        s = EXTRACT.matcher(s).replaceAll("extract(");
        m = FROM_JOIN.matcher(s);
        while (m.find()) {
            if (!m.group(1).startsWith("pg_catalog.") && !m.group(1).startsWith("@extschema@.")) {
                problems.add("relation " + m.group(1) + " unqualified");
            }
        }
        m = BARE_NAME.matcher(s);
        while (m.find()) {
            String name = m.group(2).toLowerCase(Locale.ROOT);
            if (!name.equals("pg_catalog")
                    && !Pattern.compile("(?i)\\bLISTEN\\s+" + name + "\\b").matcher(s).find()) {
                problems.add("name " + m.group(2) + " unqualified");
            }
        }
        m = CASE_SIMPLE.matcher(s);
        while (m.find()) {
            if (!m.group(1).equalsIgnoreCase("WHEN")) {
                problems.add("simple CASE " + m.group(1) + " WHEN (an = on the path)");
            }
        }
        m = WORD.matcher(s);
        while (m.find()) {
            if (HIDDEN_OPERATORS.contains(m.group().toLowerCase(Locale.ROOT))) {
                problems.add(m.group() + " hides an operator");
            }
        }
        s = OPERATOR.matcher(s).replaceAll(" ");
        s = PARAMETER.matcher(s).replaceAll(" P ");
        s =
                s.replace("=>", " ")
                        .replace("@extschema@", " ")
                        .replace("(*)", " ")
                        .replace("UNLISTEN *", " ");
        m = SYMBOL.matcher(s);
        List<String> symbols = new ArrayList<>();
        while (m.find()) {
            symbols.add(m.group());
        }
        if (!symbols.isEmpty()) {
            problems.add(
                    "operator "
                            + String.join(" ", symbols)
                            + " not written OPERATOR(pg_catalog.…)");
        }
        return problems;
    }

    @Test
    void noStatementDependsOnTheSearchPath() {
        List<String> bad = new ArrayList<>();
        Statements.ALL.forEach(
                (name, sql) -> {
                    List<String> p = pathProblems(sql);
                    if (!p.isEmpty()) {
                        bad.add(name + ": " + p + "\n\t" + sql);
                    }
                });
        assertEquals(List.of(), bad);
        assertTrue(Statements.ALL.size() >= 35, Statements.ALL.keySet().toString());
    }

    @Test
    void theCheckFindsCarelessStatements() {
        for (String stmt :
                List.of(
                        "SELECT make_interval(secs => ?)",
                        "SELECT pg_catalog.count(*) FROM leaderlock",
                        "SELECT pg_catalog.count(*) FROM public.leaderlock",
                        "SELECT count(*) FROM @extschema@.leaderlock",
                        "SELECT 1 FROM @extschema@.leaderlock WHERE key = ?",
                        "SELECT ?::text",
                        "SELECT ?::uuid",
                        "SELECT (@extschema@.le_capabilities()->>'worker')::boolean",
                        "SELECT @extschema@.le_leader(key => ?) || 'x'",
                        "SELECT le_leader(key => ?)",
                        "SELECT @extschema@.le_leader(key => ?) IN ('a', 'b')",
                        "SELECT CASE @extschema@.le_leader(key => ?) WHEN 'a' THEN 1 END",
                        "SELECT @extschema@.le_leader(key => ?) LIKE 'a%'",
                        "SELECT nullif(@extschema@.le_leader(key => ?), 'a')",
                        "SELECT 1 FROM @extschema@.leaderlock l, leaderlock_runs r",
                        "SELECT 1 FROM pg_extension",
                        "SELECT 1 FROM @extschema@.leaderlock WHERE value ? 'k'",
                        "SELECT 1 FROM @extschema@.leaderlock WHERE value ?| ARRAY['k']")) {
            assertFalse(pathProblems(stmt).isEmpty(), "found nothing in " + stmt);
        }
    }

    /** The lookup of the schema is the other clients' statement, placeholder for placeholder. */
    @Test
    void theSchemaLookupIsTheOtherClients() throws IOException {
        Path go = Path.of("..", "..", "go", "schema.go");
        if (Files.exists(go)) {
            String text = Files.readString(go);
            int start = text.indexOf("sqlFindSchema = `") + "sqlFindSchema = `".length();
            String theirs = text.substring(start, text.indexOf('`', start)).replace("$1", "?");
            assertEquals(theirs, Statements.FIND_SCHEMA);
        }
    }

    /**
     * No SQL is written outside Statements: every other source file's string literals are free of
     * statements, and every statement is sent through the substitution of the extension's schema
     * (Statements.bind: Db's calls, the guard).
     */
    @Test
    void everyStatementIsAConstantOfStatements() throws IOException {
        Path dir = Path.of("src", "main", "java", "io", "github", "leaderlock");
        Pattern sqlLiteral =
                Pattern.compile(
                        "\"\\s*(SELECT|LISTEN|UNLISTEN|NOTIFY|INSERT|UPDATE|DELETE|WITH|SET|BEGIN)\\b");
        Pattern prepared = Pattern.compile("prepareStatement\\(\\s*(?!Statements\\.bind\\()");
        List<String> bad = new ArrayList<>();
        try (Stream<Path> files = Files.list(dir)) {
            for (Path f : files.toList()) {
                if (f.getFileName().toString().equals("Statements.java")) {
                    continue;
                }
                String text = Files.readString(f);
                Matcher m = sqlLiteral.matcher(text);
                while (m.find()) {
                    bad.add(
                            f.getFileName()
                                    + ": SQL outside Statements: "
                                    + text.substring(
                                            m.start(), Math.min(text.length(), m.start() + 60)));
                }
                m = prepared.matcher(text);
                while (m.find()) {
                    bad.add(f.getFileName() + ": a statement prepared without Statements.bind");
                }
                if (text.contains("createStatement()")
                        && !text.contains("st.execute(Statements.bind(")) {
                    bad.add(f.getFileName() + ": a statement executed without Statements.bind");
                }
            }
        }
        assertEquals(List.of(), bad);
    }
}
