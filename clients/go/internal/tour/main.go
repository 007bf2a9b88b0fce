// The Go client's tour (tests/clients/tours.py): every statement of the
// library, sent through its public API, each answer checked. Run by
// tests/clients/hostile.py against a database whose owner set a search_path
// full of traps, it shows that no statement depends on the path.
//
//	tour DSN PREFIX [--pooled]
//
// Every key and job starts with PREFIX. --pooled: DSN goes through a
// transaction-pooling pgbouncer (the library does there what it does
// anywhere: it LISTENs, and polls when no notification comes).
// LEADERLOCK_SCHEMA, when set, names the extension's schema (the library's
// default for Schema). LEADERLOCK_TOUR_EDITION=portable: the database has
// the portable edition (no schedules kept in the database). One line per step; at the end, the library's
// statement constants the tour did not send, with why. Exits 1 if a step
// failed or a statement was not sent for no known reason.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	leaderlock "github.com/leaderlock/leaderlock/clients/go"
	"github.com/leaderlock/leaderlock/clients/go/internal/stmttrace"
)

// Statements the tour cannot make the library send here, and why.
var unreachable = map[string]string{
	"sqlRenewLegacy":   "sent only on an extension schema before 0.5.0 (le_renew without a term), after le_renew's 42883",
	"sqlReleaseLegacy": "sent only on an extension schema before 0.5.0 (le_release without a term), after le_release's 42883",
	"sqlWorkerRuns":    "sent only on an extension schema before 0.5.0 (no le_capabilities())",
	"sqlExpire": "sent only where no worker serves (the portable edition, the library not preloaded): " +
		"le_capabilities() says one does here",
}

type tour struct {
	dsn, prefix string
	pooled      bool
	failed      []string
	mu          sync.Mutex
	sent        map[string]bool // statement texts the library sent
}

func main() {
	if len(os.Args) < 3 || len(os.Args) > 4 || (len(os.Args) == 4 && os.Args[3] != "--pooled") {
		fmt.Fprintln(os.Stderr, "usage: tour DSN PREFIX [--pooled]")
		os.Exit(2)
	}
	t := &tour{dsn: os.Args[1], prefix: os.Args[2], pooled: len(os.Args) == 4, sent: map[string]bool{}}
	stmttrace.SetHook(func(stmt string) {
		t.mu.Lock()
		t.sent[stmt] = true
		t.mu.Unlock()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	start := time.Now()
	if s := os.Getenv("LEADERLOCK_SCHEMA"); s != "" {
		fmt.Printf("LEADERLOCK_SCHEMA=%q\n", s)
	}
	if t.pooled {
		fmt.Println("pooled: Run and WatchHistory LISTEN as anywhere; nothing relies on a notification")
	}

	var w *leaderlock.HistoryWatcher
	var since int64
	t.step("history: watch from now on (the position)", func() (string, error) {
		var err error
		w, err = leaderlock.WatchHistory(ctx, t.dsn, leaderlock.HistoryOptions{KeyPrefix: t.prefix,
			PollInterval: 100 * time.Millisecond, Logf: logf})
		if err != nil {
			return "", err
		}
		since = w.Position()
		return fmt.Sprintf("position %d", since), nil
	})
	key := t.prefix + "-lease"
	t.step("lease: lead, guard, a renewal deferred by the lock, a follower, release on cancel", func() (string, error) {
		return t.lease(ctx, key)
	})
	t.step("refusal: a Schema that does not hold leaderlock", func() (string, error) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second) // a refusal for good returns at once
		defer cancel()
		err := leaderlock.Run(rctx, leaderlock.Config{ConnString: t.dsn, Key: key, TTL: time.Second,
			Schema: t.prefix + "_nowhere", Logf: logf})
		if !errors.Is(err, leaderlock.ErrNotInstalled) || !strings.Contains(err.Error(), "does not hold leaderlock") {
			return "", fmt.Errorf("Run returned %v", err)
		}
		return err.Error(), nil
	})
	t.step("refusal: a ttl above leaderlock.max_ttl", func() (string, error) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		err := leaderlock.Run(rctx, leaderlock.Config{ConnString: t.dsn, Key: key, TTL: 1000 * time.Hour, Logf: logf})
		if !errors.Is(err, leaderlock.ErrBadArgument) || !strings.Contains(err.Error(), "max_ttl") {
			return "", fmt.Errorf("Run returned %v", err)
		}
		return err.Error(), nil
	})
	t.step("session: open, acquire, wait, guard, a release sent again, renew, close", func() (string, error) {
		return t.session(ctx)
	})
	t.step("lock: read, acquire on the term read, a rival refused, renew, guard, release, the rival acquires", func() (string, error) {
		return t.lock(ctx, t.prefix+"-lock")
	})
	job := t.prefix + "-job"
	t.step("schedule: two replicas claim, renew, finish; the refused one reads the run", func() (string, error) {
		return t.schedule(ctx, job)
	})
	if os.Getenv("LEADERLOCK_TOUR_EDITION") == "portable" {
		unreachable["sqlNextDue"] = "the portable edition keeps no schedules in the database"
	} else {
		t.step("schedule by the job's name alone: its schedule kept in the database (le_schedule), every second, then paused",
			func() (string, error) { return t.registered(ctx, t.prefix+"-registered") })
	}
	t.step("group: two members share its partitions, revoked ones given back once drained, the guard, both leave",
		func() (string, error) { return t.group(ctx, t.prefix+"-group") })
	if w != nil {
		t.step("history: the tour's transitions, in order", func() (string, error) {
			return t.history(ctx, w, since, key, job)
		})
	}
	t.report(time.Since(start))
}

