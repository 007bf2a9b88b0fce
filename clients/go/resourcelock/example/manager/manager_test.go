package main

// Two managers in this process (LEADERLOCK_DSN): the first leads, the
// second waits; the first one's context is cancelled (as SIGTERM does) and
// the second leads, in the next term, once the first has released.

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func lines(t *testing.T, path string) []string {
	b, _ := os.ReadFile(path)
	var out []string
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

func waitFor(t *testing.T, path, prefix string, within time.Duration) string {
	t.Helper()
	until := time.Now().Add(within)
	for time.Now().Before(until) {
		for _, l := range lines(t, path) {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no %q in %s within %v: %q", prefix, path, within, lines(t, path))
	return ""
}

func TestTwoManagersHandOver(t *testing.T) {
	dsn := os.Getenv("LEADERLOCK_DSN")
	if dsn == "" {
		t.Skip("LEADERLOCK_DSN not set")
	}
	dir := t.TempDir()
	start := func(id string) (context.CancelFunc, chan error, string) {
		path := filepath.Join(dir, id)
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- run(ctx, dsn, id, f); f.Close() }()
		return cancel, done, path
	}
	cancel1, done1, out1 := start("m1")
	first := waitFor(t, out1, "leading m1 ", 20*time.Second)
	cancel2, done2, out2 := start("m2")
	defer func() { cancel2(); <-done2 }()
	time.Sleep(500 * time.Millisecond)
	if l := lines(t, out2); len(l) != 0 {
		t.Fatalf("m2 while m1 leads: %q", l)
	}
	cancelled := time.Now()
	cancel1()
	if err := <-done1; err != nil {
		t.Fatalf("m1's Start: %v", err)
	}
	stopped := waitFor(t, out1, "stopping m1 ", time.Second)
	second := waitFor(t, out2, "leading m2 ", 5*time.Second)
	t.Logf("%s; %s; %s (%d ms after the cancel)", first, stopped, second, time.Since(cancelled).Milliseconds())
	t1, _ := strconv.ParseInt(strings.Fields(first)[2], 10, 64)
	t2, _ := strconv.ParseInt(strings.Fields(second)[2], 10, 64)
	if t2 <= t1 {
		t.Fatalf("m2's term %d is not above m1's %d", t2, t1)
	}
}
