// Package leaderlock is leader election on PostgreSQL with the leaderlock
// extension (compiled or portable edition), shaped like client-go's
// leaderelection: an Elector whose callbacks mirror LeaderCallbacks, so
// that code written for a Kubernetes Lease moves over with few changes.
//
// The guarantees are the Rust client's: renew every ttl/3, a local
// deadline on the monotonic clock (start of the last successful call +
// ttl - ttl/200) that cancels OnStartedLeading's context whatever a
// renewal call is doing, every call bounded by that deadline, LISTEN as a
// hint with polling as the fallback, release on the way out, identity
// host:pid:random.
package leaderlock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
)

// One round trip each, bind parameters, arguments by name.
const (
	sqlTryAcquire   = "SELECT le_try_acquire(key => $1, id => $2, ttl => make_interval(secs => $3))"
	sqlRenew        = "SELECT le_renew(key => $1, id => $2, ttl => make_interval(secs => $3))"
	sqlRelease      = "SELECT le_release(key => $1, id => $2)"
	sqlTermOf       = "SELECT term FROM le_lease(key => $1) WHERE holder = $2"
	sqlStillOurs    = "SELECT coalesce(holder = $1 AND term = $2 AND expires_at > clock_timestamp(), false) FROM le_lease(key => $3)"
	sqlLeader       = "SELECT le_leader(key => $1)"
	sqlWorkerServes = "SELECT coalesce((le_capabilities()->>'worker')::boolean, true)"
	sqlWorkerRuns   = "SELECT le_worker_running()"
	sqlExpire       = "SELECT le_expire_lapsed()"
	undefinedFunc   = "42883"
	// SQLSTATE 22023 with this DETAIL (both editions): the key's live
	// holders hold it with another number of slots than asked (contract
	// 17). The key is not ours now, not a request to give up.
	slotsDifferDetail = "While a key has live holders, every acquisition must give the same slots."
)

// hintFloor: notifications are hints, and any role may send them
// (docs/clients.md). A hint brings the next try forward, but never to less
// than hintFloor after the start of the previous one; hints that arrive
// meanwhile make that one try, and the first hint after a quiet period is
// acted on at once. The same rule in every leaderlock client (HINT_FLOOR
// in the others).
const hintFloor = 10 * time.Millisecond

// LeaderCallbacks mirrors client-go's leaderelection.LeaderCallbacks.
type LeaderCallbacks struct {
	// OnStartedLeading runs in its own goroutine when this process leads.
	// Its context is cancelled at a loss, at the local deadline, and when
	// Run's context is done: stop acting as leader then.
	OnStartedLeading func(ctx context.Context, lease Lease)
	// OnStoppedLeading is called when a tenure ends (after
	// OnStartedLeading's context was cancelled).
	OnStoppedLeading func()
	// OnNewLeader is called when the observed leader changes ("" : vacant).
	OnNewLeader func(identity string)
}

// Config of an Elector.
type Config struct {
	ConnString string // libpq-style DSN or URL (pgx)
	Key        string
	Identity   string        // default host:pid:random
	TTL        time.Duration // default 10 s
	Poll       time.Duration // between tries without a notification; default 1 s, ttl/2 with a worker, ttl/4 without
	// Value, when not nil, is announced with the leadership (le_proclaim,
	// as JSON), e.g. this leader's address.
	Value     interface{}
	Callbacks LeaderCallbacks
}

// Lease is the leadership OnStartedLeading holds.
type Lease struct {
	Key, Identity string
	// Term is the fencing token: pass it to le_assert_leader(key, id, term)
	// in the transaction of each write the leader makes.
	Term int64
	// Value is Config.Value, announced with this leadership.
	Value interface{}
	// Valid reports whether the lease is still ours by the local clock:
	// check it before each step. (The context is cancelled at the deadline
	// too, by a timer; after a pause of the whole process that timer may run
	// after other code has woken, Valid never does.)
	Valid func() bool
}

// Elector campaigns for Config.Key.
type Elector struct {
	cfg    Config
	ttl    time.Duration
	margin time.Duration
	mu     sync.Mutex
	seen   *string
}