func logf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "  log: "+format+"\n", args...)
}

func (t *tour) step(name string, f func() (string, error)) {
	start := time.Now()
	detail, err := f()
	ms := time.Since(start).Milliseconds()
	if err != nil {
		fmt.Printf("FAIL %s (%d ms): %v\n", name, ms, err)
		t.failed = append(t.failed, name)
		return
	}
	fmt.Printf("ok   %s (%d ms): %s\n", name, ms, detail)
}

// reached reports whether the library sent the statement constant name.
func (t *tour) reached(name string) bool {
	text, ok := stmttrace.Statements()[name]
	t.mu.Lock()
	defer t.mu.Unlock()
	return ok && t.sent[text]
}

// own is a connection of the tour's own (for the transactions Guard
// fences): no prepared statement kept, as behind pgbouncer.
func (t *tour) own(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(t.dsn)
	if err != nil {
		return nil, err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	return pgx.ConnectConfig(ctx, cfg)
}

// within waits until ok holds, for d at most.
func within(d time.Duration, ok func() bool) bool {
	until := time.Now().Add(d)
	for !ok() {
		if time.Now().After(until) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// lease: A leads (announcing a value); B, waiting, sees A lead; a
// transaction A's Guard fences holds the lease's row through a renewal,
// which is deferred ("still ours?"), then goes on; A cancelled releases,
// and B leads in a later term.
func (t *tour) lease(ctx context.Context, key string) (string, error) {
	type led struct {
		lease leaderlock.Lease
		ctx   context.Context
	}
	aLed, bLed := make(chan led, 1), make(chan led, 1)
	aStop, bStop := make(chan leaderlock.StopReason, 1), make(chan leaderlock.StopReason, 1)
	var seenMu sync.Mutex
	var bSaw []string
	cfg := func(id string, ttl time.Duration, ch chan led, stop chan leaderlock.StopReason) leaderlock.Config {
		return leaderlock.Config{ConnString: t.dsn, Key: key, Identity: id, TTL: ttl, ReleaseOnCancel: true,
			Poll: 200 * time.Millisecond, Value: map[string]string{"tour": id}, Logf: logf,
			Callbacks: leaderlock.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context, l leaderlock.Lease) { ch <- led{l, ctx}; <-ctx.Done() },
				OnStoppedLeading: func(r leaderlock.StopReason) { stop <- r },
				OnNewLeader: func(h string) {
					if id == t.prefix+"-b" {
						seenMu.Lock()
						bSaw = append(bSaw, h)
						seenMu.Unlock()
					}
				},
			}}
	}
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	defer acancel()
	aErr := make(chan error, 1)
	go func() { aErr <- leaderlock.Run(actx, cfg(t.prefix+"-a", 3*time.Second, aLed, aStop)) }()
	var a led
	select {
	case a = <-aLed:
	case err := <-aErr:
		return "", fmt.Errorf("A's Run returned %v without leading", err)
	case <-time.After(10 * time.Second):
		return "", errors.New("A did not lead within 10 s")
	}
	if a.lease.Term <= 0 || !a.lease.Valid() || a.ctx.Err() != nil || a.lease.Key != key {
		return "", fmt.Errorf("A's lease: term %d, valid %v, ctx %v", a.lease.Term, a.lease.Valid(), a.ctx.Err())
	}
	bctx, bcancel := context.WithTimeout(ctx, 30*time.Second)
	defer bcancel()
	bErr := make(chan error, 1)
	go func() { bErr <- leaderlock.Run(bctx, cfg(t.prefix+"-b", 2*time.Second, bLed, bStop)) }()

	// Guard: the row share-locked for 1.3 s, across a renewal (every 1 s)
	c, err := t.own(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close(context.Background())
	tx, err := c.Begin(ctx)
	if err != nil {
		return "", err
	}
	if err := a.lease.Guard(ctx, tx); err != nil {
		_ = tx.Rollback(ctx)
		return "", fmt.Errorf("Guard: %v", err)
	}
	before := a.lease.Deadline()
	time.Sleep(1300 * time.Millisecond)
	if err := tx.Commit(ctx); err != nil {
		return "", err
	}
	if !t.reached("sqlStillOurs") {
		return "", errors.New("no renewal met the row locked (sqlStillOurs not sent)")
	}
	if !within(2*time.Second, func() bool { return a.lease.Deadline().After(before) }) || !a.lease.Valid() {
		return "", fmt.Errorf("no renewal after the lock: deadline %v, valid %v", a.lease.Deadline(), a.lease.Valid())
	}
	if !within(3*time.Second, func() bool {
		seenMu.Lock()
		defer seenMu.Unlock()
		return len(bSaw) > 0 && bSaw[len(bSaw)-1] == t.prefix+"-a"
	}) {
		return "", fmt.Errorf("B never saw A lead (saw %q)", bSaw)
	}
	acancel()
	if r := <-aStop; r != leaderlock.StopShutdown {
		return "", fmt.Errorf("A stopped: %v", r)
	}
	if err := <-aErr; err != nil {
		return "", fmt.Errorf("A's Run: %v", err)
	}
	var b led
	select {
	case b = <-bLed:
	case err := <-bErr:
		return "", fmt.Errorf("B's Run returned %v without leading", err)
	case <-time.After(5 * time.Second):
		return "", errors.New("B did not lead within 5 s of A's release")
	}
	if b.lease.Term <= a.lease.Term {
		return "", fmt.Errorf("B leads in term %d, A led in %d", b.lease.Term, a.lease.Term)
	}
	bcancel()
	if r := <-bStop; r != leaderlock.StopShutdown {
		return "", fmt.Errorf("B stopped: %v", r)
	}
	if err := <-bErr; err != nil {
		return "", fmt.Errorf("B's Run: %v", err)
	}
	return fmt.Sprintf("A led in term %d, renewal deferred then made; B saw A, led in term %d; both released",
		a.lease.Term, b.lease.Term), nil
}

// lock: the Lock a caller drives (as resourcelock does for client-go).
func (t *tour) lock(ctx context.Context, key string) (string, error) {
	a, err := leaderlock.NewLock(leaderlock.LockConfig{ConnString: t.dsn, Key: key, Identity: "tour-a", Logf: logf})
	if err != nil {
		return "", err
	}
	defer a.Close()
	b, err := leaderlock.NewLock(leaderlock.LockConfig{ConnString: t.dsn, Key: key, Identity: "tour-b", Logf: logf})
	if err != nil {
		return "", err
	}
	defer b.Close()
	r, err := a.Read(ctx)
	if err != nil || r.Exists {
		return "", fmt.Errorf("Read of a new key: %+v, %v", r, err)
	}
	if ok, err := a.Acquire(ctx, 5*time.Second, r); !ok || err != nil {
		return "", fmt.Errorf("Acquire: %v, %v", ok, err)
	}
	lease, _ := a.Lease()
	if r, err = b.Read(ctx); err != nil || r.Holder != "tour-a" || r.Term != lease.Term {
		return "", fmt.Errorf("Read while a holds it: %+v, %v", r, err)
	}
	if ok, err := b.Acquire(ctx, 5*time.Second, r); ok || err != nil {
		return "", fmt.Errorf("the rival's Acquire: %v, %v", ok, err)
	}
	if ok, err := a.Renew(ctx, 5*time.Second); !ok || err != nil {
		return "", fmt.Errorf("Renew: %v, %v", ok, err)
	}
	c, err := t.own(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close(context.Background())
	tx, err := c.Begin(ctx)
	if err != nil {
		return "", err
	}
	if err := lease.Guard(ctx, tx); err != nil {
		_ = tx.Rollback(ctx)
		return "", fmt.Errorf("Guard: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return "", err
	}
	if err := a.Release(ctx); err != nil || lease.Check() == nil {
		return "", fmt.Errorf("Release: %v (Check %v)", err, lease.Check())
	}
	if r, err = b.Read(ctx); err != nil {
		return "", err
	}
	if ok, err := b.Acquire(ctx, 5*time.Second, r); !ok || err != nil {
		return "", fmt.Errorf("the rival's Acquire after the release: %v, %v", ok, err)
	}
	lb, _ := b.Lease()
	if err := b.Release(ctx); err != nil {
		return "", err
	}
	return fmt.Sprintf("a led in term %d, b in term %d", lease.Term, lb.Term), nil
}

func (t *tour) session(ctx context.Context) (string, error) {
	k1, k2 := t.prefix+"-s1", t.prefix+"-s2"
	s, err := leaderlock.OpenSession(ctx, t.dsn, leaderlock.SessionConfig{TTL: 1500 * time.Millisecond,
		ID: t.prefix + "-s", KeepValues: true, Logf: logf})
	if err != nil {
		return "", fmt.Errorf("OpenSession: %v", err)
	}
	defer s.Close(context.Background())
	rival, err := leaderlock.OpenSession(ctx, t.dsn, leaderlock.SessionConfig{TTL: 1500 * time.Millisecond,
		ID: t.prefix + "-rival", LockDelay: 100 * time.Millisecond, Logf: logf})
	if err != nil {
		return "", fmt.Errorf("OpenSession (rival): %v", err)
	}
	defer rival.Close(context.Background())
	if s.Handle() == "" || !s.Alive() {
		return "", fmt.Errorf("session %q alive %v", s.Handle(), s.Alive())
	}
	l1, err := s.TryAcquire(ctx, k1)
	if err != nil || l1 == nil || l1.Term <= 0 {
		return "", fmt.Errorf("TryAcquire: %v, %v", l1, err)
	}
	if again, err := s.TryAcquire(ctx, k1); err != nil || again == nil || again.Term != l1.Term {
		return "", fmt.Errorf("TryAcquire again: %v, %v (term %d before)", again, err, l1.Term)
	}
	r2, err := rival.TryAcquire(ctx, k2)
	if err != nil || r2 == nil {
		return "", fmt.Errorf("the rival's TryAcquire: %v, %v", r2, err)
	}
	if l, err := s.TryAcquire(ctx, k2); l != nil || err != nil {
		return "", fmt.Errorf("TryAcquire of the rival's key: %v, %v", l, err)
	}
	if _, err := s.Acquire(ctx, k2, 300*time.Millisecond); !errors.Is(err, leaderlock.ErrNotAcquired) {
		return "", fmt.Errorf("Acquire of the rival's key, 300 ms: %v", err)
	}
	released := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		released <- rival.Release(ctx, k2)
	}()
	l2, err := s.Acquire(ctx, k2, 5*time.Second)
	if err != nil || l2.Term <= r2.Term {
		return "", fmt.Errorf("Acquire while the rival releases: %v, %v", l2, err)
	}
	if err := <-released; err != nil {
		return "", fmt.Errorf("the rival's Release: %v", err)
	}

	// A transaction l1.Guard fences holds k1's row; a release of k1 that
	// heard no answer (its context done) is sent again before k1 is
	// acquired again, meets the row locked, and is asked whether the
	// tenure is still held: it is, so no try.
	c, err := t.own(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close(context.Background())
	tx, err := c.Begin(ctx)
	if err != nil {
		return "", err
	}
	if err := l1.Guard(ctx, tx); err != nil {
		_ = tx.Rollback(ctx)
		return "", fmt.Errorf("Guard: %v", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Release(done, k1); err == nil {
		_ = tx.Rollback(ctx)
		return "", errors.New("a Release with its context done returned nil")
	}
	if l1.Alive() {
		_ = tx.Rollback(ctx)
		return "", errors.New("the released lease is alive")
	}
	if l, err := s.TryAcquire(ctx, k1); l != nil || err != nil {
		_ = tx.Rollback(ctx)
		return "", fmt.Errorf("TryAcquire while the release sent again meets the lock: %v, %v", l, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return "", err
	}
	l1b, err := s.TryAcquire(ctx, k1)
	if err != nil || l1b == nil || l1b.Term <= l1.Term {
		return "", fmt.Errorf("TryAcquire after the lock: %v, %v (term %d before)", l1b, err, l1.Term)
	}
	d := s.Deadline()
	if !within(2*time.Second, func() bool { return s.Deadline().After(d) }) || !s.Alive() || !l1b.Alive() {
		return "", fmt.Errorf("no renewal: deadline %v, alive %v", s.Deadline(), s.Alive())
	}
	if err := s.Close(ctx); err != nil {
		return "", fmt.Errorf("Close: %v", err)
	}
	if s.Alive() || l1b.Alive() || l2.Alive() {
		return "", errors.New("alive after Close")
	}
	if err := rival.Close(ctx); err != nil {
		return "", fmt.Errorf("Close (rival): %v", err)
	}
	return fmt.Sprintf("terms %d, %d (waited for), %d (after the release sent again); renewed; closed",
		l1.Term, l2.Term, l1b.Term), nil
}

func (t *tour) schedule(ctx context.Context, job string) (string, error) {
	type run struct {
		by   string
		term int64
	}
	var mu sync.Mutex
	runs := map[time.Time][]run{}
	fn := func(id string) leaderlock.RunFunc {
		return func(ctx context.Context, r *leaderlock.ScheduledRun) error {
			select { // across a renewal (every ttl/3 = 0.5 s)
			case <-time.After(700 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
			if !r.IsOurs() {
				return errors.New("tour: not ours after 700 ms")
			}
			mu.Lock()
			runs[r.Due] = append(runs[r.Due], run{id, r.Term})
			n := len(runs)
			mu.Unlock()
			if n%2 == 0 {
				return errors.New("tour: a run that fails, recorded with its detail")
			}
			return nil
		}
	}
	sctx, cancel := context.WithTimeout(ctx, 3200*time.Millisecond)
	defer cancel()
	errs := make(chan error, 2)
	for _, id := range []string{t.prefix + "-ra", t.prefix + "-rb"} {
		go func(id string) {
			errs <- leaderlock.Schedule(sctx, leaderlock.ScheduleConfig{ConnString: t.dsn, Job: job, Identity: id,
				Every: time.Second, TTL: 1500 * time.Millisecond, Poll: 100 * time.Millisecond, Logf: logf}, fn(id))
		}(id)
	}
	for i := 0; i < 2; i++ {
		if err := <-errs; err != nil {
			return "", fmt.Errorf("Schedule: %v", err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(runs) < 2 {
		return "", fmt.Errorf("%d runs finished in 3.2 s", len(runs))
	}
	var parts []string
	for due, rs := range runs {
		if len(rs) != 1 {
			return "", fmt.Errorf("the run due %v ran %d times: %v", due, len(rs), rs)
		}
		parts = append(parts, fmt.Sprintf("%s by %s (term %d)", due.Format("15:04:05"), rs[0].by, rs[0].term))
	}
	sort.Strings(parts)
	for _, name := range []string{"sqlRenewRun", "sqlRunState", "sqlFinishRun"} {
		if !t.reached(name) {
			return "", fmt.Errorf("%s not sent", name)
		}
	}
	return strings.Join(parts, ", "), nil
}

// registered: a Scheduler given the job's name alone runs the schedule
// kept in the database (made here with le_schedule), and stops claiming
// once it is paused.
func (t *tour) registered(ctx context.Context, job string) (string, error) {
	c, err := t.own(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close(context.Background())
	// the extension's schema, found as the library finds it
	var named *string
	if s := os.Getenv("LEADERLOCK_SCHEMA"); s != "" {
		named = &s
	}
	var x string
	if err := c.QueryRow(ctx, stmttrace.Statements()["sqlFindSchema"], named).Scan(&x); err != nil {
		return "", fmt.Errorf("the extension's schema: %v", err)
	}
	call := func(fn string) error {
		var ok *bool
		err := c.QueryRow(ctx, "SELECT "+x+"."+fn, job).Scan(&ok)
		if err == nil && (ok == nil || !*ok) {
			err = errors.New("returned false")
		}
		if err != nil {
			return fmt.Errorf("%s: %v", strings.SplitN(fn, "(", 2)[0], err)
		}
		return nil
	}
	var when *time.Time
	if err := c.QueryRow(ctx, "SELECT "+x+".le_schedule(job => $1, every => pg_catalog.make_interval(secs => 1))",
		job).Scan(&when); err != nil || when == nil {
		return "", fmt.Errorf("le_schedule: %v, %v", when, err)
	}
	defer func() { _ = call("le_unschedule(job => $1)") }()
	var mu sync.Mutex
	var dues []time.Time
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- leaderlock.Schedule(sctx, leaderlock.ScheduleConfig{ConnString: t.dsn, Job: job,
			Identity: t.prefix + "-registered", TTL: 1500 * time.Millisecond, Poll: 100 * time.Millisecond, Logf: logf},
			func(ctx context.Context, r *leaderlock.ScheduledRun) error {
				mu.Lock()
				dues = append(dues, r.Due)
				mu.Unlock()
				return r.Check()
			})
	}()
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(dues)
	}
	ran := within(4*time.Second, func() bool { return count() >= 2 })
	if err := call("le_pause_schedule(job => $1)"); err != nil {
		return "", err
	}
	time.Sleep(300 * time.Millisecond)
	paused := count()
	time.Sleep(1200 * time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		return "", fmt.Errorf("Schedule: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !ran {
		return "", fmt.Errorf("%d runs in 4 s", len(dues))
	}
	if len(dues) != paused {
		return "", fmt.Errorf("%d runs while paused", len(dues)-paused)
	}
	seen := map[time.Time]bool{}
	var parts []string
	for _, due := range dues {
		if due.Nanosecond() != 0 || seen[due] {
			return "", fmt.Errorf("runs due %v", dues)
		}
		seen[due] = true
		parts = append(parts, due.Format("15:04:05"))
	}
	if !t.reached("sqlNextDue") {
		return "", errors.New("sqlNextDue not sent")
	}
	return fmt.Sprintf("runs due %s; none while paused", strings.Join(parts, ", ")), nil
}

// group: a owns the 4 partitions; b joins, and gets 2 once a's OnRevoked
// has returned (le_ack); b's guard in a transaction of the tour's; both
// leave.
func (t *tour) group(ctx context.Context, group string) (string, error) {
	join := func(name string, drained chan<- int32) (*leaderlock.Member, error) {
		return leaderlock.JoinGroup(ctx, t.dsn, leaderlock.GroupOptions{Group: group, Member: t.prefix + "-" + name,
			TTL: 1500 * time.Millisecond, Partitions: 4, Drain: 2 * time.Second, Logf: logf,
			OnRevoked: func(p int32) {
				if drained != nil {
					drained <- p
				}
			}})
	}
	drained := make(chan int32, 4)
	a, err := join("ga", drained)
	if err != nil {
		return "", fmt.Errorf("JoinGroup: %v", err)
	}
	defer a.Leave(context.Background())
	if n := len(a.Owned()); n != 4 {
		return "", fmt.Errorf("the first member owns %d partitions", n)
	}
	b, err := join("gb", nil)
	if err != nil {
		return "", fmt.Errorf("JoinGroup (b): %v", err)
	}
	defer b.Leave(context.Background())
	if !within(8*time.Second, func() bool { return len(a.Owned()) == 2 && len(b.Owned()) == 2 }) {
		return "", fmt.Errorf("a owns %v, b %v", a.Owned(), b.Owned())
	}
	if len(drained) != 2 || !t.reached("sqlAck") {
		return "", fmt.Errorf("%d partitions drained, le_ack sent: %v", len(drained), t.reached("sqlAck"))
	}
	var p int32
	var term int64
	for p, term = range b.Owned() {
		break
	}
	c, err := t.own(ctx)
	if err != nil {
		return "", err
	}
	defer c.Close(context.Background())
	tx, err := c.Begin(ctx)
	if err != nil {
		return "", err
	}
	if got, err := b.Guard(ctx, tx, p); err != nil || got != term {
		_ = tx.Rollback(ctx)
		return "", fmt.Errorf("Guard of partition %d: %d, %v", p, got, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return "", err
	}
	for _, m := range []*leaderlock.Member{a, b} {
		if err := m.Leave(ctx); err != nil {
			return "", fmt.Errorf("Leave: %v", err)
		}
	}
	return fmt.Sprintf("a owns 4, then 2; b 2 (partition %d in term %d, guarded); both left", p, term), nil
}

// history: the transitions of the tour's keys and job since the start,
// once each, in order; then, from the same position, one key's only.
func (t *tour) history(ctx context.Context, w *leaderlock.HistoryWatcher, since int64, key, job string) (string, error) {
	defer w.Close()
	want := map[string]bool{"acquired " + key: false, "released " + key: false,
		"run_claimed " + job: false, "run_finished " + job: false,
		"acquired " + t.prefix + "-s1": false, "released " + t.prefix + "-s1": false}
	missing := func() []string {
		var m []string
		for k, ok := range want {
			if !ok {
				m = append(m, k)
			}
		}
		sort.Strings(m)
		return m
	}
	last := since
	var first *leaderlock.Transition
	n := 0
	until := time.Now().Add(10 * time.Second)
	for len(missing()) > 0 {
		nctx, cancel := context.WithDeadline(ctx, until)
		tr, err := w.Next(nctx)
		cancel()
		if err != nil {
			return "", fmt.Errorf("Next after %d transitions: %v; not seen: %q", n, err, missing())
		}
		if tr.Position <= last || !strings.HasPrefix(tr.Key, t.prefix) {
			return "", fmt.Errorf("transition %v after position %d", tr, last)
		}
		last = tr.Position
		n++
		if _, ok := want[tr.Event+" "+tr.Key]; ok {
			want[tr.Event+" "+tr.Key] = true
		}
		if first == nil && tr.Key == key {
			c := tr
			first = &c
		}
	}
	if w.Position() < last {
		return "", fmt.Errorf("Position %d before the last transition delivered, %d", w.Position(), last)
	}
	w2, err := leaderlock.WatchHistory(ctx, t.dsn, leaderlock.HistoryOptions{Since: &since, Key: key, Logf: logf})
	if err != nil {
		return "", err
	}
	defer w2.Close()
	nctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tr, err := w2.Next(nctx)
	if err != nil || tr.Position != first.Position || tr.Event != first.Event || tr.Holder != first.Holder {
		return "", fmt.Errorf("from position %d for %q: %v, %v; first time %v", since, key, tr, err, first)
	}
	return fmt.Sprintf("%d transitions after %d, through %d; from %d again for one key: %v", n, since, w.Position(), since, tr), nil
}

// report prints the statements the tour did not send and why, and exits.
func (t *tour) report(took time.Duration) {
	all := stmttrace.Statements()
	names := make([]string, 0, len(all))
	for name := range all {
		names = append(names, name)
	}
	sort.Strings(names)
	sentN := 0
	unknown := false
	for _, name := range names {
		if t.reached(name) {
			sentN++
			continue
		}
		why, ok := unreachable[name]
		if !ok {
			why = "no reason known: the tour should have sent it"
			unknown = true
		}
		fmt.Printf("not sent: %s: %s\n", name, why)
	}
	fmt.Printf("%d of the library's %d statements sent, in %.1f s\n", sentN, len(all), took.Seconds())
	failed := t.failed
	if unknown {
		failed = append(failed, "statements not sent")
	}
	if len(failed) > 0 {
		fmt.Printf("FAILED: %s\n", strings.Join(failed, "; "))
		os.Exit(1)
	}
	fmt.Println("tour ok")
}
