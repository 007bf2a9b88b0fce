package leaderlock

// Against a real server: LEADERLOCK_DSN names a database with leaderlock
// (either edition). The frozen-server test stops a backend with SIGSTOP:
// run on the server's host as root or as the server's user.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net/url"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func dsn(t *testing.T) string {
	d := os.Getenv("LEADERLOCK_DSN")
	if d == "" {
		t.Skip("LEADERLOCK_DSN is not set")
	}
	return d
}

func leader(t *testing.T, key string) string {
	c, err := pgx.Connect(context.Background(), dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var h *string
	if err := c.QueryRow(context.Background(), "SELECT le_leader($1)", key).Scan(&h); err != nil {
		t.Fatal(err)
	}
	if h == nil {
		return ""
	}
	return *h
}

type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) add(s string) { e.mu.Lock(); e.got = append(e.got, s); e.mu.Unlock() }
func (e *events) has(s string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, g := range e.got {
		if g == s {
			return true
		}
	}
	return false
}

func eventually(t *testing.T, within time.Duration, cond func() bool) {
	t.Helper()
	end := time.Now().Add(within)
	for time.Now().Before(end) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("not within %v", within)
}

func newKey(name string) string { return fmt.Sprintf("go-%s-%d", name, rand.Int63()) }

func TestTwoElectorsOneLeaderAndAHandoverOnCancel(t *testing.T) {
	key := newKey("handover")
	ev := map[string]*events{"a": {}, "b": {}}
	run := func(id string) context.CancelFunc {
		ctx, cancel := context.WithCancel(context.Background())
		e, err := NewElector(Config{ConnString: dsn(t), Key: key, Identity: id, TTL: 2 * time.Second, ReleaseOnCancel: true,
			Callbacks: LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context, l Lease) { ev[id].add("started"); <-ctx.Done() },
				OnStoppedLeading: func(r StopReason) { ev[id].add("stopped " + r.String()) },
				OnNewLeader:      func(h string) { ev[id].add("leader " + h) },
			}})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = e.Run(ctx); ev[id].add("returned") }()
		return cancel
	}
	stopA := run("a")
	eventually(t, 10*time.Second, func() bool { return ev["a"].has("started") })
	stopB := run("b")
	defer stopB()
	eventually(t, 10*time.Second, func() bool { return ev["b"].has("leader a") })
	time.Sleep(1500 * time.Millisecond) // past a's ttl: its renewals keep it
	if ev["b"].has("started") || leader(t, key) != "a" {
		t.Fatal("two leaders, or a lost its lease while renewing")
	}
	stopA()
	eventually(t, 3*time.Second, func() bool { return ev["a"].has("returned") && ev["b"].has("started") })
	if !ev["a"].has("stopped shutdown") || leader(t, key) != "b" {
		t.Fatalf("no handover: a %v, leader %q", ev["a"].got, leader(t, key))
	}
	stopB()
	eventually(t, 3*time.Second, func() bool { return ev["b"].has("returned") })
	if h := leader(t, key); h != "" {
		t.Fatalf("b did not release: %q", h)
	}
}

