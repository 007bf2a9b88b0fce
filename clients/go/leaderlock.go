// Package leaderlock is leader election on PostgreSQL with the leaderlock
// extension (compiled or portable edition), shaped like client-go's
// leaderelection: an Elector whose callbacks mirror LeaderCallbacks, so
// that code written for a Kubernetes Lease moves over with few changes.
//
// The guarantees are the Rust client's: renew every ttl/3; a local
// deadline on the monotonic clock (send time of the last successful
// acquire or renewal + ttl - ttl/200) that OnStartedLeading's context and
// Lease.Check compare with the clock on every call, and that a timer
// enforces too (closing the context's Done) whatever a renewal call is
// doing; every call bounded by that deadline; LISTEN as a hint with
// polling as the fallback; reconnection with jittered backoff while
// waiting; identity host:pid:random. Refusals for good (no extension, no
// privilege, a bad argument) end Run with an *Error instead of retrying.
//
// Schedule runs a job once per due instant on one replica among many
// (scheduled runs, contract 22), with the same guarantees for each run: see
// ScheduleConfig and ScheduledRun.
//
// A Session holds many keys under one renewal (sessions, contract 21),
// with the same guarantees for the session and each of its keys: see
// OpenSession and SessionLease.
//
// WatchHistory follows the history of transitions (contract 23): each
// one delivered once, in order, across lost connections; see
// HistoryWatcher.
//
// JoinGroup makes this process a member of a group (contract 26): its
// share of the group's partitions, assigned by the server, each checked
// against the same local deadline; see Member.
package leaderlock

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	mathrand "math/rand"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// One round trip each, bind parameters, arguments by name; every name
// qualified (schema.go: @extschema@ is the extension's schema).
const (
	sqlTryAcquire = "SELECT @extschema@.le_try_acquire(key => $1, id => $2, ttl => pg_catalog.make_interval(secs => $3))"
	sqlRenew      = "SELECT @extschema@.le_renew(key => $1, id => $2, ttl => pg_catalog.make_interval(secs => $3), term => $4)"
	sqlRelease    = "SELECT @extschema@.le_release(key => $1, id => $2, term => $3)"
	// The same on a schema before 0.5.0 (no term): a client updated before
	// the extension keeps working, without that protection (UPDATING.md).
	sqlRenewLegacy   = "SELECT @extschema@.le_renew(key => $1, id => $2, ttl => pg_catalog.make_interval(secs => $3))"
	sqlReleaseLegacy = "SELECT @extschema@.le_release(key => $1, id => $2)"
	// After a release sent again was answered false: whether the identity
	// still holds that tenure live (the release met its row locked).
	sqlHolds = "SELECT EXISTS (SELECT FROM @extschema@.le_holders(key => $1) WHERE holder OPERATOR(pg_catalog.=) $2 " +
		"AND (term OPERATOR(pg_catalog.=) $3 OR $3::bigint IS NULL))"
	sqlTermOf = "SELECT term FROM @extschema@.le_lease(key => $1) WHERE holder OPERATOR(pg_catalog.=) $2"
	// live by the server's lease clock: remaining is NULL unless live
	// (expires_at need not compare with clock_timestamp(): le_now())
	sqlStillOurs = "SELECT coalesce(holder OPERATOR(pg_catalog.=) $1 AND term OPERATOR(pg_catalog.=) $2 " +
		"AND remaining IS NOT NULL, false) FROM @extschema@.le_lease(key => $3)"
	sqlLeader       = "SELECT @extschema@.le_leader(key => $1)"
	sqlWorkerServes = "SELECT coalesce((@extschema@.le_capabilities() OPERATOR(pg_catalog.->>) 'worker')::boolean, true)"
	sqlWorkerRuns   = "SELECT @extschema@.le_worker_running()"
	sqlExpire       = "SELECT @extschema@.le_expire_lapsed()"
	sqlProclaim     = "SELECT @extschema@.le_proclaim(key => $1, id => $2, value => $3::pg_catalog.jsonb)"
	sqlListen       = "LISTEN leaderlock"
	sqlUnlisten     = "UNLISTEN *"
	// the notification probe: a notification this session sends itself
	sqlListenProbe = "LISTEN leaderlock_probe"
	sqlNotifyProbe = "SELECT pg_catalog.pg_notify('leaderlock_probe', $1)"
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
	// Its context ends at a loss, at the local deadline, and when Run's
	// context is done; its Err() reads the clock on every call. Check
	// ctx.Err() (or lease.Check()) before each unit of work: a select on
	// ctx.Done() alone is not enough, since after a pause of the process
	// (SIGSTOP, a VM frozen) every case of a select can be ready at once
	// and Go picks one at random. Run waits for it to return.
	OnStartedLeading func(ctx context.Context, lease Lease)
	// OnStoppedLeading is called when a tenure ends, with the reason,
	// after OnStartedLeading has returned (and after the release, with
	// ReleaseOnCancel).
	OnStoppedLeading func(reason StopReason)
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
	// ReleaseOnCancel: when Run's context ends while leading, release the
	// lease once OnStartedLeading has returned (and before the local
	// deadline), so the next candidate leads at once, within a round trip.
	// Without it the lease lapses at its ttl (as client-go's default).
	ReleaseOnCancel bool
	// Value, when not nil, is announced with the leadership (le_proclaim,
	// as JSON), e.g. this leader's address.
	Value interface{}
	// Logf, when not nil, gets one line per event worth an operator's
	// attention: reconnections and their delay, failed or deferred
	// renewals, a key held with another number of slots, each tenure's
	// start and end, a refusal for good. log.Printf fits, as does a
	// *log.Logger's Printf. Keys and holders are quoted with %q.
	Logf      func(format string, args ...interface{})
	Callbacks LeaderCallbacks
	// Schema names the schema that holds leaderlock's functions; default
	// the environment variable LEADERLOCK_SCHEMA, else the one each new
	// connection finds: the extension's (CREATE EXTENSION), or the one
	// schema that holds the portable edition's. Needed only when several
	// schemas hold functions named as the portable edition's. No statement
	// depends on the search_path: leaderlock's objects are named in this
	// schema, PostgreSQL's in pg_catalog.
	Schema string
}

