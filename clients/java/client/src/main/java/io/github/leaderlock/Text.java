package io.github.leaderlock;

import java.nio.charset.StandardCharsets;

/** Text of other roles' (keys, holders, server messages) as logs and messages show it. */
final class Text {
    private Text() {}

    /** s in double quotes, with quotes, backslashes and control characters escaped. */
    static String quote(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder b = new StringBuilder(s.length() + 2).append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\r' -> b.append("\\r");
                case '\t' -> b.append("\\t");
                default -> {
                    if (c < 0x20
                            || c == 0x7f
                            || (c >= 0x80 && c < 0xa0)
                            || c == 0x2028
                            || c == 0x2029) {
                        b.append(String.format("\\u%04x", (int) c));
                    } else {
                        b.append(c);
                    }
                }
            }
        }
        return b.append('"').toString();
    }

    /** The first line of a message. */
    static String firstLine(String s) {
        if (s == null) {
            return "";
        }
        int n = s.indexOf('\n');
        return n < 0 ? s : s.substring(0, n);
    }

    /**
     * A text as le_finish_run takes it: no NUL (each replaced), at most {@code limit} bytes of
     * UTF-8, cut at a character.
     */
    static String cut(String s, int limit) {
        String clean = s.replace('\0', '\uFFFD');
        StringBuilder b = new StringBuilder();
        int bytes = 0;
        for (int i = 0; i < clean.length(); ) {
            int cp = clean.codePointAt(i);
            if (Character.isSurrogate((char) cp)) {
                cp = 0xFFFD; // a lone surrogate: not UTF-8
            }
            int n = new String(Character.toChars(cp)).getBytes(StandardCharsets.UTF_8).length;
            if (bytes + n > limit) {
                break;
            }
            b.appendCodePoint(cp);
            bytes += n;
            i += Character.charCount(clean.codePointAt(i));
        }
        return b.toString();
    }

    /** What an exception says, in one line: its class and its message's first line. */
    static String describe(Throwable e) {
        String m = e.getMessage();
        String name = e.getClass().getSimpleName();
        return m == null || m.isBlank() ? name : name + ": " + firstLine(m);
    }
}
