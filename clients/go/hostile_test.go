package leaderlock

// Against other roles' doings (LEADERLOCK_DSN, whose role is a superuser:
// it makes a role of no rights, and the followers count their calls with
// track_functions = all):
//   - a flood of forged `released` notifications from a role with no
//     rights: a waiting candidate's tries stay bounded (one per hintFloor
//     at most, docs/clients.md), and a real release is still taken over at
//     once;
//   - a rival holding the key with another number of slots: the candidate
//     waits and leads once the rival is gone.

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	mallory      = "ll_go_mallory"
	floodSeconds = 2 * time.Second
	maxRate      = 120.0            // tries per second; the rule allows one per 10 ms plus a round trip
	floodTTL     = 20 * time.Second // polling every ttl/2 = 10 s: a take-over within seconds is a hint's doing
)

// with returns dsn (a URL or key=value string) with one more parameter.
func with(t *testing.T, dsn, name, value string) string {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set(name, value)
		// a space as %20: pgx v5 reads a URL's query as libpq does, where
		// "+" is a plus sign
		u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20")
		return u.String()
	}
	return dsn + " " + name + "='" + strings.ReplaceAll(value, "'", `\'`) + "'"
}

func query(t *testing.T, sql string, args ...interface{}) interface{} {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var v interface{}
	if err := c.QueryRow(context.Background(), sql, args...).Scan(&v); err != nil && err != pgx.ErrNoRows {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

// tries is le_try_acquire's count of calls from the sessions that track
// them (only the followers under test do).
func tries(t *testing.T) int64 {
	return query(t, "SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_user_functions WHERE funcname = 'le_try_acquire'").(int64)
}

// counted returns a function that gives the tries of the followers whose
// sessions start from now on, once their backends are gone (their counts
// reach the shared statistics when they exit at the latest).
func counted(t *testing.T) func() int64 {
	since := query(t, "SELECT clock_timestamp()").(time.Time)
	start := tries(t)
	return func() int64 {
		eventually(t, 15*time.Second, func() bool {
			return query(t, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'leaderlock go' AND backend_start >= $1", since).(int64) == 0
		})
		last, steady := tries(t), time.Now()
		for time.Since(steady) < 500*time.Millisecond {
			time.Sleep(100 * time.Millisecond)
			if now := tries(t); now != last {
				last, steady = now, time.Now()
			}
		}
		return last - start
	}
}

// flood sends forged releases of key from the role of no rights, as fast
// as one session does, for d; it returns how many, and over how long.
func flood(t *testing.T, key string, d time.Duration) (int, time.Duration) {
	cfg, err := pgx.ParseConfig(dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = mallory, ""
	c, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	t0 := time.Now()
	sent := 0
	for time.Since(t0) < d {
		sent++
		payload, _ := json.Marshal(map[string]interface{}{"event": "released", "key": key, "holder": "mallory", "term": sent, "at": "2026-01-01T00:00:00.000000Z"})
		if _, err := c.Exec(context.Background(), "SELECT pg_notify('leaderlock', $1)", string(payload)); err != nil {
			t.Fatal(err)
		}
	}
	return sent, time.Since(t0)
}

func superuserAndMallory(t *testing.T) {
	if su, _ := query(t, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").(bool); !su {
		t.Skip("LEADERLOCK_DSN's role is not a superuser")
	}
	if query(t, "SELECT 1 FROM pg_roles WHERE rolname = $1", mallory) == nil {
		query(t, "CREATE ROLE "+mallory+" LOGIN")
	}
}

func TestAFloodOfForgedReleasesMakesTriesAtABoundedRate(t *testing.T) {
	superuserAndMallory(t)
	key := newKey("flood")
	if !query(t, "SELECT le_try_acquire($1, 'rival', '60 seconds')", key).(bool) {
		t.Fatal("the rival did not get the key")
	}
	defer query(t, "SELECT le_release($1, 'rival')", key)
	count := counted(t)
	var ledAt atomic.Value
	e, err := NewElector(Config{
		ConnString: with(t, dsn(t), "options", "-c track_functions=all"), Key: key, TTL: floodTTL,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e.cfg.Callbacks.OnStartedLeading = func(context.Context, Lease) { ledAt.Store(time.Now()); cancel() }
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	time.Sleep(time.Second) // the follower is waiting, LISTENing
	sent, flooded := flood(t, key, floodSeconds)
	released := time.Now()
	query(t, "SELECT le_release($1, 'rival')", key)
	eventually(t, 5*time.Second, func() bool { return ledAt.Load() != nil })
	took := ledAt.Load().(time.Time).Sub(released)
	<-done
	n := count()
	seconds := (flooded + took).Seconds()
	t.Logf("%d forged releases in %.1f s; %d tries, %.0f/s; led %d ms after the release",
		sent, flooded.Seconds(), n, float64(n)/seconds, took.Milliseconds())
	if n <= 10 {
		t.Errorf("the hints brought no try forward (%d tries)", n)
	}
	if float64(n)/seconds > maxRate {
		t.Errorf("%d tries in %.1f s: more than %v a second", n, seconds, maxRate)
	}
}

func TestWaitsForARivalWithOtherSlotsThenLeads(t *testing.T) {
	key := newKey("slots")
	if !query(t, "SELECT le_try_acquire($1, 'squatter', '30 seconds', slots => 3)", key).(bool) {
		t.Fatal("the squatter did not get the key")
	}
	ends := time.Now().Add(time.Second)
	squat := time.AfterFunc(time.Second, func() { query(t, "SELECT le_release($1, 'squatter')", key) })
	defer func() { squat.Stop(); query(t, "SELECT le_release($1, 'squatter')", key) }()
	var ledAt atomic.Value
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	logs := &logLines{}
	e, err := NewElector(Config{ConnString: dsn(t), Key: key, TTL: 5 * time.Second, Logf: logs.logf, Callbacks: LeaderCallbacks{
		OnStartedLeading: func(context.Context, Lease) { ledAt.Store(time.Now()); cancel() },
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	at, ok := ledAt.Load().(time.Time)
	if !ok {
		t.Fatal("never led")
	}
	if at.Before(ends) {
		t.Fatal("led while the rival held the key")
	}
	if n := logs.count("another number of slots"); n != 1 {
		t.Fatalf("%d warnings of the slots (once per run of such tries): %q", n, logs.lines)
	}
}
