package leaderlock

// Sessions (contract 21) against a real server (LEADERLOCK_DSN, its role a
// superuser for nothing here but the same role on two connections):
//   - 50 keys under one session with a ttl of 1 s, kept for 3 s by the one
//     renewer: about ttl/3 apart, no row of leaderlock written (xmin and
//     ctid unchanged), the session's row renewed, every key held;
//   - a busy process (internal/sessioncandidate, one P) paused (SIGSTOP)
//     past its deadline and resumed: its first Check fails, nothing done
//     past the deadline, the key a rival took meanwhile untouched;
//   - Close releases every key at once: a rival waiting in le_acquire gets
//     one within a second, every other key is vacant when Close returns;
//   - a renewal refused by the server (the session closed from another
//     connection) loses the session and every lease: Lost closes before
//     the deadline, Check says StopRefused;
//   - TryAcquire refused (nil, nil), Acquire timing out (ErrNotAcquired),
//     Guard with the acquisition's term, Release handing the key over;
//   - bad input refused by the client before anything is sent.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func openSession(t *testing.T, cfg SessionConfig) *Session {
	t.Helper()
	s, err := OpenSession(context.Background(), dsn(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return s
}

func TestSessionKeepsFiftyKeysWithOneRenewalThatWritesNoKeyRow(t *testing.T) {
	ctx := context.Background()
	ttl := time.Second
	s := openSession(t, SessionConfig{TTL: ttl, ID: newKey("fifty")})
	keys := make([]string, 50)
	leases := make([]*SessionLease, 50)
	for i := range keys {
		keys[i] = newKey(fmt.Sprintf("fifty-%d", i))
		l, err := s.TryAcquire(ctx, keys[i])
		if err != nil || l == nil {
			t.Fatalf("key %d: %v, %v", i, l, err)
		}
		if l.Term != query(t, "SELECT term FROM le_lease($1)", keys[i]).(int64) {
			t.Fatalf("key %d: term %d, the server's %v", i, l.Term, query(t, "SELECT term FROM le_lease($1)", keys[i]))
		}
		leases[i] = l
	}
	// a row version of each key: any write (a renewal of the key's row
	// included) makes a new one, with another xmin and ctid
	versions := func() string {
		return query(t, "SELECT string_agg(key || ' ' || xmin::text || ' ' || ctid::text, ',' ORDER BY key) "+
			"FROM leaderlock WHERE key = ANY($1)", keys).(string)
	}
	renewedAt := func() time.Time {
		return query(t, "SELECT renewed_at FROM leaderlock_sessions WHERE session = $1::uuid", s.Handle()).(time.Time)
	}
	before, renewedBefore, sentBefore := versions(), renewedAt(), s.renewals.Load()
	time.Sleep(3 * ttl)
	after, renewedAfter, sent := versions(), renewedAt(), s.renewals.Load()-sentBefore
	t.Logf("%d renewals of the session in %v (ttl %v); its row renewed %v later", sent, 3*ttl, ttl,
		renewedAfter.Sub(renewedBefore).Round(time.Millisecond))
	if before != after {
		t.Fatal("rows of leaderlock were written while the session was renewed")
	}
	if sent < 6 || sent > 12 {
		t.Fatalf("%d renewals in %v: not one every ttl/3", sent, 3*ttl)
	}
	if renewedAfter.Sub(renewedBefore) < 2*ttl {
		t.Fatalf("the session's row was renewed %v later only", renewedAfter.Sub(renewedBefore))
	}
	held := query(t, "SELECT count(*) FROM leaderlock_status WHERE key = ANY($1) AND state = 'held' "+
		"AND holder = $2 AND session = $3::uuid", keys, s.ID(), s.Handle()).(int64)
	if held != 50 || !s.Alive() {
		t.Fatalf("%d of 50 keys held; session alive: %v", held, s.Alive())
	}
	for i, l := range leases {
		if err := l.Check(); err != nil {
			t.Fatalf("key %d: %v", i, err)
		}
	}
}

// startSessionCandidate runs internal/sessioncandidate as id for keys; its
// output goes to a log shown when the test fails.
func startSessionCandidate(t *testing.T, id string, ttl time.Duration, records string, keys ...string) *candidate {
	t.Helper()
	logPath := filepath.Join(filepath.Dir(records), id+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{dsn(t), id, strconv.FormatFloat(ttl.Seconds(), 'f', -1, 64), records}, keys...)
	cmd := exec.Command(buildMain(t, "./internal/sessioncandidate"), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// One P: after a pause the busy worker goes on before any timer's or
	// renewer's goroutine runs, so only a check that reads the clock can
	// stop it (with more, they race, and a check that reads what a timer
	// set passes or fails at random).
	cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &candidate{id: id, cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() { c.err = cmd.Wait(); logFile.Close(); close(c.exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-c.exited
		if t.Failed() {
			out, _ := os.ReadFile(logPath)
			t.Logf("%s's log:\n%s", id, out)
		}
	})
	return c
}

// recordLines are the records' lines of kind ("ready", "tick", "lost"),
// split in fields.
func recordLines(t *testing.T, records, kind string) [][]string {
	t.Helper()
	b, err := os.ReadFile(records)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == kind {
			out = append(out, f)
		}
	}
	return out
}

func TestSessionPausedProcessDoesNothingPastItsDeadline(t *testing.T) {
	dsn(t)
	ttl := 1500 * time.Millisecond
	keys := []string{newKey("paused-0"), newKey("paused-1"), newKey("paused-2")}
	records := filepath.Join(t.TempDir(), "records")
	a := startSessionCandidate(t, "a", ttl, records, keys...)
	eventually(t, 10*time.Second, func() bool { return len(recordLines(t, records, "ready")) == 1 })
	eventually(t, 5*time.Second, func() bool { return len(readTicks(t, records)) > 100 })
	time.Sleep(2 * ttl / 3) // renewing meanwhile

	a.signal(t, syscall.SIGSTOP)
	pausedAt := time.Now()
	// The session lapses on the server: a rival takes a key (the worker
	// vacated it, or the try does, where no worker runs).
	defer query(t, "SELECT le_release($1, 'rival')", keys[0])
	eventually(t, ttl+5*time.Second, func() bool {
		return query(t, "SELECT le_try_acquire($1, 'rival', '30 seconds')", keys[0]).(bool)
	})
	rivalTerm := query(t, "SELECT term FROM le_lease($1)", keys[0]).(int64)
	time.Sleep(ttl)
	ticksBefore := len(readTicks(t, records))
	a.signal(t, syscall.SIGCONT)
	resumedAt := time.Now()
	select {
	case <-a.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("the resumed process did not see its session lost")
	}

	late := 0
	var last time.Time
	for _, tk := range readTicks(t, records) {
		if tk.at.After(last) {
			last = tk.at
		}
		if tk.at.After(pausedAt.Add(ttl)) { // its deadline was before pausedAt + ttl
			late++
		}
	}
	lost := recordLines(t, records, "lost")
	t.Logf("paused %.1f s (ttl %v); last tick %d ms after the pause; %d ticks before, %d after; lost: %v",
		resumedAt.Sub(pausedAt).Seconds(), ttl, last.Sub(pausedAt).Milliseconds(), ticksBefore,
		len(readTicks(t, records))-ticksBefore, lost)
	if late > 0 {
		t.Fatalf("the paused process did %d units of work past its deadline (last %d ms after it resumed)",
			late, last.Sub(resumedAt).Milliseconds())
	}
	if len(lost) != 1 {
		t.Fatalf("no loss recorded by the first check after the pause: %v", lost)
	}
	if h, term := leader(t, keys[0]), query(t, "SELECT term FROM le_lease($1)", keys[0]).(int64); h != "rival" || term != rivalTerm {
		t.Fatalf("the rival's key after a resumed: %q in term %d (the rival's: %d)", h, term, rivalTerm)
	}
	for _, k := range keys[1:] {
		if h := leader(t, k); h == "a" {
			t.Fatalf("%q still held by the lost session", k)
		}
	}
}

func TestSessionCloseReleasesEveryKeyAtOnce(t *testing.T) {
	ctx := context.Background()
	s := openSession(t, SessionConfig{TTL: 10 * time.Second, ID: newKey("closer")})
	keys := []string{newKey("close-0"), newKey("close-1"), newKey("close-2"), newKey("close-3")}
	var leases []*SessionLease
	for _, k := range keys {
		l, err := s.Acquire(ctx, k, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		leases = append(leases, l)
	}
	rival, err := pgx.Connect(ctx, dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer rival.Close(ctx)
	defer query(t, "SELECT le_release($1, 'rival')", keys[1])
	var pid uint32 = rival.PgConn().PID()
	type answer struct {
		got bool
		at  time.Time
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		var got bool
		err := rival.QueryRow(ctx, "SELECT le_acquire($1, 'rival', '30 seconds', '8 seconds')", keys[1]).Scan(&got)
		answered <- answer{got, time.Now(), err}
	}()
	eventually(t, 5*time.Second, func() bool {
		return query(t, "SELECT state = 'active' FROM pg_stat_activity WHERE pid = $1", int(pid)) == true
	})
	time.Sleep(300 * time.Millisecond) // waiting
	select {
	case a := <-answered:
		t.Fatalf("the rival did not wait: %+v", a)
	default:
	}
	closing := time.Now()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	closed := time.Now()
	held := query(t, "SELECT count(*) FROM leaderlock_status WHERE key = ANY($1) AND holder = $2", keys, s.ID()).(int64)
	select {
	case <-s.Lost():
	default:
		t.Fatal("Lost() open after Close")
	}
	for i, l := range leases {
		if l.Alive() || !errors.Is(l.Check(), ErrLeaseLost) {
			t.Fatalf("lease %d alive after Close: %v", i, l.Check())
		}
	}
	if l, err := s.TryAcquire(ctx, keys[0]); l != nil || !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("TryAcquire after Close: %v, %v", l, err)
	}
	var a answer
	select {
	case a = <-answered:
	case <-time.After(5 * time.Second):
		t.Fatal("the rival waiting in le_acquire was not served after Close")
	}
	t.Logf("Close took %d ms; the rival served %d ms after it returned",
		closed.Sub(closing).Milliseconds(), a.at.Sub(closed).Milliseconds())
	if a.err != nil || !a.got || a.at.Sub(closed) > time.Second {
		t.Fatalf("the rival: %+v, %v after Close returned", a, a.at.Sub(closed))
	}
	if held != 0 {
		t.Fatalf("%d of %d keys still held by the session when Close returned", held, len(keys))
	}
	if n := query(t, "SELECT count(*) FROM leaderlock_sessions WHERE session = $1::uuid", s.Handle()).(int64); n != 0 {
		t.Fatal("the session's row is still there after Close")
	}
}

func TestSessionRenewalRefusedLosesEveryLease(t *testing.T) {
	ctx := context.Background()
	ttl := 3 * time.Second
	s := openSession(t, SessionConfig{TTL: ttl, ID: newKey("refused")})
	keys := []string{newKey("refused-0"), newKey("refused-1")}
	var leases []*SessionLease
	for _, k := range keys {
		l, err := s.TryAcquire(ctx, k)
		if err != nil || l == nil {
			t.Fatal(l, err)
		}
		leases = append(leases, l)
	}
	time.Sleep(ttl / 2) // a renewal or so
	// the same role, another connection: the server ends the session
	closedAt := time.Now()
	if !query(t, "SELECT le_close_session($1::uuid)", s.Handle()).(bool) {
		t.Fatal("le_close_session from another connection was refused")
	}
	deadline := s.Deadline()
	select {
	case <-s.Lost():
	case <-time.After(ttl):
		t.Fatal("Lost() not closed after the renewal was refused")
	}
	lostAfter := time.Since(closedAt)
	t.Logf("lost %d ms after the server ended the session (%d ms before the local deadline)",
		lostAfter.Milliseconds(), time.Until(deadline).Milliseconds())
	var lost *LostError
	if err := s.Check(); !errors.As(err, &lost) || lost.Reason != StopRefused || s.Alive() {
		t.Fatalf("the session after a refused renewal: %v", err)
	}
	if lostAfter > ttl/3+500*time.Millisecond || !time.Now().Before(deadline) {
		t.Fatalf("lost %v after the session ended: not at the next renewal", lostAfter)
	}
	for i, l := range leases {
		if err := l.Check(); !errors.As(err, &lost) || lost.Reason != StopRefused || l.Alive() {
			t.Fatalf("lease %d after a refused renewal: %v", i, err)
		}
	}
	if l, err := s.TryAcquire(ctx, newKey("refused-after")); l != nil || !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("TryAcquire after the loss: %v, %v", l, err)
	}
}

func TestSessionAcquireGuardAndRelease(t *testing.T) {
	ctx := context.Background()
	s := openSession(t, SessionConfig{TTL: 5 * time.Second, ID: newKey("guarded")})
	mine, theirs := newKey("mine"), newKey("theirs")
	if !query(t, "SELECT le_try_acquire($1, 'rival', '30 seconds')", theirs).(bool) {
		t.Fatal("the rival did not get its key")
	}
	defer query(t, "SELECT le_release($1, 'rival')", theirs)
	if l, err := s.TryAcquire(ctx, theirs); l != nil || err != nil {
		t.Fatalf("TryAcquire of a held key: %v, %v", l, err)
	}
	start := time.Now()
	if l, err := s.Acquire(ctx, theirs, 300*time.Millisecond); l != nil || !errors.Is(err, ErrNotAcquired) ||
		time.Since(start) < 300*time.Millisecond {
		t.Fatalf("Acquire of a held key: %v, %v after %v", l, err, time.Since(start))
	}
	l, err := s.Acquire(ctx, mine, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.TryAcquire(ctx, mine); err != nil || again != l {
		t.Fatalf("acquiring a key held already: %v, %v (first %v)", again, err, l)
	}
	work, err := pgx.Connect(ctx, dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer work.Close(ctx)
	write := func() error {
		tx, err := work.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		if err := l.Guard(ctx, tx); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	if err := write(); err != nil {
		t.Fatalf("a guarded write while held: %v", err)
	}
	// the server's refusal ends the lease, not the session
	query(t, "SELECT le_force_release($1)", mine)
	var lost *LostError
	var pe *pgconn.PgError
	if err := write(); !errors.As(err, &lost) || lost.Reason != StopRefused || !errors.As(err, &pe) || pe.Code != "LE001" {
		t.Fatalf("a guarded write after a force-release: %v", err)
	}
	if l.Alive() || !s.Alive() {
		t.Fatalf("after LE001: lease alive %v, session alive %v", l.Alive(), s.Alive())
	}
	l2, err := s.TryAcquire(ctx, mine)
	if err != nil || l2 == nil || l2.Term <= l.Term {
		t.Fatalf("acquired again: %v, %v", l2, err)
	}
	// Release: the lease lost here, the key handed over at once
	if err := s.Release(ctx, mine); err != nil {
		t.Fatal(err)
	}
	if l2.Alive() || !errors.Is(l2.Check(), ErrLeaseLost) {
		t.Fatal("the lease is alive after Release")
	}
	if !query(t, "SELECT le_try_acquire($1, 'rival', '30 seconds')", mine).(bool) {
		t.Fatal("the released key was not free")
	}
	defer query(t, "SELECT le_release($1, 'rival')", mine)
	if err := s.Release(ctx, mine); err != nil { // not held: nothing to do
		t.Fatal(err)
	}
	if h := leader(t, mine); h != "rival" {
		t.Fatalf("a second Release touched the rival's key: %q", h)
	}
}

func TestSessionBadInput(t *testing.T) {
	ctx := context.Background()
	ours := func(what string, err error) {
		t.Helper()
		var e *Error
		// the client's own check: nothing sent, no SQLSTATE
		if !errors.Is(err, ErrBadArgument) || !errors.Is(err, ErrRejected) || !errors.As(err, &e) || e.SQLState != "" {
			t.Errorf("%s: %v", what, err)
		}
	}
	nowhere := "postgres://nobody@127.0.0.1:1/none?connect_timeout=2" // never reached
	for _, ttl := range []time.Duration{0, -time.Second} {
		s, err := OpenSession(ctx, nowhere, SessionConfig{TTL: ttl})
		if s != nil {
			t.Fatal("a session with a ttl of", ttl)
		}
		ours(fmt.Sprintf("TTL %v", ttl), err)
	}
	_, err := OpenSession(ctx, nowhere, SessionConfig{TTL: time.Second, LockDelay: -time.Second})
	ours("a negative LockDelay", err)
	_, err = OpenSession(ctx, "postgres://x:bad-port/", SessionConfig{TTL: time.Second})
	if !errors.Is(err, ErrBadArgument) {
		t.Errorf("a malformed dsn: %v", err)
	}
	// the server's refusal of a ttl above max_ttl: the same kind, with its SQLSTATE
	_, err = OpenSession(ctx, dsn(t), SessionConfig{TTL: 1000 * time.Hour})
	var e *Error
	if !errors.Is(err, ErrBadArgument) || !errors.As(err, &e) || e.SQLState != "22023" {
		t.Errorf("a ttl above max_ttl: %v", err)
	}
	s := openSession(t, SessionConfig{TTL: 5 * time.Second})
	l, err := s.TryAcquire(ctx, "")
	ours("TryAcquire of an empty key", err)
	if l != nil {
		t.Error("a lease of an empty key")
	}
	_, err = s.Acquire(ctx, "", time.Second)
	ours("Acquire of an empty key", err)
	_, err = s.Acquire(ctx, newKey("neg"), -time.Second)
	ours("Acquire with a negative wait", err)
	ours("Release of an empty key", s.Release(ctx, ""))
	if !s.Alive() {
		t.Error("bad input ended the session")
	}
}
