package leaderlock

// The history watcher (contract 23) against a real server whose worker
// numbers transitions (LEADERLOCK_DSN). The terminations and the
// retention's settings need a superuser (skipped otherwise). Other
// clients' tests may use the same server at the same time: every test
// here follows keys of its own prefix, and tolerates a history pruned by
// others where it must.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func historyPosition(t *testing.T) int64 {
	t.Helper()
	return query(t, "SELECT le_history_position()").(int64)
}

func superuser(t *testing.T) bool {
	su, _ := query(t, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").(bool)
	return su
}

// serverHistory is le_history after `after` for the keys of prefix.
func serverHistory(t *testing.T, after int64, prefix string) ([]Transition, error) {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, err := c.Query(context.Background(), `SELECT "position", event, key, coalesce(holder, ''), coalesce(term, 0)
		FROM le_history(after => $1, key_prefix => $2, max_rows => 100000)`, after, prefix)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var got []Transition
	for rows.Next() {
		var tr Transition
		if err := rows.Scan(&tr.Position, &tr.Event, &tr.Key, &tr.Holder, &tr.Term); err != nil {
			return nil, err
		}
		got = append(got, tr)
	}
	return got, rows.Err()
}

// transitions makes transitions on one connection: each sql returns a
// boolean (true: a transition).
type transitions struct {
	t *testing.T
	c *pgx.Conn
}

func newTransitions(t *testing.T) *transitions {
	c, err := pgx.Connect(context.Background(), dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return &transitions{t: t, c: c}
}

func (m *transitions) do(sql string, args ...interface{}) bool {
	var ok bool
	if err := m.c.QueryRow(context.Background(), sql, args...).Scan(&ok); err != nil {
		m.t.Errorf("%s %v: %v", sql, args, err)
	}
	return ok
}

func (m *transitions) acquire(key, holder string, ttl time.Duration) bool {
	return m.do("SELECT le_try_acquire($1, $2, make_interval(secs => $3))", key, holder, ttl.Seconds())
}

func (m *transitions) release(key, holder string) bool {
	return m.do("SELECT le_release($1, $2)", key, holder)
}

// nextWithin is w.Next bounded by d.
func nextWithin(w *HistoryWatcher, d time.Duration) (Transition, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return w.Next(ctx)
}

// expect reads len(want) transitions ("event key holder") within 5 s each.
func expect(t *testing.T, w *HistoryWatcher, want ...string) []Transition {
	t.Helper()
	var got []Transition
	for _, wt := range want {
		tr, err := nextWithin(w, 5*time.Second)
		if errors.Is(err, ErrHistoryPruned) {
			t.Skipf("the history was pruned meanwhile (by another test?): %v", err)
		}
		if err != nil {
			t.Fatalf("waiting for %q (after %v): %v", wt, got, err)
		}
		if s := fmt.Sprintf("%s %s %s", tr.Event, tr.Key, tr.Holder); s != wt {
			t.Fatalf("got %q (%v), want %q", s, tr, wt)
		}
		got = append(got, tr)
	}
	return got
}

// nothingMore checks that no transition comes within d.
func nothingMore(t *testing.T, w *HistoryWatcher, d time.Duration) {
	t.Helper()
	if tr, err := nextWithin(w, d); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, %v; want nothing more", tr, err)
	}
}

// The chaos test: a watcher of a prefix from now on while about 200
// transitions of its keys are made (acquisitions, releases, short leases
// that expire) and its backend is terminated 10 times. It delivers exactly
// le_history's rows of the prefix, each once, in position order, and each
// key's terms never go down.
func TestHistoryWatcherSurvivesTerminationsAndDeliversEachTransitionOnce(t *testing.T) {
	if !superuser(t) {
		t.Skip("LEADERLOCK_DSN's role is not a superuser (pg_terminate_backend)")
	}
	began := time.Now()
	prefix, appName := newKey("history")+"/", newKey("watch")
	logs := &logLines{}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := WatchHistory(ctx, with(t, dsn(t), "application_name", appName), HistoryOptions{KeyPrefix: prefix, Logf: logs.logf})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the watcher's log: %q", logs.lines)
		}
	})
	start := w.Position()
	if now := historyPosition(t); start > now {
		t.Fatalf("started at %d, the server is at %d", start, now)
	}

	var mu sync.Mutex
	var got []Transition
	stopped := make(chan error, 1)
	// a watcher that stopped ends the test (skipped when another test's
	// retention pruned what it had yet to read)
	stoppedEnds := func(err error) {
		if errors.Is(err, ErrHistoryPruned) {
			t.Skipf("the history was pruned meanwhile (by another test?): %v", err)
		}
		t.Fatalf("the watcher stopped: %v", err)
	}
	go func() {
		for {
			tr, err := w.Next(context.Background())
			if err != nil {
				stopped <- err
				return
			}
			mu.Lock()
			got = append(got, tr)
			mu.Unlock()
		}
	}()

	// about 200 transitions in about 7 s: k0 and k1 acquired and released,
	// k2 and k3 leases of 150 ms that expire, k3 taken again at once
	// after expiring
	made := make(chan int, 2) // (one for the deferred wait)
	quit := make(chan struct{})
	defer func() {
		close(quit)
		<-made
	}()
	m := newTransitions(t)
	go func() {
		held := map[string]string{}
		expires := map[string]time.Time{}
		n := 0
		for i := 0; n < 200 && time.Since(began) < 7500*time.Millisecond && !closed(quit); i++ {
			key := fmt.Sprintf("%sk%d", prefix, i%4)
			holder := fmt.Sprintf("h%d", i)
			switch {
			case i%4 < 2 && held[key] != "":
				if m.release(key, held[key]) {
					n++
				}
				held[key] = ""
			case i%4 < 2:
				if m.acquire(key, holder, 10*time.Second) {
					n++
					held[key] = holder
				}
			case time.Now().After(expires[key]):
				if m.acquire(key, holder, 150*time.Millisecond) {
					n += 2 // its expiry too
					expires[key] = time.Now().Add(150 * time.Millisecond)
				}
			}
			time.Sleep(25 * time.Millisecond)
		}
		for key, holder := range held {
			if holder != "" && m.release(key, holder) {
				n++
			}
		}
		made <- n
		made <- n
	}()

	// 10 terminations of the watcher's backend, each of a connection that
	// has read the history (live: it is the watcher's, connected again)
	killed := int32(0)
	for k := 0; k < 10; k++ {
		time.Sleep(400 * time.Millisecond)
		var pid int32
		eventually(t, 5*time.Second, func() bool {
			select {
			case err := <-stopped:
				stoppedEnds(err)
			default:
			}
			var ok bool
			pid, ok = query(t, `SELECT pid FROM pg_stat_activity WHERE application_name = $1
				AND query LIKE '%le_history(after%' AND pid <> $2`, appName, killed).(int32)
			return ok
		})
		if !query(t, "SELECT pg_terminate_backend($1)", pid).(bool) {
			t.Fatalf("termination %d: backend %d not terminated", k+1, pid)
		}
		killed = pid
	}
	n := <-made
	t.Logf("%d transitions made, 10 terminations, in %d ms", n, time.Since(began).Milliseconds())

	// every lease of the prefix released or expired, every transition of it
	// numbered: then the end
	eventually(t, 3*time.Second, func() bool {
		query(t, "SELECT le_expire_lapsed()") // where no worker serves, it expires and numbers
		return query(t, `SELECT (SELECT count(*) FROM leaderlock WHERE starts_with(key, $1) AND holder IS NOT NULL)
			+ (SELECT count(*) FROM leaderlock_history_pending WHERE starts_with(key, $1))`, prefix).(int64) == 0
	})
	end := historyPosition(t)
	caughtUp := time.Now()
	for w.Position() < end {
		select {
		case err := <-stopped:
			stoppedEnds(err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Since(caughtUp) > 3*time.Second {
			t.Fatalf("the watcher is at %d, the server at %d; its log: %q", w.Position(), end, logs.lines)
		}
	}
	t.Logf("caught up with %d %d ms after it was numbered", end, time.Since(caughtUp).Milliseconds())
	w.Close()
	if err := <-stopped; !errors.Is(err, ErrWatcherClosed) {
		t.Fatalf("Next after Close: %v", err)
	}

	want, err := serverHistory(t, start, prefix)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "LE002" {
		t.Skipf("the history was pruned meanwhile (by another test?): %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	last := w.Position()
	for len(want) > 0 && want[len(want)-1].Position > last {
		want = want[:len(want)-1]
	}
	mu.Lock()
	defer mu.Unlock()
	if len(want) < 100 {
		t.Errorf("only %d transitions numbered", len(want))
	}
	seen := map[int64]bool{}
	terms := map[string]int64{}
	twice, disordered, lower, incomplete := 0, 0, 0, 0
	for i, tr := range got {
		if seen[tr.Position] {
			if twice++; twice == 1 {
				t.Errorf("position %d delivered twice", tr.Position)
			}
		}
		seen[tr.Position] = true
		if i > 0 && tr.Position <= got[i-1].Position {
			if disordered++; disordered == 1 {
				t.Errorf("position %d after %d", tr.Position, got[i-1].Position)
			}
		}
		if tr.Term < terms[tr.Key] {
			if lower++; lower == 1 {
				t.Errorf("%v: term %d after %d", tr, tr.Term, terms[tr.Key])
			}
		}
		terms[tr.Key] = tr.Term
		if tr.At.IsZero() || len(tr.Payload) == 0 || tr.Term == 0 {
			if incomplete++; incomplete == 1 {
				t.Errorf("%v: at %v, payload %s", tr, tr.At, tr.Payload)
			}
		}
	}
	if twice+disordered+lower+incomplete > 0 {
		t.Errorf("%d delivered twice, %d out of order, %d with a lower term than the last of the key, %d incomplete",
			twice, disordered, lower, incomplete)
	}
	if len(got) != len(want) {
		t.Errorf("%d delivered, le_history has %d", len(got), len(want))
	}
	for i := 0; i < len(want) && i < len(got); i++ {
		g, h := got[i], want[i]
		if g.Position != h.Position || g.Event != h.Event || g.Key != h.Key || g.Holder != h.Holder || g.Term != h.Term {
			t.Errorf("delivered #%d: %v, le_history has %v", i, g, h)
			break
		}
	}
	if c := logs.count("connection lost"); c < 10 {
		t.Errorf("%d connections lost logged, after 10 terminations: %q", c, logs.lines)
	}
	t.Logf("%d transitions delivered (%d to %d), in %d ms in all",
		len(got), start, last, time.Since(began).Milliseconds())
}

// Since resumes after a position kept from an earlier watcher; Key and
// KeyPrefix filter; nil starts from now; a notification brings a
// transition long before the poll.
func TestHistoryWatcherResumesSinceAPosition(t *testing.T) {
	prefix := newKey("since") + "/"
	m := newTransitions(t)
	p0 := historyPosition(t)
	m.acquire(prefix+"k1", "a", time.Minute)
	m.release(prefix+"k1", "a")
	m.acquire(prefix+"k2", "b", time.Minute)

	w1, err := WatchHistory(context.Background(), dsn(t), HistoryOptions{Since: &p0, KeyPrefix: prefix, PollInterval: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer w1.Close()
	if n := query(t, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'leaderlock watch'").(int64); n == 0 {
		t.Error("no connection named 'leaderlock watch'")
	}
	got := expect(t, w1, "acquired "+prefix+"k1 a", "released "+prefix+"k1 a", "acquired "+prefix+"k2 b")
	role := query(t, "SELECT current_user::text").(string)
	var payload struct{ Event, Key, Holder string }
	if err := json.Unmarshal(got[0].Payload, &payload); err != nil || payload.Event != "acquired" || payload.Key != prefix+"k1" ||
		payload.Holder != "a" || got[0].Term != got[1].Term || got[0].Role != role || got[0].At.IsZero() {
		t.Errorf("%+v (%v)", got, err)
	}
	// the poll is 30 s: the notification brings it
	hinted := time.Now()
	m.release(prefix+"k2", "b")
	expect(t, w1, "released "+prefix+"k2 b")
	t.Logf("a transition delivered %d ms after it was made (the poll: 30 s)", time.Since(hinted).Milliseconds())
	if time.Since(hinted) > 2*time.Second {
		t.Errorf("delivered %v after it was made: not on the notification", time.Since(hinted))
	}
	pos := w1.Position()
	w1.Close()
	if _, err := w1.Next(context.Background()); !errors.Is(err, ErrWatcherClosed) {
		t.Fatalf("Next after Close: %v", err)
	}

	m.acquire(prefix+"k1", "c", time.Minute)
	m.acquire(prefix+"k3", "d", time.Minute)
	appName := newKey("watch")
	w2, err := WatchHistory(context.Background(), with(t, dsn(t), "application_name", appName), HistoryOptions{Since: &pos, KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Close()
	later := expect(t, w2, "acquired "+prefix+"k1 c", "acquired "+prefix+"k3 d")
	backend := func() interface{} {
		return query(t, "SELECT pid FROM pg_stat_activity WHERE application_name = $1", appName)
	}
	pid := backend()
	nothingMore(t, w2, 700*time.Millisecond)
	nothingMore(t, w2, 100*time.Millisecond)
	if again := backend(); pid == nil || again != pid {
		t.Errorf("the watcher's backend was %v, is %v: a Next that ends with its context drops the connection", pid, again)
	}

	w3, err := WatchHistory(context.Background(), dsn(t), HistoryOptions{Since: &p0, Key: prefix + "k1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w3.Close()
	expect(t, w3, "acquired "+prefix+"k1 a", "released "+prefix+"k1 a", "acquired "+prefix+"k1 c")
	nothingMore(t, w3, 300*time.Millisecond)
	// read through the other keys' transitions: resuming from its
	// position does not read them again
	if w3.Position() < later[1].Position {
		t.Errorf("a watcher of %q is at %d, before %v", prefix+"k1", w3.Position(), later[1])
	}

	w4, err := WatchHistory(context.Background(), dsn(t), HistoryOptions{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer w4.Close()
	nothingMore(t, w4, 300*time.Millisecond)
	m.release(prefix+"k1", "c")
	m.release(prefix+"k3", "d")
	expect(t, w4, "released "+prefix+"k1 c", "released "+prefix+"k3 d")
}

// A position the retention no longer keeps stops the watcher at once with
// ErrHistoryPruned (LE002), and every later Next with it.
func TestHistoryWatcherStopsWithErrHistoryPruned(t *testing.T) {
	if !superuser(t) {
		t.Skip("LEADERLOCK_DSN's role is not a superuser (ALTER SYSTEM)")
	}
	prunedThrough := func() int64 {
		return query(t, "SELECT pruned_through FROM leaderlock_history_head").(int64)
	}
	if prunedThrough() == 0 && query(t, "SELECT le_capabilities()->>'edition'").(string) == "portable" {
		// No worker: the numbering of le_expire_lapsed prunes, by the
		// administrator's setting, the database's (ALTER DATABASE ... SET,
		// read at each call; a session's SET is ignored).
		prefix := newKey("pruned") + "/"
		m := newTransitions(t)
		for i := 0; i < 2; i++ {
			key := fmt.Sprintf("%sk%d", prefix, i)
			m.acquire(key, "a", time.Minute)
			m.release(key, "a")
		}
		forDatabase := func(change string) string {
			return "DO $$ BEGIN EXECUTE 'ALTER DATABASE ' || quote_ident(current_database()) || ' " + change + "'; END $$"
		}
		restore := func() { execIn(t, dsn(t), forDatabase("RESET leaderlock.history_max_rows")) }
		defer restore()
		execIn(t, dsn(t), forDatabase("SET leaderlock.history_max_rows = 1"), "SELECT le_expire_lapsed()")
		restore()
	}
	if prunedThrough() == 0 {
		restore := func() {
			execIn(t, dsn(t), "ALTER SYSTEM RESET leaderlock.history_max_rows", "SELECT pg_reload_conf()")
		}
		defer restore()
		execIn(t, dsn(t), "ALTER SYSTEM SET leaderlock.history_max_rows = 5", "SELECT pg_reload_conf()")
		prefix := newKey("pruned") + "/"
		m := newTransitions(t)
		i := 0
		eventually(t, 15*time.Second, func() bool {
			i++
			key := fmt.Sprintf("%sk%d", prefix, i)
			m.acquire(key, "a", time.Minute)
			m.release(key, "a")
			return prunedThrough() > 0
		})
		restore()
	}
	since := prunedThrough() - 1
	logs := &logLines{}
	w, err := WatchHistory(context.Background(), dsn(t), HistoryOptions{Since: &since, KeyPrefix: newKey("pruned"), Logf: logs.logf})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	asked := time.Now()
	_, err = nextWithin(w, 5*time.Second)
	t.Logf("after %d: %v (in %d ms)", since, err, time.Since(asked).Milliseconds())
	var pe *pgconn.PgError
	if !errors.Is(err, ErrHistoryPruned) || !errors.Is(err, ErrRejected) || !errors.As(err, &pe) || pe.Code != "LE002" {
		t.Fatalf("Next after a pruned position: %v", err)
	}
	if time.Since(asked) > time.Second || logs.count("connection lost") > 0 {
		t.Errorf("retried a pruned position: %q", logs.lines)
	}
	if _, again := w.Next(context.Background()); again != err {
		t.Errorf("Next again: %v", again)
	}
	if w.Position() != since {
		t.Errorf("position %d, not %d", w.Position(), since)
	}
}

func TestHistoryWatcherBadOptions(t *testing.T) {
	neg := int64(-1)
	for _, o := range []HistoryOptions{{Key: "a", KeyPrefix: "b"}, {Since: &neg}, {PollInterval: -time.Second}} {
		if _, err := WatchHistory(context.Background(), "postgres://127.0.0.1:1/x", o); !errors.Is(err, ErrBadArgument) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	if _, err := WatchHistory(context.Background(), "postgres://%zz", HistoryOptions{}); !errors.Is(err, ErrBadArgument) {
		t.Errorf("a malformed dsn: %v", err)
	}
}
