package leaderlock

// Refusals for good end Run with a typed error at once, without a retry:
// a database without the extension (ErrNotInstalled, naming it), a role
// without EXECUTE (ErrPrivilege; also while leading: the tenure ends with
// StopFailed), a ttl the server refuses (ErrBadArgument). LEADERLOCK_DSN's
// role must be a superuser: the test makes a database and a role.

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logf(format string, args ...interface{}) {
	l.mu.Lock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *logLines) count(part string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, s := range l.lines {
		if strings.Contains(s, part) {
			n++
		}
	}
	return n
}

// runBriefly runs an elector for cfg and returns Run's error, failing the
// test if Run has not returned within 5 s (it would be retrying).
func runBriefly(t *testing.T, cfg Config) (error, *logLines) {
	t.Helper()
	logs := &logLines{}
	cfg.Logf = logs.logf
	e, err := NewElector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- e.Run(ctx) }()
	select {
	case err := <-done:
		t.Logf("Run returned in %d ms: %v", time.Since(start).Milliseconds(), err)
		if n := logs.count("trying again"); n != 0 {
			t.Errorf("%d retries of a refusal for good", n)
		}
		return err, logs
	case <-time.After(5 * time.Second):
		cancel()
		<-done
		t.Fatalf("Run did not return within 5 s (retrying a refusal for good?); its log: %q", logs.lines)
		return nil, nil
	}
}