// DefaultIdentity is host:pid:random.
func DefaultIdentity() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), randomHex(4))
}

// NewElector checks the configuration.
func NewElector(cfg Config) (*Elector, error) {
	if cfg.Key == "" {
		return nil, errors.New("leaderlock: Key must not be empty")
	}
	if cfg.TTL == 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.TTL < 0 || cfg.Poll < 0 {
		return nil, errors.New("leaderlock: TTL and Poll must be positive")
	}
	if cfg.Identity == "" {
		cfg.Identity = DefaultIdentity()
	}
	return &Elector{cfg: cfg, ttl: cfg.TTL, margin: cfg.TTL / 200}, nil
}

// connect names its connections "leaderlock go" unless the DSN names them.
func (e *Elector) connect(ctx context.Context) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(e.cfg.ConnString)
	if err != nil {
		return nil, err
	}
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "leaderlock go"
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// clamp keeps d within [lo, hi].
func clamp(d, lo, hi time.Duration) time.Duration {
	if d < lo {
		return lo
	}
	if d > hi {
		return hi
	}
	return d
}

// randomHex is n random bytes as hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (e *Elector) callTimeout() time.Duration {
	if d := e.ttl / 3; d > 100*time.Millisecond {
		return d
	}
	return 100 * time.Millisecond
}

func (e *Elector) retryEvery() time.Duration {
	return clamp(e.ttl/10, 50*time.Millisecond, time.Second)
}

// probe reports whether a notification this session sends itself comes
// back (not behind transaction pooling).
func (e *Elector) probe(ctx context.Context, conn *pgx.Conn) bool {
	token := randomHex(8)
	if _, err := conn.Exec(ctx, "LISTEN leaderlock_probe"); err != nil {
		return false
	}
	if _, err := conn.Exec(ctx, "SELECT pg_notify('leaderlock_probe', $1)", token); err != nil {
		return false
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	for {
		n, err := conn.WaitForNotification(wctx)
		if err != nil {
			return false
		}
		if n.Channel == "leaderlock_probe" && n.Payload == token {
			return true
		}
	}
}

func (e *Elector) pollEvery(worker, notifications bool) time.Duration {
	if e.cfg.Poll > 0 {
		return e.cfg.Poll
	}
	if !worker { // nobody announces an expiry: the try itself finds it
		return clamp(e.ttl/4, 100*time.Millisecond, time.Second)
	}
	if d := e.ttl / 2; notifications && d > time.Second {
		return d
	}
	return time.Second
}

func (e *Elector) observe(holder string) {
	e.mu.Lock()
	changed := e.seen == nil || *e.seen != holder
	e.seen = &holder
	e.mu.Unlock()
	if changed && e.cfg.Callbacks.OnNewLeader != nil {
		e.cfg.Callbacks.OnNewLeader(holder)
	}
}

// Run campaigns until it has led once and lost the lease, or until ctx is
// done (as client-go's LeaderElector.Run); on the way out it releases a
// lease it still holds, so the next candidate leads at once.
func (e *Elector) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		conn, term, deadline, err := e.campaign(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			select { // unreachable: try again
			case <-time.After(e.retryEvery()):
			case <-ctx.Done():
			}
			continue
		}
		e.lead(ctx, conn, term, deadline)
		return nil
	}
	return nil
}

// RunOrDie is Run with a configuration that must be valid.
func RunOrDie(ctx context.Context, cfg Config) {
	e, err := NewElector(cfg)
	if err != nil {
		panic(err)
	}
	_ = e.Run(ctx)
}

func (e *Elector) call(ctx context.Context, conn *pgx.Conn, until time.Time, sql string, args ...interface{}) (pgx.Row, context.CancelFunc) {
	cctx, cancel := context.WithDeadline(ctx, until)
	return conn.QueryRow(cctx, sql, args...), cancel
}

func scanBool(ctx context.Context, e *Elector, conn *pgx.Conn, until time.Time, sql string, args ...interface{}) (bool, error) {
	row, cancel := e.call(ctx, conn, until, sql, args...)
	defer cancel()
	var ok bool
	err := row.Scan(&ok)
	return ok, err
}