// Elector campaigns for Config.Key.
type Elector struct {
	cfg     Config
	connCfg *pgx.ConnConfig
	ttl     time.Duration
	margin  time.Duration
	mu      sync.Mutex
	seen    *string
	rand    *mathrand.Rand
	value   *string    // Config.Value as JSON
	ext     *extSchema // where leaderlock is, found on each new connection
}

// Releases that heard no answer, by server, key and identity: their term
// (nil: an interrupted try's). Such a release may still reach the server,
// so a campaign under the same identity sends it again, and hears an
// answer, before its first try: a try before that would extend the very
// tenure the late release then ends, while this process leads in it
// (docs/verification.md). Package-wide: Run(ctx, cfg) in a loop makes a
// new Elector each time.
var unanswered = struct {
	sync.Mutex
	m map[[3]string]*int64
}{m: map[[3]string]*int64{}}

func (e *Elector) releaseSlot() [3]string {
	return [3]string{e.connCfg.ConnString(), e.cfg.Key, e.cfg.Identity}
}

// DefaultIdentity is host:pid:random.
func DefaultIdentity() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), randomHex(4))
}

// NewElector checks the configuration; its errors match ErrBadArgument.
func NewElector(cfg Config) (*Elector, error) {
	if cfg.Key == "" {
		return nil, badArgument("Key must not be empty")
	}
	if cfg.TTL == 0 {
		cfg.TTL = 10 * time.Second
	}
	if cfg.TTL < 0 || cfg.Poll < 0 {
		return nil, badArgument("TTL and Poll must be positive")
	}
	if cfg.Identity == "" {
		cfg.Identity = DefaultIdentity()
	}
	connCfg, err := parseConnString(cfg.ConnString, "leaderlock go")
	if err != nil {
		return nil, err
	}
	var value *string
	if cfg.Value != nil {
		b, err := json.Marshal(cfg.Value)
		if err != nil {
			return nil, &Error{Kind: ErrBadArgument, Message: "leaderlock: bad argument: Value: " + err.Error(), Err: err}
		}
		s := string(b)
		value = &s
	}
	var seed [8]byte
	_, _ = cryptorand.Read(seed[:])
	if cfg.Schema == "" {
		cfg.Schema = os.Getenv(schemaEnv)
	}
	return &Elector{cfg: cfg, connCfg: connCfg, ttl: cfg.TTL, margin: cfg.TTL / 200, value: value,
		ext: newExtSchema(cfg.Schema), rand: mathrand.New(mathrand.NewSource(int64(binary.LittleEndian.Uint64(seed[:]))))}, nil
}