// withDatabase returns dsn naming database db instead, and user if not "".
func withDatabase(t *testing.T, db, user string) string {
	cfg, err := pgx.ParseConfig(dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	if user == "" {
		user = cfg.User
	}
	return fmt.Sprintf("host=%s port=%d dbname=%s user=%s", cfg.Host, cfg.Port, db, user)
}

func execIn(t *testing.T, dsn string, sqls ...string) {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	for _, sql := range sqls {
		if _, err := c.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

func TestRefusalsForGoodEndRunWithTypedErrors(t *testing.T) {
	if su, _ := query(t, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").(bool); !su {
		t.Skip("LEADERLOCK_DSN's role is not a superuser")
	}
	db := fmt.Sprintf("ll_go_errors_%d", rand.Int63())
	const role = "ll_go_noexec"
	execIn(t, dsn(t), "CREATE DATABASE "+db)
	defer query(t, "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)")
	if query(t, "SELECT 1 FROM pg_roles WHERE rolname = $1", role) == nil {
		query(t, "CREATE ROLE "+role+" LOGIN")
	}
	var pe *pgconn.PgError
	var typed *Error

	t.Run("no extension", func(t *testing.T) {
		err, _ := runBriefly(t, Config{ConnString: withDatabase(t, db, ""), Key: "k", TTL: 2 * time.Second})
		if !errors.Is(err, ErrNotInstalled) || !errors.Is(err, ErrRejected) || !errors.As(err, &typed) ||
			!strings.Contains(err.Error(), fmt.Sprintf("is not installed in database %q", db)) {
			t.Fatalf("got %v", err)
		}
		if typed.SQLState != "42883" {
			t.Fatalf("SQLSTATE %s", typed.SQLState)
		}
	})

	// The portable edition's functions in two schemas (stand-ins: a
	// le_capabilities() in each): which to use is the user's to say.
	execIn(t, withDatabase(t, db, ""), "CREATE SCHEMA ll_one", "CREATE SCHEMA \"ll Two\"",
		"CREATE FUNCTION ll_one.le_capabilities() RETURNS jsonb LANGUAGE sql AS $$SELECT '{}'::jsonb$$",
		"CREATE FUNCTION \"ll Two\".le_capabilities() RETURNS jsonb LANGUAGE sql AS $$SELECT '{}'::jsonb$$")
	t.Run("several schemas", func(t *testing.T) {
		t.Setenv("LEADERLOCK_SCHEMA", "")
		err, _ := runBriefly(t, Config{ConnString: withDatabase(t, db, ""), Key: "k", TTL: 2 * time.Second})
		if !errors.Is(err, ErrBadArgument) || !errors.Is(err, ErrRejected) ||
			!strings.Contains(err.Error(), `in several schemas of database "`+db+`": "\"ll Two\"", "ll_one"; `) ||
			!strings.Contains(err.Error(), "LEADERLOCK_SCHEMA") {
			t.Fatalf("got %v", err)
		}
		// named (the schema's name, not quoted): that one, whose functions
		// other than le_capabilities() are missing
		_, err = OpenSession(context.Background(), withDatabase(t, db, ""), SessionConfig{TTL: time.Second, Schema: "ll Two"})
		if !errors.Is(err, ErrNotInstalled) || !errors.As(err, &pe) || pe.Code != "42883" ||
			!strings.Contains(pe.Message, "ll Two.le_open_session") {
			t.Fatalf("got %v", err)
		}
		t.Setenv("LEADERLOCK_SCHEMA", "ll_one")
		_, err = OpenSession(context.Background(), withDatabase(t, db, ""), SessionConfig{TTL: time.Second})
		if !errors.Is(err, ErrNotInstalled) || !errors.As(err, &pe) || !strings.Contains(pe.Message, "ll_one.le_open_session") {
			t.Fatalf("got %v", err)
		}
	})
	execIn(t, withDatabase(t, db, ""), "DROP SCHEMA ll_one CASCADE", "DROP SCHEMA \"ll Two\" CASCADE")

	execIn(t, withDatabase(t, db, ""), "CREATE EXTENSION leaderlock",
		"REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public FROM PUBLIC")
	t.Run("no EXECUTE", func(t *testing.T) {
		err, _ := runBriefly(t, Config{ConnString: withDatabase(t, db, role), Key: "k", TTL: 2 * time.Second})
		if !errors.Is(err, ErrPrivilege) || !errors.Is(err, ErrRejected) || !errors.As(err, &pe) || pe.Code != "42501" {
			t.Fatalf("got %v", err)
		}
	})

	t.Run("EXECUTE revoked while leading", func(t *testing.T) {
		execIn(t, withDatabase(t, db, ""), "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA public TO "+role)
		reason := make(chan StopReason, 1)
		err, logs := runBriefly(t, Config{ConnString: withDatabase(t, db, role), Key: "k", TTL: 1500 * time.Millisecond,
			Callbacks: LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context, l Lease) {
					execIn(t, withDatabase(t, db, ""), "REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA public FROM "+role)
					<-ctx.Done()
				},
				OnStoppedLeading: func(r StopReason) { reason <- r },
			}})
		if !errors.Is(err, ErrPrivilege) || logs.count("leading in term") != 1 {
			t.Fatalf("got %v; log %q", err, logs.lines)
		}
		if r := <-reason; r != StopFailed {
			t.Fatalf("reason %v", r)
		}
	})

	t.Run("a schema that does not hold it", func(t *testing.T) {
		err, _ := runBriefly(t, Config{ConnString: withDatabase(t, db, ""), Key: "k", TTL: 2 * time.Second, Schema: "pg_catalog"})
		if !errors.Is(err, ErrNotInstalled) || !errors.As(err, &typed) || typed.SQLState != "42883" ||
			!strings.Contains(err.Error(), fmt.Sprintf(`schema "pg_catalog" of database %q does not hold leaderlock`, db)) {
			t.Fatalf("got %v", err)
		}
		_, err = WatchHistory(context.Background(), withDatabase(t, db, ""), HistoryOptions{Schema: "nowhere"})
		if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), `schema "nowhere"`) {
			t.Fatalf("got %v", err)
		}
	})

	t.Run("a ttl above leaderlock.max_ttl", func(t *testing.T) {
		err, _ := runBriefly(t, Config{ConnString: dsn(t), Key: newKey("ttl"), TTL: 48 * time.Hour})
		if !errors.Is(err, ErrBadArgument) || !errors.As(err, &pe) || pe.Code != "22023" {
			t.Fatalf("got %v", err)
		}
	})

	t.Run("RunOrDie panics with it", func(t *testing.T) {
		defer func() {
			if err, _ := recover().(error); !errors.Is(err, ErrBadArgument) {
				t.Fatalf("recovered %v", err)
			}
		}()
		RunOrDie(context.Background(), Config{ConnString: dsn(t), Key: newKey("ttl"), TTL: 48 * time.Hour})
	})
}