func isUndefined(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == undefinedFunc
}

// slotsDiffer reports whether the server refused a try because the key is
// held with another number of slots: the key is not ours now; keep trying,
// its holders' tenures will end.
func slotsDiffer(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22023" && strings.HasPrefix(pe.Detail, slotsDifferDetail)
}

func (e *Elector) campaign(ctx context.Context) (*pgx.Conn, int64, time.Time, error) {
	conn, err := e.connect(ctx)
	if err != nil {
		return nil, 0, time.Time{}, err
	}
	fail := func(err error) (*pgx.Conn, int64, time.Time, error) {
		conn.Close(context.Background())
		return nil, 0, time.Time{}, err
	}
	worker, err := scanBool(ctx, e, conn, time.Now().Add(e.callTimeout()), sqlWorkerServes)
	if isUndefined(err) { // before 0.5.0
		worker, err = scanBool(ctx, e, conn, time.Now().Add(e.callTimeout()), sqlWorkerRuns)
	}
	if err != nil {
		return fail(err)
	}
	expire := !worker
	if _, err := conn.Exec(ctx, "LISTEN leaderlock"); err != nil {
		return fail(err)
	}
	notifications := e.probe(ctx, conn)
	secs := e.ttl.Seconds()
	for {
		lastTry := time.Now()
		if expire {
			var n int64
			row, cancel := e.call(ctx, conn, time.Now().Add(e.callTimeout()), sqlExpire)
			err := row.Scan(&n)
			cancel()
			var pe *pgconn.PgError
			if errors.As(err, &pe) {
				// refused (or missing before 0.5.0): the try takes a lapsed lease anyway, unannounced
				expire = false
			} else if err != nil {
				return fail(err)
			}
		}
		start := time.Now()
		won, err := scanBool(ctx, e, conn, start.Add(e.callTimeout()), sqlTryAcquire, e.cfg.Key, e.cfg.Identity, secs)
		if slotsDiffer(err) {
			won, err = false, nil // held with another number of slots: not ours now, a refusal
		}
		if err != nil {
			return fail(err)
		}
		if won {
			var term int64
			row, cancel := e.call(ctx, conn, start.Add(e.callTimeout()), sqlTermOf, e.cfg.Key, e.cfg.Identity)
			err := row.Scan(&term)
			cancel()
			if err == nil {
				if e.cfg.Value != nil {
					value, err := json.Marshal(e.cfg.Value)
					if err != nil {
						return fail(err)
					}
					pctx, cancel := context.WithDeadline(ctx, start.Add(e.callTimeout()))
					_, err = conn.Exec(pctx, "SELECT le_proclaim(key => $1, id => $2, value => $3::jsonb)",
						e.cfg.Key, e.cfg.Identity, string(value))
					cancel()
					if err != nil {
						return fail(err)
					}
				}
				uctx, cancel := context.WithDeadline(ctx, time.Now().Add(e.callTimeout()))
				_, err = conn.Exec(uctx, "UNLISTEN *")
				cancel()
				if err != nil {
					return fail(err)
				}
				return conn, term, start.Add(e.ttl - e.margin), nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return fail(err)
			}
		}
		var holder *string
		row, cancel := e.call(ctx, conn, time.Now().Add(e.callTimeout()), sqlLeader, e.cfg.Key)
		err = row.Scan(&holder)
		cancel()
		if err != nil {
			return fail(err)
		}
		if holder == nil {
			e.observe("")
		} else {
			e.observe(*holder)
		}
		if err := e.waitForHint(ctx, conn, e.pollEvery(worker, notifications), lastTry); err != nil {
			return fail(err)
		}
	}
}

