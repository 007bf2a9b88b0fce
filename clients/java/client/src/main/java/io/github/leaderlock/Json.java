package io.github.leaderlock;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/** Just enough JSON to read a notification's payload (RFC 8259; nothing is written). */
final class Json {
    private Json() {}

    sealed interface Value permits Obj, Arr, Str, Num, Bool, Null {}

    record Obj(Map<String, Value> members) implements Value {
        /** The member {@code name} when it is a string, else null. */
        String string(String name) {
            return members.get(name) instanceof Str s ? s.value() : null;
        }
    }

    record Arr(List<Value> items) implements Value {}

    record Str(String value) implements Value {}

    record Num(String text) implements Value {}

    record Bool(boolean value) implements Value {}

    record Null() implements Value {}

    /** Parses one JSON text; IllegalArgumentException when it is not one. */
    static Value parse(String text) {
        if (text == null) {
            throw new IllegalArgumentException("no JSON");
        }
        Parser p = new Parser(text);
        p.space();
        Value v = p.value(0);
        p.space();
        if (p.i != text.length()) {
            throw new IllegalArgumentException("JSON: text after the value");
        }
        return v;
    }

    private static final class Parser {
        final String s;
        int i;

        Parser(String s) {
            this.s = s;
        }

        void space() {
            while (i < s.length()) {
                char c = s.charAt(i);
                if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                    i++;
                } else {
                    return;
                }
            }
        }

        IllegalArgumentException bad(String what) {
            return new IllegalArgumentException("JSON: " + what + " at " + i);
        }

        char peek() {
            if (i >= s.length()) {
                throw bad("unexpected end");
            }
            return s.charAt(i);
        }

        Value value(int depth) {
            if (depth > 100) {
                throw bad("too deep");
            }
            char c = peek();
            switch (c) {
                case '{' -> {
                    i++;
                    Map<String, Value> m = new LinkedHashMap<>();
                    space();
                    if (peek() == '}') {
                        i++;
                        return new Obj(m);
                    }
                    while (true) {
                        space();
                        if (peek() != '"') {
                            throw bad("a member name expected");
                        }
                        String name = string();
                        space();
                        if (peek() != ':') {
                            throw bad("':' expected");
                        }
                        i++;
                        space();
                        m.put(name, value(depth + 1));
                        space();
                        char d = peek();
                        i++;
                        if (d == '}') {
                            return new Obj(m);
                        }
                        if (d != ',') {
                            throw bad("',' or '}' expected");
                        }
                    }
                }
                case '[' -> {
                    i++;
                    List<Value> l = new ArrayList<>();
                    space();
                    if (peek() == ']') {
                        i++;
                        return new Arr(l);
                    }
                    while (true) {
                        space();
                        l.add(value(depth + 1));
                        space();
                        char d = peek();
                        i++;
                        if (d == ']') {
                            return new Arr(l);
                        }
                        if (d != ',') {
                            throw bad("',' or ']' expected");
                        }
                    }
                }
                case '"' -> {
                    return new Str(string());
                }
                case 't' -> {
                    word("true");
                    return new Bool(true);
                }
                case 'f' -> {
                    word("false");
                    return new Bool(false);
                }
                case 'n' -> {
                    word("null");
                    return new Null();
                }
                default -> {
                    return number();
                }
            }
        }

        void word(String w) {
            if (!s.startsWith(w, i)) {
                throw bad("unexpected word");
            }
            i += w.length();
        }

        Num number() {
            int start = i;
            if (i < s.length() && s.charAt(i) == '-') {
                i++;
            }
            int digits = i;
            while (i < s.length() && Character.isDigit(s.charAt(i))) {
                i++;
            }
            if (i == digits) {
                throw bad("a value expected");
            }
            if (i < s.length() && s.charAt(i) == '.') {
                i++;
                int f = i;
                while (i < s.length() && Character.isDigit(s.charAt(i))) {
                    i++;
                }
                if (i == f) {
                    throw bad("digits expected");
                }
            }
            if (i < s.length() && (s.charAt(i) == 'e' || s.charAt(i) == 'E')) {
                i++;
                if (i < s.length() && (s.charAt(i) == '+' || s.charAt(i) == '-')) {
                    i++;
                }
                int e = i;
                while (i < s.length() && Character.isDigit(s.charAt(i))) {
                    i++;
                }
                if (i == e) {
                    throw bad("digits expected");
                }
            }
            return new Num(s.substring(start, i));
        }

        String string() {
            i++; // the opening quote
            StringBuilder b = new StringBuilder();
            while (true) {
                char c = peek();
                i++;
                if (c == '"') {
                    return b.toString();
                }
                if (c < 0x20) {
                    throw bad("a control character in a string");
                }
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                char e = peek();
                i++;
                switch (e) {
                    case '"', '\\', '/' -> b.append(e);
                    case 'b' -> b.append('\b');
                    case 'f' -> b.append('\f');
                    case 'n' -> b.append('\n');
                    case 'r' -> b.append('\r');
                    case 't' -> b.append('\t');
                    case 'u' -> {
                        if (i + 4 > s.length()) {
                            throw bad("a short \\u escape");
                        }
                        try {
                            b.append((char) Integer.parseInt(s.substring(i, i + 4), 16));
                        } catch (NumberFormatException x) {
                            throw bad("a bad \\u escape");
                        }
                        i += 4;
                    }
                    default -> throw bad("a bad escape");
                }
            }
        }
    }
}
