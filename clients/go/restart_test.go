package leaderlock

// Waiting survives the connection: a follower whose session is terminated,
// or whose server restarts, reconnects (jittered backoff, logged) and
// leads once the key is released. The restart needs the server's data
// directory and binaries, on this host: LEADERLOCK_PGDATA (its server.log
// there, or LEADERLOCK_PGLOG) and PG_BIN; as root, pg_ctl runs as postgres.

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// follow starts an elector for key that waits behind 'rival', and returns
// when it has seen the rival lead; led is set when it leads.
func follow(t *testing.T, key, appName string) (led *atomic.Value, logs *logLines) {
	t.Helper()
	if !query(t, "SELECT le_try_acquire($1, 'rival', '60 seconds')", key).(bool) {
		t.Fatal("the rival did not get the key")
	}
	t.Cleanup(func() { query(t, "SELECT le_release($1, 'rival')", key) })
	led, logs = &atomic.Value{}, &logLines{}
	var sawRival atomic.Bool
	ctx, cancel := context.WithCancel(context.Background())
	e, err := NewElector(Config{ConnString: with(t, dsn(t), "application_name", appName), Key: key,
		TTL: 2 * time.Second, ReleaseOnCancel: true, Logf: logs.logf,
		Callbacks: LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context, l Lease) { led.Store(time.Now()); <-ctx.Done() },
			OnNewLeader: func(id string) {
				if id == "rival" {
					sawRival.Store(true)
				}
			},
		}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		t.Logf("the follower's log: %q", logs.lines)
	})
	eventually(t, 10*time.Second, func() bool { return sawRival.Load() })
	return led, logs
}

// releaseAndLead releases the rival's lease and returns how long the
// follower took to lead.
func releaseAndLead(t *testing.T, key string, led *atomic.Value) time.Duration {
	t.Helper()
	released := time.Now()
	query(t, "SELECT le_release($1, 'rival')", key)
	eventually(t, 5*time.Second, func() bool { return led.Load() != nil })
	return led.Load().(time.Time).Sub(released)
}

func sessions(t *testing.T, appName string) int64 {
	return query(t, "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", appName).(int64)
}

func TestAFollowerWhoseSessionIsTerminatedReconnectsAndLeads(t *testing.T) {
	if su, _ := query(t, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").(bool); !su {
		t.Skip("LEADERLOCK_DSN's role is not a superuser (pg_terminate_backend)")
	}
	key, appName := newKey("dropped"), newKey("app")
	led, logs := follow(t, key, appName)
	query(t, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", appName)
	eventually(t, 10*time.Second, func() bool { return logs.count("trying again") > 0 && sessions(t, appName) == 1 })
	took := releaseAndLead(t, key, led)
	t.Logf("led %d ms after the release", took.Milliseconds())
	if took > time.Second {
		t.Fatalf("led %v after the release: the reconnected follower is not listening", took)
	}
}

func TestAFollowerWaitsThroughAServerRestartAndLeads(t *testing.T) {
	pgdata, pgbin := os.Getenv("LEADERLOCK_PGDATA"), os.Getenv("PG_BIN")
	if pgdata == "" || pgbin == "" {
		t.Skip("LEADERLOCK_PGDATA and PG_BIN are not set")
	}
	pglog := os.Getenv("LEADERLOCK_PGLOG")
	if pglog == "" {
		pglog = filepath.Join(pgdata, "server.log")
	}
	key, appName := newKey("restart"), newKey("app")
	led, logs := follow(t, key, appName)
	pgctl := func(args ...string) {
		cmd := append([]string{filepath.Join(pgbin, "pg_ctl"), "-D", pgdata, "-l", pglog, "-w", "-t", "60"}, args...)
		if os.Geteuid() == 0 {
			cmd = append([]string{"sudo", "-u", "postgres", "-H", "--", "env",
				"LD_LIBRARY_PATH=" + filepath.Join(filepath.Dir(pgbin), "lib")}, cmd...)
		}
		if out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v\n%s", cmd, err, out)
		}
	}
	// down for a while: the follower's tries meet a refused connection
	restarted := time.Now()
	pgctl("-m", "fast", "stop")
	time.Sleep(1500 * time.Millisecond)
	pgctl("start")
	t.Logf("the server was down for %d ms", time.Since(restarted).Milliseconds())
	eventually(t, 15*time.Second, func() bool { return sessions(t, appName) == 1 })
	t.Logf("the follower is back %d ms after the restart began, after %d tries",
		time.Since(restarted).Milliseconds(), logs.count("trying again"))
	if n := logs.count("trying again"); n < 2 || n > 12 {
		t.Fatalf("%d tries while the server was down: not a bounded backoff", n)
	}
	if leader(t, key) != "rival" {
		t.Fatal("the rival's lease did not outlive the restart")
	}
	took := releaseAndLead(t, key, led)
	t.Logf("led %d ms after the release", took.Milliseconds())
	if took > time.Second {
		t.Fatalf("led %v after the release: the reconnected follower is not listening", took)
	}
}