// waitForHint returns when a notification says the key is free (a hint
// only: any role may notify; never sooner than hintFloor after lastTry, the
// start of the last try, so that hints heard meanwhile make one try), after
// d, or with ctx's error.
func (e *Elector) waitForHint(ctx context.Context, conn *pgx.Conn, d time.Duration, lastTry time.Time) error {
	until := time.Now().Add(d)
	for time.Now().Before(until) {
		wctx, cancel := context.WithDeadline(ctx, until)
		n, err := conn.WaitForNotification(wctx)
		timedOut := wctx.Err() != nil
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if timedOut {
				return nil
			}
			return err
		}
		var a struct{ Key, Event string }
		if json.Unmarshal([]byte(n.Payload), &a) == nil && a.Key == e.cfg.Key && (a.Event == "released" || a.Event == "expired") {
			if due := lastTry.Add(hintFloor); due.Before(until) {
				until = due
			}
		}
	}
	return nil
}

// lead holds the lease: renewals in this goroutine, OnStartedLeading in
// its own, the local deadline enforced by a timer that cancels its context.
func (e *Elector) lead(ctx context.Context, conn *pgx.Conn, term int64, deadline time.Time) {
	e.observe(e.cfg.Identity)
	leadCtx, stopLeading := context.WithCancel(ctx)
	var mu sync.Mutex
	lost := false
	lose := func() {
		mu.Lock()
		lost = true
		mu.Unlock()
		stopLeading()
	}
	var dmu sync.Mutex
	valid := func() bool {
		dmu.Lock()
		d := deadline
		dmu.Unlock()
		return leadCtx.Err() == nil && time.Now().Before(d)
	}
	watchdog := time.AfterFunc(time.Until(deadline), lose)
	done := make(chan struct{})
	if cb := e.cfg.Callbacks.OnStartedLeading; cb != nil {
		go func() {
			defer close(done)
			cb(leadCtx, Lease{Key: e.cfg.Key, Identity: e.cfg.Identity, Term: term, Value: e.cfg.Value, Valid: valid})
		}()
	} else {
		close(done)
	}
	secs := e.ttl.Seconds()
	next := deadline.Add(e.margin - e.ttl + e.ttl/3)
	for {
		select {
		case <-leadCtx.Done():
		case <-time.After(time.Until(next)):
		}
		if leadCtx.Err() != nil {
			break
		}
		start := time.Now()
		if conn == nil {
			c, err := e.connect(leadCtx)
			if err != nil {
				next = start.Add(e.retryEvery())
				continue
			}
			conn = c
		}
		// one call may take ttl/3 at most (then reconnect and retry), never
		// past the deadline; the watchdog does not wait for it either way
		by := start.Add(e.callTimeout())
		if by.After(deadline) {
			by = deadline
		}
		ok, err := scanBool(leadCtx, e, conn, by, sqlRenew, e.cfg.Key, e.cfg.Identity, secs)
		switch {
		case err != nil:
			conn.Close(context.Background())
			conn = nil
			next = start.Add(e.retryEvery())
		case ok && !valid():
			// the deadline passed meanwhile: the loss stands
		case ok:
			dmu.Lock()
			deadline = start.Add(e.ttl - e.margin)
			dmu.Unlock()
			watchdog.Reset(time.Until(deadline))
			next = start.Add(e.ttl / 3)
		default:
			still, err := scanBool(leadCtx, e, conn, by, sqlStillOurs, e.cfg.Identity, term, e.cfg.Key)
			if err == nil && still {
				next = start.Add(e.retryEvery()) // its row was locked: retry until the deadline
			} else {
				lose()
			}
		}
	}
	watchdog.Stop()
	mu.Lock()
	wasLost := lost
	mu.Unlock()
	<-done
	if !wasLost && time.Now().Before(deadline) { // Run's context ended: hand over at once
		rctx, cancel := context.WithTimeout(context.Background(), e.callTimeout())
		if conn == nil {
			conn, _ = e.connect(rctx)
		}
		if conn != nil {
			_, _ = conn.Exec(rctx, sqlRelease, e.cfg.Key, e.cfg.Identity)
		}
		cancel()
	}
	if conn != nil {
		conn.Close(context.Background())
	}
	if cb := e.cfg.Callbacks.OnStoppedLeading; cb != nil {
		cb()
	}
}