// parseConnString parses a DSN into the settings every connection of the
// package uses; appName names the connections unless the DSN does. Its
// error matches ErrBadArgument.
func parseConnString(dsn, appName string) (*pgx.ConnConfig, error) {
	connCfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, &Error{Kind: ErrBadArgument, Message: "leaderlock: bad argument: ConnString: " + err.Error(), Err: err}
	}
	// Named prepared statements (pgx's default mode, cache_statement) live
	// in one server session: behind a transaction-pooling pgbouncer the
	// next call may land on another, and fails ("prepared statement ...
	// does not exist"). QueryExecModeExec sends each call whole, in one
	// round trip (parse of the unnamed statement, bind, describe, execute,
	// sync; the parameters in text, their types taken by the server from
	// the statement), so it works behind any pooler.
	// A DSN that asks for another mode without named statements
	// (default_query_exec_mode=simple_protocol, describe_exec or
	// cache_describe) keeps it.
	if connCfg.DefaultQueryExecMode == pgx.QueryExecModeCacheStatement {
		connCfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	}
	if connCfg.RuntimeParams["application_name"] == "" {
		connCfg.RuntimeParams["application_name"] = appName
	}
	return connCfg, nil
}

func (e *Elector) logf(format string, args ...interface{}) {
	if e.cfg.Logf != nil {
		e.cfg.Logf("leaderlock %q: "+format, append([]interface{}{e.cfg.Key}, args...)...)
	}
}

