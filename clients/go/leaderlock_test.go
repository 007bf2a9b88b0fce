package leaderlock

// Against a real server: LEADERLOCK_DSN names a database with leaderlock
// (either edition). The frozen-server test stops a backend with SIGSTOP:
// run on the server's host as root or as the server's user.

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v4"
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
		e, err := NewElector(Config{ConnString: dsn(t), Key: key, Identity: id, TTL: 2 * time.Second,
			Callbacks: LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context, l Lease) { ev[id].add("started"); <-ctx.Done() },
				OnStoppedLeading: func() { ev[id].add("stopped") },
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
	if !ev["a"].has("stopped") || leader(t, key) != "b" {
		t.Fatalf("no handover: a %v, leader %q", ev["a"].got, leader(t, key))
	}
	stopB()
	eventually(t, 3*time.Second, func() bool { return ev["b"].has("returned") })
	if h := leader(t, key); h != "" {
		t.Fatalf("b did not release: %q", h)
	}
}

func TestAFrozenRenewalCancelsTheLeaderAtTheLocalDeadline(t *testing.T) {
	key := newKey("frozen")
	ttl := 1500 * time.Millisecond
	var lateBy time.Duration
	stopped := make(chan struct{})
	e, err := NewElector(Config{ConnString: dsn(t), Key: key, TTL: ttl, Callbacks: LeaderCallbacks{
		OnStartedLeading: func(ctx context.Context, l Lease) {
			c, err := pgx.Connect(context.Background(), dsn(t))
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close(context.Background())
			var pid int
			// the elector's renewing backend: its connections are named
			err = c.QueryRow(context.Background(),
				"SELECT pid FROM pg_stat_activity WHERE application_name = 'leaderlock go' "+
					"ORDER BY backend_start DESC LIMIT 1").Scan(&pid)
			if err != nil {
				t.Error(err)
				return
			}
			startedAt := time.Now()
			_ = syscall.Kill(pid, syscall.SIGSTOP)
			defer syscall.Kill(pid, syscall.SIGCONT)
			<-ctx.Done()
			// renewals stop at once, so the lease ends within ttl of the last renewal
			lateBy = time.Since(startedAt)
		},
		OnStoppedLeading: func() { close(stopped) },
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
		t.Fatalf("stopped %v after the renewals froze, past the ttl %v", lateBy, ttl)
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
	if _, err := NewElector(Config{Key: "k", TTL: -time.Second}); err == nil {
		t.Fatal("a negative ttl was accepted")
	}
}