func TestRefusedRenewalsCancelTheLeaderAtTheLocalDeadline(t *testing.T) {
	key := newKey("refused")
	ttl := 1500 * time.Millisecond
	var lateBy time.Duration
	var reason StopReason
	stopped := make(chan struct{})
	e, err := NewElector(Config{ConnString: dsn(t), Key: key, TTL: ttl, Callbacks: LeaderCallbacks{
		OnStartedLeading: func(ctx context.Context, l Lease) {
			c, err := pgx.Connect(context.Background(), dsn(t))
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close(context.Background())
			tx, err := c.Begin(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			defer tx.Rollback(context.Background())
			// every renewal is refused while the lease still shows as ours
			if _, err := tx.Exec(context.Background(), "SELECT 1 FROM leaderlock WHERE key = $1 FOR UPDATE", key); err != nil {
				t.Error(err)
				return
			}
			blockedAt := time.Now()
			<-ctx.Done()
			lateBy = time.Since(blockedAt)
			if l.Valid() {
				t.Error("Valid() after the context was cancelled")
			}
		},
		OnStoppedLeading: func(r StopReason) { reason = r; close(stopped) },
	}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.Run(context.Background()) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the leader was never stopped")
	}
	if lateBy > ttl+250*time.Millisecond {
		t.Fatalf("stopped %v after the renewals were refused, past the ttl %v", lateBy, ttl)
	}
	// a locked row defers the renewals (the lease is still ours on the
	// server's clock): the tenure lasts to its deadline, not to the first
	if reason != StopDeadline || lateBy < ttl/2 {
		t.Fatalf("stopped %v after the row was locked, by %v", lateBy, reason)
	}
}

func TestAFrozenConnectionIsReplaced(t *testing.T) {
	key := newKey("frozen")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kept := make(chan bool, 1)
	e, err := NewElector(Config{ConnString: dsn(t), Key: key, TTL: 1500 * time.Millisecond, Callbacks: LeaderCallbacks{
		OnStartedLeading: func(ctx context.Context, l Lease) {
			c, err := pgx.Connect(context.Background(), dsn(t))
			if err != nil {
				kept <- false
				return
			}
			var pid int
			err = c.QueryRow(context.Background(), "SELECT pid FROM pg_stat_activity WHERE application_name = 'leaderlock go' "+
				"ORDER BY backend_start DESC LIMIT 1").Scan(&pid)
			c.Close(context.Background())
			if err != nil {
				kept <- false
				return
			}
			_ = syscall.Kill(pid, syscall.SIGSTOP)
			defer syscall.Kill(pid, syscall.SIGCONT)
			time.Sleep(3 * time.Second)
			kept <- ctx.Err() == nil && l.Valid()
		}}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.Run(ctx) }()
	select {
	case ok := <-kept:
		if !ok {
			t.Fatal("the lease was lost: the stuck renewal was not retried on a new connection")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("never led")
	}
}

func TestTheValueIsAnnouncedWithTheLeadership(t *testing.T) {
	key := newKey("value")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got := make(chan string, 1)
	e, err := NewElector(Config{ConnString: dsn(t), Key: key, TTL: 5 * time.Second,
		Value: map[string]string{"at": "host-1:8080"},
		Callbacks: LeaderCallbacks{OnStartedLeading: func(ctx context.Context, l Lease) {
			c, err := pgx.Connect(context.Background(), dsn(t))
			if err != nil {
				got <- err.Error()
				return
			}
			defer c.Close(context.Background())
			var at string
			if err := c.QueryRow(context.Background(), "SELECT value->>'at' FROM le_lease($1)", key).Scan(&at); err != nil {
				at = err.Error()
			}
			got <- at
			<-ctx.Done()
		}}})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.Run(ctx) }()
	select {
	case at := <-got:
		if at != "host-1:8080" {
			t.Fatalf("value: %q", at)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("never led")
	}
}

func TestBadConfig(t *testing.T) {
	if _, err := NewElector(Config{}); err == nil {
		t.Fatal("an empty key was accepted")
	}
	if _, err := NewElector(Config{Key: "k", TTL: -time.Second}); !errors.Is(err, ErrBadArgument) || !errors.Is(err, ErrRejected) {
		t.Fatalf("a negative ttl: %v", err)
	}
	if _, err := NewElector(Config{Key: "k", ConnString: "postgres://x:bad-port/"}); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("a malformed connection string: %v", err)
	}
}

// leadFreezeAndCampaignAgain runs an elector for identity me on key that
// leads, stops its own backend (SIGSTOP: whatever it sends next, the
// release on its way out, hangs), runs then() and ends; then starts a
// second one under the same identity. It returns the first tenure's term,
// the channel the second's terms come on, and the stopped backend's pid
// (resumed at the test's end).
func leadFreezeAndCampaignAgain(t *testing.T, key, me string, ttl time.Duration, then func()) (int64, <-chan int64, int) {
	terms := make(chan int64, 2)
	var pid int
	cfg := func(cancel context.CancelFunc, freeze bool) Config {
		return Config{ConnString: dsn(t), Key: key, Identity: me, TTL: ttl, ReleaseOnCancel: true,
			Callbacks: LeaderCallbacks{OnStartedLeading: func(lctx context.Context, l Lease) {
				terms <- l.Term
				if !freeze {
					<-lctx.Done()
					return
				}
				c, err := pgx.Connect(context.Background(), dsn(t))
				if err == nil {
					err = c.QueryRow(context.Background(), "SELECT pid FROM pg_stat_activity WHERE application_name = 'leaderlock go' "+
						"ORDER BY backend_start DESC LIMIT 1").Scan(&pid)
					c.Close(context.Background())
				}
				if err == nil {
					_ = syscall.Kill(pid, syscall.SIGSTOP)
				}
				then()
				cancel()
			}}}
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := Run(ctx, cfg(cancel, true)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	old := <-terms
	ctx2, cancel2 := context.WithCancel(context.Background())
	t.Cleanup(cancel2)
	go func() { _ = Run(ctx2, cfg(cancel2, false)) }()
	return old, terms, pid
}

// The release hangs (its backend stopped) and is given up on: it may still
// arrive. The next campaign under the same identity sends it again first,
// so it takes a new term instead of extending the old one; the late
// release, served at last, names the old term and ends nothing.
func TestAReleaseThatHeardNoAnswerIsSentAgainBeforeTheNextCampaign(t *testing.T) {
	key, me := newKey("unanswered"), newKey("me")
	old, terms, pid := leadFreezeAndCampaignAgain(t, key, me, 1500*time.Millisecond, func() {})
	var again int64
	select {
	case again = <-terms:
	case <-time.After(10 * time.Second):
		t.Fatal("never led again")
	}
	if again <= old {
		t.Fatalf("led again in term %d after %d: the old tenure was extended", again, old)
	}
	_ = syscall.Kill(pid, syscall.SIGCONT)
	c, err := pgx.Connect(context.Background(), dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	eventually(t, 10*time.Second, func() bool {
		var n int
		err := c.QueryRow(context.Background(), "SELECT count(*) FROM pg_stat_activity WHERE pid = $1 "+
			"AND NOT (state = 'idle' AND strpos(query, 'le_release') > 0)", pid).Scan(&n)
		return err == nil && n == 0
	})
	if h := leader(t, key); h != me {
		t.Fatalf("after the late release the leader is %q, not %q", h, me)
	}
}

// A guarded transaction of the old tenure still open: the release sent
// again is answered false while the tenure is live; the campaign waits, and
// leads in a new term once the lock is gone, never in the old one.
func TestAReleaseSentAgainThatMeetsItsRowLockedHoldsTheCampaignBack(t *testing.T) {
	key, me := newKey("locked"), newKey("me")
	blocker, err := pgx.Connect(context.Background(), dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close(context.Background())
	old, terms, _ := leadFreezeAndCampaignAgain(t, key, me, 6*time.Second, func() { // still live when the lock goes
		if _, err := blocker.Exec(context.Background(), "BEGIN"); err == nil { // share-locks the row:
			_, _ = blocker.Exec(context.Background(), "SELECT le_assert_leader($1, $2)", key, me)
		}
	})
	select {
	case term := <-terms:
		t.Fatalf("led in term %d while the old tenure's row was locked", term)
	case <-time.After(time.Second):
	}
	if _, err := blocker.Exec(context.Background(), "COMMIT"); err != nil {
		t.Fatal(err)
	}
	select {
	case again := <-terms:
		if again <= old {
			t.Fatalf("led again in term %d after %d: the old tenure was extended", again, old)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("never led again")
	}
}

// On the schema 0.4.0 (the library updated, ALTER EXTENSION not yet run),
// le_renew and le_release have no term: the elector leads, renews and
// releases without it.
func TestOnTheSchemaBeforeTermsItLeadsRenewsAndReleases(t *testing.T) {
	const db = "ll_go_old_schema"
	admin, err := pgx.Connect(context.Background(), dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	if _, err := admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(context.Background(), "CREATE DATABASE "+db); err != nil {
		t.Fatal(err)
	}
	defer admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
	cc, err := pgx.ParseConfig(dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	cc.Database = db
	c, err := pgx.ConnectConfig(context.Background(), cc)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(context.Background(), "CREATE EXTENSION leaderlock VERSION '0.4.0'"); err != nil {
		t.Skipf("no compiled edition 0.4.0 here: %v", err)
	}
	key := newKey("old")
	ctx, cancel := context.WithCancel(context.Background())
	kept := make(chan bool, 1)
	oldDSN := dsn(t) + " dbname=" + db
	if u, err := url.Parse(dsn(t)); err == nil && u.Scheme != "" {
		u.Path = "/" + db
		oldDSN = u.String()
	}
	cfg := Config{ConnString: oldDSN, Key: key, TTL: time.Second, ReleaseOnCancel: true,
		Callbacks: LeaderCallbacks{OnStartedLeading: func(lctx context.Context, l Lease) {
			time.Sleep(2500 * time.Millisecond) // renewals every ttl/3
			kept <- lctx.Err() == nil && l.Valid()
			cancel()
		}}}
	if err := Run(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if !<-kept {
		t.Fatal("the lease was lost: renewals failed on the old schema")
	}
	var h *string
	if err := c.QueryRow(context.Background(), "SELECT le_leader($1)", key).Scan(&h); err != nil || h != nil {
		t.Fatalf("not released: %v %v", h, err)
	}
}