// connect names its connections "leaderlock go" unless the DSN names them,
// finds the extension's schema on each (its errors: schema.go), and gives
// up after the DSN's connect_timeout, else after max(2 s, ttl/3).
func (e *Elector) connect(ctx context.Context) (*pgx.Conn, error) {
	timeout := e.connCfg.ConnectTimeout
	if timeout <= 0 {
		timeout = e.callTimeout()
		if timeout < 2*time.Second {
			timeout = 2 * time.Second
		}
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return e.ext.dial(cctx, e.connCfg)
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
	_, _ = cryptorand.Read(b)
	return hex.EncodeToString(b)
}

func (e *Elector) callTimeout() time.Duration {
	if d := e.ttl / 3; d > 100*time.Millisecond {
		return d
	}
	return 100 * time.Millisecond
}

// retryEvery: between renewals that failed (while leading), and the first
// reconnection delay while waiting.
func (e *Elector) retryEvery() time.Duration {
	return clamp(e.ttl/10, 50*time.Millisecond, time.Second)
}

// backoff is the delay before the next reconnection while waiting: it
// doubles from retryEvery up to clamp(ttl/2, 500 ms, 5 s), each delay drawn
// at random in its upper half, so that candidates that lost the server
// together do not come back in step.
type backoff struct {
	e   *Elector
	cur time.Duration
}

func (b *backoff) next() time.Duration {
	limit := clamp(b.e.ttl/2, 500*time.Millisecond, 5*time.Second)
	if b.cur == 0 {
		b.cur = b.e.retryEvery()
	} else if b.cur *= 2; b.cur > limit {
		b.cur = limit
	}
	half := b.cur / 2
	return half + time.Duration(b.e.rand.Int63n(int64(b.cur-half)+1))
}

func (b *backoff) reset() { b.cur = 0 }

// probe reports whether a notification this session sends itself comes
// back (not behind transaction pooling).
func (e *Elector) probe(ctx context.Context, conn *pgx.Conn) bool {
	token := randomHex(8)
	pctx, cancel := context.WithTimeout(ctx, e.callTimeout())
	defer cancel()
	if _, err := conn.Exec(pctx, sent(sqlListenProbe)); err != nil {
		return false
	}
	if _, err := conn.Exec(pctx, sent(sqlNotifyProbe), token); err != nil {
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

// Run campaigns until it has led once and that tenure has ended, or until
// ctx is done (as client-go's LeaderElector.Run); it returns once
// OnStartedLeading has returned. While waiting, a lost connection or an
// unreachable server is retried with jittered backoff (see Logf); a
// refusal for good (no extension, no privilege, a bad argument; while
// leading too) ends Run with an *Error (errors.Is(err, ErrRejected),
// ErrNotInstalled, ErrPrivilege, ErrBadArgument). Otherwise it returns
// nil: OnStoppedLeading has the tenure's end.
func (e *Elector) Run(ctx context.Context) error {
	bo := &backoff{e: e}
	for ctx.Err() == nil {
		conn, term, sent, err := e.campaign(ctx, bo)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if permanent(err) {
				e.logf("%v", err)
				return err
			}
			d := bo.next()
			e.logf("cannot campaign (%v); trying again in %v", err, d.Round(time.Millisecond))
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
			continue
		}
		return e.lead(ctx, conn, term, sent)
	}
	return nil
}

// Run is NewElector(cfg) and its Run.
func Run(ctx context.Context, cfg Config) error {
	e, err := NewElector(cfg)
	if err != nil {
		return err
	}
	return e.Run(ctx)
}

// RunOrDie is Run that panics with its error: a Config NewElector refuses,
// or a refusal for good from the server (no extension, no privilege, a bad
// argument). It returns when a tenure has ended or ctx is done.
func RunOrDie(ctx context.Context, cfg Config) {
	if err := Run(ctx, cfg); err != nil {
		panic(err)
	}
}

func (e *Elector) call(ctx context.Context, conn *pgx.Conn, until time.Time, sql string, args ...interface{}) (pgx.Row, context.CancelFunc) {
	cctx, cancel := context.WithDeadline(ctx, until)
	return conn.QueryRow(cctx, e.ext.sql(sql), args...), cancel
}

func scanBool(ctx context.Context, e *Elector, conn *pgx.Conn, until time.Time, sql string, args ...interface{}) (bool, error) {
	row, cancel := e.call(ctx, conn, until, sql, args...)
	defer cancel()
	var ok bool
	err := row.Scan(&ok)
	return ok, err
}

// callNamed runs sqlRenew or sqlRelease, naming the tenure's term (the last
// argument); on a schema before 0.5.0, which has no such argument, without it.
func callNamed(ctx context.Context, e *Elector, conn *pgx.Conn, until time.Time, sql string, args ...interface{}) (bool, error) {
	ok, err := scanBool(ctx, e, conn, until, sql, args...)
	if isUndefined(err) {
		legacy := map[string]string{sqlRenew: sqlRenewLegacy, sqlRelease: sqlReleaseLegacy}[sql]
		return scanBool(ctx, e, conn, until, legacy, args[:len(args)-1]...)
	}
	return ok, err
}

// releaseAgain sends again the release under this identity that heard no
// answer, if any (it may still arrive). False while the tenure it ends is
// still held (its row was locked): no try yet.
func (e *Elector) releaseAgain(ctx context.Context, conn *pgx.Conn) (bool, error) {
	unanswered.Lock()
	term, pending := unanswered.m[e.releaseSlot()]
	unanswered.Unlock()
	if !pending {
		return true, nil
	}
	until := time.Now().Add(e.callTimeout())
	ok, err := callNamed(ctx, e, conn, until, sqlRelease, e.cfg.Key, e.cfg.Identity, term)
	if err != nil {
		return false, err
	}
	if !ok {
		held, err := scanBool(ctx, e, conn, until, sqlHolds, e.cfg.Key, e.cfg.Identity, term)
		if err == nil && held {
			return false, nil
		}
		if err != nil && !isUndefined(err) { // before 0.5.0: nothing to go by
			return false, err
		}
	}
	unanswered.Lock()
	if t, still := unanswered.m[e.releaseSlot()]; still && t == term { // not one recorded meanwhile
		delete(unanswered.m, e.releaseSlot())
	}
	unanswered.Unlock()
	return true, nil
}

func isUndefined(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == sqlstateUndefinedFunction
}

// slotsDiffer reports whether the server refused a try because the key is
// held with another number of slots: the key is not ours now; keep trying,
// its holders' tenures will end.
func slotsDiffer(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "22023" && strings.HasPrefix(pe.Detail, slotsDifferDetail)
}

// campaign connects and tries until it leads (it returns the connection,
// the term and the send time of the try that won: the tenure's start) or
// fails; a failure for good is an *Error.
func (e *Elector) campaign(ctx context.Context, bo *backoff) (*pgx.Conn, int64, time.Time, error) {
	conn, err := e.connect(ctx)
	if err != nil {
		return nil, 0, time.Time{}, classify(nil, err)
	}
	// mayHold: a try is under way or was won; if Run's context ends
	// meanwhile the server may have granted it, with the answer lost.
	mayHold := false
	fail := func(err error) (*pgx.Conn, int64, time.Time, error) {
		err = classify(conn, err)
		conn.Close(context.Background())
		if mayHold && ctx.Err() != nil && e.cfg.ReleaseOnCancel {
			e.releaseAbandoned()
		}
		return nil, 0, time.Time{}, err
	}
	worker, err := scanBool(ctx, e, conn, time.Now().Add(e.callTimeout()), sqlWorkerServes)
	if isUndefined(err) { // before 0.5.0
		var err2 error
		if worker, err2 = scanBool(ctx, e, conn, time.Now().Add(e.callTimeout()), sqlWorkerRuns); !isUndefined(err2) {
			err = err2
		} // else neither: no extension, told of the first
	}
	if err != nil {
		return fail(err)
	}
	expire := !worker
	lctx, cancel := context.WithTimeout(ctx, e.callTimeout())
	_, err = conn.Exec(lctx, sent(sqlListen))
	cancel()
	if err != nil {
		return fail(err)
	}
	notifications := e.probe(ctx, conn)
	secs := e.ttl.Seconds()
	slotsWarned := false
	for {
		lastTry := time.Now()
		free, err := e.releaseAgain(ctx, conn)
		if err != nil {
			return fail(err)
		}
		if free && expire {
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
		won := false
		if free { // (not while the tenure a lost release ends is still held)
			won, err = scanBool(ctx, e, conn, start.Add(e.callTimeout()), sqlTryAcquire, e.cfg.Key, e.cfg.Identity, secs)
		}
		if slotsDiffer(err) {
			if !slotsWarned {
				var pe *pgconn.PgError
				errors.As(err, &pe)
				e.logf("held with another number of slots: waiting for its holders to leave (server: %q)", pe.Message)
				slotsWarned = true
			}
			won, err = false, nil // not ours now, a refusal
		} else if err == nil {
			slotsWarned = false
		}
		mayHold = won || err != nil
		if err != nil {
			return fail(err)
		}
		bo.reset() // the connection works
		if won {
			var term int64
			row, cancel := e.call(ctx, conn, start.Add(e.callTimeout()), sqlTermOf, e.cfg.Key, e.cfg.Identity)
			err := row.Scan(&term)
			cancel()
			if err == nil {
				if e.value != nil {
					pctx, cancel := context.WithDeadline(ctx, start.Add(e.callTimeout()))
					_, err = conn.Exec(pctx, e.ext.sql(sqlProclaim), e.cfg.Key, e.cfg.Identity, *e.value)
					cancel()
					if err != nil {
						return fail(err)
					}
				}
				uctx, cancel := context.WithDeadline(ctx, time.Now().Add(e.callTimeout()))
				_, err = conn.Exec(uctx, sent(sqlUnlisten))
				cancel()
				if err != nil {
					return fail(err)
				}
				return conn, term, start, nil
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

// releaseAbandoned: Run's context ended during a try, or after one was
// won and before the tenure started: release, in case the server granted
// it.
func (e *Elector) releaseAbandoned() {
	if err := e.release(nil, nil); err != nil {
		e.logf("release after an interrupted try failed (%v): a lease it took lapses at its ttl", err)
	}
}

// release releases the lease of term (nil: whichever tenure the identity
// holds, after an interrupted try), within ttl/3: on conn if it is still
// open (a call cancelled by Run's context closes it), else or if that
// fails on a new connection.
func (e *Elector) release(conn *pgx.Conn, term *int64) (err error) {
	ctx, cancel := context.WithTimeout(context.Background(), e.callTimeout())
	defer cancel()
	until := time.Now().Add(e.callTimeout())
	lost := false // a release sent that heard no answer: it may still arrive
	defer func() {
		if err != nil || lost {
			unanswered.Lock()
			unanswered.m[e.releaseSlot()] = term
			unanswered.Unlock()
		}
	}()
	if conn != nil && !conn.IsClosed() {
		if _, err := callNamed(ctx, e, conn, until, sqlRelease, e.cfg.Key, e.cfg.Identity, term); err == nil {
			return nil
		}
		lost = true
	}
	c, err := e.connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	ok, err := callNamed(ctx, e, c, until, sqlRelease, e.cfg.Key, e.cfg.Identity, term)
	if err == nil && ok {
		lost = false // ended now: the first one, should it come, finds nothing to end
	}
	return err
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

// lead holds the lease won by the acquire sent at sent: renewals in this
// goroutine, OnStartedLeading in its own, the local deadline read by its
// context's Err and Lease.Check on every call and enforced by a timer that
// closes its Done (tenure.go).
func (e *Elector) lead(ctx context.Context, conn *pgx.Conn, term int64, sent time.Time) error {
	r := e.startTenure(ctx, sent)
	t := r.t
	e.observe(e.cfg.Identity)
	e.logf("leading in term %d", term)
	done := make(chan struct{})
	if cb := e.cfg.Callbacks.OnStartedLeading; cb != nil {
		go func() {
			defer close(done)
			cb(r.ctx, Lease{Key: e.cfg.Key, Identity: e.cfg.Identity, Term: term, Value: e.cfg.Value, t: t, ext: e.ext})
		}()
	} else {
		close(done)
	}
	secs := e.ttl.Seconds()
	r.run(renewing{conn: &conn, logf: e.logf, renew: "renew", renewal: "renewal",
		call: func(ctx context.Context, c *pgx.Conn, by time.Time) (bool, error) {
			return callNamed(ctx, e, c, by, sqlRenew, e.cfg.Key, e.cfg.Identity, secs, term)
		},
		// the lease is another's, or its row was locked
		refused: func() {
			still, err := scanBool(r.ctx, e, conn, r.by, sqlStillOurs, e.cfg.Identity, term, e.cfg.Key)
			if err != nil {
				err = classify(conn, err)
			}
			switch {
			case permanent(err):
				r.fail(err)
			case err != nil: // unanswered: renew again on a new connection
				if t.check() == nil {
					e.logf("renewal refused, and whose lease it is unknown (%v); retrying on a new connection, %v to the local deadline",
						err, r.left())
				}
				r.drop()
				r.retry()
			case still:
				// its row was locked (a guarded transaction, a failover's
				// step): retry until the deadline
				e.logf("renewal deferred: the lease's row is locked; retrying, %v to the local deadline", r.left())
				r.retry()
			default:
				t.end(StopRefused, nil)
			}
		}}, nil)
	<-done
	reason, cause, deadline := t.state()
	released := false
	if reason == StopShutdown && e.cfg.ReleaseOnCancel && time.Now().Before(deadline) {
		// hand over at once; only after OnStartedLeading has returned
		if err := e.release(conn, &term); err == nil {
			released = true
		} else {
			e.logf("release failed (%v): the lease lapses at its ttl", err)
		}
	}
	if conn != nil {
		conn.Close(context.Background())
	}
	switch {
	case released:
		e.logf("stopped leading term %d: %s; released", term, reason)
	case cause != nil:
		e.logf("stopped leading term %d: %s (%v)", term, reason, cause)
	default:
		e.logf("stopped leading term %d: %s", term, reason)
	}
	if cb := e.cfg.Callbacks.OnStoppedLeading; cb != nil {
		cb(reason)
	}
	return r.failure
}
