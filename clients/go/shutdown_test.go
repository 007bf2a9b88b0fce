package leaderlock

// Shutdown: SIGTERM to the README's idiom (internal/candidate, which sets
// ReleaseOnCancel) releases the lease once its work loop has returned, and
// the follower leads within 100 ms of the release (server timestamps of the
// announcements). Without ReleaseOnCancel the lease is kept to its ttl,
// and OnStoppedLeading says why the tenure ended.

import (
	"context"
	"encoding/json"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

type announcement struct {
	Event, Key string
	Holder     *string
	Term       int64
	// At is on the server's lease clock, which a stall of the whole
	// server puts behind the wall clock: compare it only with another At.
	At       time.Time
	received time.Time // here, on this host's clock
}

// listen collects the announcements of key until the test ends.
func listen(t *testing.T, key string) <-chan announcement {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(context.Background(), "LISTEN leaderlock"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan announcement, 100)
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			n, err := c.WaitForNotification(ctx)
			if err != nil {
				return
			}
			a := announcement{received: time.Now()}
			if json.Unmarshal([]byte(n.Payload), &a) == nil && a.Key == key {
				out <- a
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-stopped; c.Close(context.Background()) })
	return out
}

func next(t *testing.T, ch <-chan announcement, event string, within time.Duration) announcement {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case a := <-ch:
			if a.Event == event {
				return a
			}
		case <-timeout:
			t.Fatalf("no %q announcement within %v", event, within)
		}
	}
}

func TestSigtermReleasesAndTheFollowerLeadsAtOnce(t *testing.T) {
	dsn(t)
	key := newKey("sigterm")
	ttl := 5 * time.Second // a take-over from expiry would take seconds
	records := filepath.Join(t.TempDir(), "records")
	events := listen(t, key)
	a := startCandidate(t, key, "a", ttl, records)
	eventually(t, 15*time.Second, func() bool { return lastTicker(t, records) == "a" })
	startCandidate(t, key, "b", ttl, records)
	eventually(t, 10*time.Second, func() bool { return leader(t, key) == "a" })
	time.Sleep(500 * time.Millisecond) // b is waiting
	next(t, events, "acquired", time.Second)

	sent := time.Now()
	a.signal(t, syscall.SIGTERM)
	released := next(t, events, "released", 5*time.Second)
	acquired := next(t, events, "acquired", 5*time.Second)
	select {
	case <-a.exited:
		if a.err != nil {
			t.Fatalf("a exited with %v after SIGTERM", a.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a did not exit after SIGTERM")
	}
	gap := acquired.At.Sub(released.At)
	var lastA time.Time
	for _, tk := range readTicks(t, records) {
		if tk.id == "a" {
			lastA = tk.at
		}
	}
	t.Logf("SIGTERM to the release heard %d ms; release to b's acquisition %.1f ms (server); a's last tick %.1f ms before the release was heard",
		released.received.Sub(sent).Milliseconds(), float64(gap.Microseconds())/1000, float64(released.received.Sub(lastA).Microseconds())/1000)
	if released.Holder == nil || *released.Holder != "a" || acquired.Holder == nil || *acquired.Holder != "b" {
		t.Fatalf("released by %v, acquired by %v", released.Holder, acquired.Holder)
	}
	if gap > 100*time.Millisecond {
		t.Fatalf("b led %v after a's release", gap)
	}
	if lastA.After(released.received) {
		t.Fatal("a ticked after it released")
	}
}

func TestWithoutReleaseOnCancelTheLeaseIsKeptToItsTTL(t *testing.T) {
	key := newKey("keep")
	ctx, cancel := context.WithCancel(context.Background())
	reasons := make(chan StopReason, 1)
	e, err := NewElector(Config{ConnString: dsn(t), Key: key, TTL: 3 * time.Second, Callbacks: LeaderCallbacks{
		OnStartedLeading: func(lctx context.Context, l Lease) { cancel(); <-lctx.Done() },
		OnStoppedLeading: func(r StopReason) { reasons <- r },
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-reasons; r != StopShutdown {
		t.Fatalf("reason %v", r)
	}
	if h := leader(t, key); h != e.cfg.Identity {
		t.Fatalf("the lease was not kept: leader %q", h)
	}
	query(t, "SELECT le_release($1, $2)", key, e.cfg.Identity)
}
