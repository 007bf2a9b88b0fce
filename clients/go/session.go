package leaderlock

// Sessions (contract 21, docs/sessions.md): one ttl that many keys share.
// A process opens one Session, acquires its keys under it, and one
// goroutine renews the session every ttl/3 on a connection of its own
// (le_renew_session: one row written however many keys). The guarantees
// are a lease's: a local deadline on the monotonic clock (the send time of
// le_open_session or of the last successful le_renew_session + ttl -
// ttl/200) that Session.Check and SessionLease.Check compare with the clock
// on every call, and that a timer enforces too (closing Lost); every call
// bounded by it. A renewal answered false, a refusal for good, or no
// successful renewal before the deadline loses the session, and every key
// held under it, for good: open a new one.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// One round trip each, bind parameters, arguments by name; every name
// qualified (schema.go).
const (
	sqlOpenSession = "SELECT @extschema@.le_open_session(id => $1, ttl => pg_catalog.make_interval(secs => $2), " +
		"lock_delay => pg_catalog.make_interval(secs => $3), keep_values => $4)::pg_catalog.text"
	sqlRenewSession = "SELECT @extschema@.le_renew_session(session => $1::pg_catalog.uuid, " +
		"ttl => pg_catalog.make_interval(secs => $2))"
	sqlCloseSession = "SELECT @extschema@.le_close_session(session => $1::pg_catalog.uuid)"
	sqlTryAcquireIn = "SELECT @extschema@.le_try_acquire_in(session => $1::pg_catalog.uuid, key => $2)"
	sqlAcquireIn    = "SELECT @extschema@.le_acquire_in(session => $1::pg_catalog.uuid, key => $2, " +
		"wait => pg_catalog.make_interval(secs => $3))"
	// In the acquisition's transaction, right after it: the row is locked
	// by it, so the term is the tenure's.
	sqlSessionTerm = "SELECT term FROM @extschema@.leaderlock WHERE key OPERATOR(pg_catalog.=) $1 " +
		"AND holder OPERATOR(pg_catalog.=) $2 AND session OPERATOR(pg_catalog.=) $3::pg_catalog.uuid"
)

// maxIdle: connections a session keeps for its acquisitions and releases
// (the renewal has its own).
const maxIdle = 4

// ErrNotAcquired: Session.Acquire waited its whole wait and the key stayed
// another's. Not a refusal for good: try again.
var ErrNotAcquired = errors.New("leaderlock: not acquired")

var (
	errSessionClosed = errors.New("the session was closed")
	errReleased      = errors.New("the key was released")
)

// SessionConfig of OpenSession.
type SessionConfig struct {
	// TTL: the session's length, renewed every ttl/3; must be positive.
	TTL time.Duration
	// ID: the holder of every key acquired under the session; default
	// host:pid:random.
	ID string
	// LockDelay: a key vacated because the session expired cannot be
	// acquired by anyone for this long (docs/sessions.md); default 0.
	LockDelay time.Duration
	// KeepValues: vacated keys keep their last value.
	KeepValues bool
	// Logf, when not nil, gets one line per event worth an operator's
	// attention: failed renewals and reconnections, the session's loss and
	// close, releases that heard no answer. IDs and keys are quoted with %q.
	Logf func(format string, args ...interface{})
	// Schema names the schema that holds leaderlock's functions, as
	// Config.Schema; default the environment variable LEADERLOCK_SCHEMA.
	Schema string
}

// Session is a server session (its handle a uuid) renewed by one
// goroutine, and the keys this process acquired under it. Its methods are
// safe for concurrent use.
type Session struct {
	cfg      SessionConfig
	e        *Elector // connection settings, ttl and margin, timeouts
	handle   string
	t        *tenure // the session's life: its deadline, why it ended
	stopped  chan struct{}
	renewals atomic.Int64 // le_renew_session calls sent

	closeOnce sync.Once
	closeErr  error

	mu     sync.Mutex
	closed bool
	idle   []*pgx.Conn
	leases map[string]*SessionLease
	// releases of a key that heard no answer (and acquisitions whose
	// commit did), with the tenure's term: sent again, and answered,
	// before the key is acquired again (docs/clients.md)
	unanswered map[string]int64
}

// OpenSession opens a session (le_open_session) on a connection of its
// own and starts renewing it. ctx bounds the open only. Errors from bad
// arguments (TTL <= 0, a negative LockDelay, a malformed dsn) match
// ErrBadArgument before anything connects; refusals for good from the
// server are *Error, as for Run.
func OpenSession(ctx context.Context, dsn string, cfg SessionConfig) (*Session, error) {
	if cfg.TTL <= 0 {
		return nil, badArgument("TTL must be positive (got %v)", cfg.TTL)
	}
	if cfg.LockDelay < 0 {
		return nil, badArgument("LockDelay must not be negative (got %v)", cfg.LockDelay)
	}
	if cfg.ID == "" {
		cfg.ID = DefaultIdentity()
	}
	e, err := NewElector(Config{ConnString: dsn, Key: cfg.ID, Identity: cfg.ID, TTL: cfg.TTL, Schema: cfg.Schema})
	if err != nil {
		return nil, err
	}
	conn, err := e.connect(ctx)
	if err != nil {
		return nil, classify(nil, err)
	}
	start := time.Now()
	var handle string
	row, cancel := e.call(ctx, conn, start.Add(e.callTimeout()), sqlOpenSession,
		cfg.ID, e.ttl.Seconds(), cfg.LockDelay.Seconds(), cfg.KeepValues)
	err = row.Scan(&handle)
	cancel()
	if err != nil {
		err = classify(conn, err)
		conn.Close(context.Background())
		return nil, err
	}
	r := e.startTenure(context.Background(), start)
	s := &Session{cfg: cfg, e: e, handle: handle, t: r.t,
		stopped: make(chan struct{}), leases: map[string]*SessionLease{}, unanswered: map[string]int64{}}
	go s.renew(r, conn)
	return s, nil
}

func (s *Session) logf(format string, args ...interface{}) {
	if s.cfg.Logf != nil {
		s.cfg.Logf("leaderlock session %q: "+format, append([]interface{}{s.cfg.ID}, args...)...)
	}
}

// renew is the session's one renewer: le_renew_session every ttl/3 on the
// session's connection (a new one after a failure), until the session is
// lost or closed. The renewal is every tenure's (tenure.go).
func (s *Session) renew(r *renewal, conn *pgx.Conn) {
	defer close(s.stopped)
	e, t := s.e, r.t
	secs := e.ttl.Seconds()
	r.run(renewing{conn: &conn, logf: s.logf, renew: "renew", renewal: "renewal",
		call: func(ctx context.Context, c *pgx.Conn, by time.Time) (bool, error) {
			s.renewals.Add(1)
			return scanBool(ctx, e, c, by, sqlRenewSession, s.handle, secs)
		},
		// not live on the server (closed, ended, lapsed): every key is gone
		refused: func() { t.end(StopRefused, nil) }}, nil)
	if conn != nil {
		conn.Close(context.Background())
	}
	switch reason, cause, _ := t.state(); {
	case reason == StopShutdown:
	case cause != nil:
		s.logf("lost, with every key held under it: %s (%v)", reason, cause)
	default:
		s.logf("lost, with every key held under it: %s", reason)
	}
}

// Handle is the session's uuid (leaderlock_sessions.session).
func (s *Session) Handle() string { return s.handle }

// ID is the holder of the session's keys.
func (s *Session) ID() string { return s.cfg.ID }

// Check returns nil while the session is live by the local clock (read on
// each call: a process paused past the deadline sees the loss on its first
// call after it resumes, whatever its timers do). Else an error matching
// ErrLeaseLost (a *LostError: StopRefused when a renewal was answered
// false, StopDeadline when no renewal succeeded in time, StopFailed when a
// renewal was refused for good, StopShutdown after Close).
func (s *Session) Check() error {
	err := s.t.check()
	if err != nil && !errors.Is(err, ErrLeaseLost) { // StopShutdown: closed
		return &LostError{Reason: StopShutdown, Err: errSessionClosed}
	}
	return err
}

// Alive is Check() == nil.
func (s *Session) Alive() bool { return s.Check() == nil }

// Lost is closed when the session is lost or closed: by a timer at the
// deadline, so after a pause it may close late; Check reads the clock.
func (s *Session) Lost() <-chan struct{} { return s.t.done }

// Deadline is the local deadline now: renewals move it forward.
func (s *Session) Deadline() time.Time {
	_, _, d := s.t.state()
	return d
}

// SessionLease is a key held under a Session: alive while its session is
// and it was not released.
type SessionLease struct {
	Key, Identity string
	// Term is the fencing token: Guard passes it to le_assert_leader in
	// your transaction; pass it to other systems with each write.
	Term int64
	s    *Session
	mu   sync.Mutex
	lost error // released, or refused by Guard
}

// Check returns nil while this process may act as the key's holder: the
// session is live by the local clock (read on each call), and the key was
// not released nor found another's by Guard. Else an error matching
// ErrLeaseLost. Call it before each unit of work.
func (l *SessionLease) Check() error {
	if l == nil || l.s == nil {
		return &LostError{Reason: StopRefused, Err: errors.New("not a lease from a Session")}
	}
	if err := l.s.Check(); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
}

// Alive is Check() == nil.
func (l *SessionLease) Alive() bool { return l.Check() == nil }

// Deadline is the session's local deadline now.
func (l *SessionLease) Deadline() time.Time {
	if l == nil || l.s == nil {
		return time.Time{}
	}
	return l.s.Deadline()
}

func (l *SessionLease) lose(err error) {
	l.mu.Lock()
	if l.lost == nil {
		l.lost = err
	}
	l.mu.Unlock()
}

// Guard fences a write, as Lease.Guard: call it first in the transaction
// that makes the holder's writes. It checks the local deadline, then runs
// le_assert_leader(key, id, term) in tx, whose share lock holds off any
// other acquisition of the key until tx ends. When the server says the key
// is another's (LE001) the lease is lost (the session goes on) and Guard
// returns an error matching ErrLeaseLost: roll tx back.
func (l *SessionLease) Guard(ctx context.Context, tx pgx.Tx) error {
	if err := l.Check(); err != nil {
		return err
	}
	var term int64
	err := tx.QueryRow(ctx, l.s.e.ext.sql(sqlAssertLeader), l.Key, l.Identity, l.Term).Scan(&term)
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == sqlstateNotLeader {
		lost := &LostError{Reason: StopRefused, Err: err}
		l.lose(lost)
		return lost
	}
	return classify(nil, err)
}

// TryAcquire tries once to acquire key under the session
// (le_try_acquire_in): the lease, or nil and a nil error when the key is
// another's. An empty key matches ErrBadArgument; a lost or closed session
// ErrLeaseLost; other *Error are refusals for good; any other error is
// worth retrying (the key is not held then).
func (s *Session) TryAcquire(ctx context.Context, key string) (*SessionLease, error) {
	return s.acquire(ctx, key, nil)
}

// Acquire waits up to wait for key (le_acquire_in, woken by the server
// when the key is freed): the lease, or an error matching ErrNotAcquired
// when wait passed; otherwise as TryAcquire. The server caps wait
// (leaderlock.max_wait, 5 minutes by default; longer: ErrBadArgument).
func (s *Session) Acquire(ctx context.Context, key string, wait time.Duration) (*SessionLease, error) {
	if wait < 0 {
		return nil, badArgument("wait must not be negative (got %v)", wait)
	}
	l, err := s.acquire(ctx, key, &wait)
	if err == nil && l == nil {
		return nil, fmt.Errorf("%w: %q within %v", ErrNotAcquired, key, wait)
	}
	return l, err
}

func (s *Session) acquire(ctx context.Context, key string, wait *time.Duration) (*SessionLease, error) {
	if key == "" {
		return nil, badArgument("key must not be empty")
	}
	if err := s.Check(); err != nil {
		return nil, err
	}
	bound := s.e.callTimeout()
	if wait != nil {
		bound += *wait
	}
	// the call ends with the caller's ctx, its bound, and the session
	cctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	go func() {
		select {
		case <-s.t.done:
			cancel()
		case <-cctx.Done():
		}
	}()
	c, err := s.take(cctx)
	if err != nil {
		return nil, s.lostOr(err)
	}
	if free, err := s.releaseAgain(cctx, c, key); err != nil || !free {
		s.give(c, err)
		return nil, s.lostOr(err)
	}
	held, term, err := s.acquireIn(cctx, c, key, wait)
	s.give(c, err)
	if err != nil || !held {
		return nil, s.lostOr(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.Check(); err != nil { // lost meanwhile: so is the key
		return nil, err
	}
	if l := s.leases[key]; l != nil && l.Term == term && l.Check() == nil {
		return l, nil // held already: the same tenure
	}
	l := &SessionLease{Key: key, Identity: s.cfg.ID, Term: term, s: s}
	s.leases[key] = l
	return l, nil
}

// acquireIn acquires key in a transaction that reads its term right after
// (the row locked by the acquisition until commit). A commit that heard
// no answer may have taken the key: its release is sent (and recorded, if
// unanswered) before the error returns.
func (s *Session) acquireIn(ctx context.Context, c *pgx.Conn, key string, wait *time.Duration) (bool, int64, error) {
	tx, err := c.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}) // le_acquire_in waits in READ COMMITTED only
	if err != nil {
		return false, 0, classify(c, err)
	}
	var held bool
	var term int64
	if wait == nil {
		err = tx.QueryRow(ctx, s.e.ext.sql(sqlTryAcquireIn), s.handle, key).Scan(&held)
	} else {
		err = tx.QueryRow(ctx, s.e.ext.sql(sqlAcquireIn), s.handle, key, wait.Seconds()).Scan(&held)
	}
	if err == nil && held {
		err = tx.QueryRow(ctx, s.e.ext.sql(sqlSessionTerm), key, s.cfg.ID, s.handle).Scan(&term)
	}
	if err != nil {
		err = classify(c, err)
		rctx, cancel := context.WithTimeout(context.Background(), s.e.callTimeout())
		_ = tx.Rollback(rctx)
		cancel()
		return false, 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		if held { // it may have committed
			s.release(key, term)
		}
		return false, 0, classify(nil, err)
	}
	return held, term, nil
}

// lostOr is the session's loss when it is lost (a call it cancelled), else
// err.
func (s *Session) lostOr(err error) error {
	if lost := s.Check(); lost != nil {
		return lost
	}
	return err
}

// Release gives up key (le_release(key, id, term) with the tenure's term):
// its lease is lost locally first, then released on the server; the
// session goes on. Nil when the key was released, or not held under this
// session. An empty key matches ErrBadArgument. A release that heard no
// answer is sent again, and answered, before the key is acquired again.
func (s *Session) Release(ctx context.Context, key string) error {
	if key == "" {
		return badArgument("key must not be empty")
	}
	s.mu.Lock()
	l := s.leases[key]
	delete(s.leases, key)
	term, pending := s.unanswered[key]
	closed := s.closed
	s.mu.Unlock()
	if l != nil {
		l.lose(&LostError{Reason: StopShutdown, Err: errReleased})
		term, pending = l.Term, true
	}
	if !pending || closed { // nothing held; or closed: every key released
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, s.e.callTimeout())
	defer cancel()
	c, err := s.take(cctx)
	if err == nil {
		_, err = scanBool(cctx, s.e, c, time.Now().Add(s.e.callTimeout()), sqlRelease, key, s.cfg.ID, term)
		s.give(c, err)
	}
	s.mu.Lock()
	if err != nil {
		s.unanswered[key] = term
	} else if t, still := s.unanswered[key]; still && t == term {
		delete(s.unanswered, key)
	}
	s.mu.Unlock()
	if err != nil {
		s.logf("release of %q (term %d) heard no answer (%v): sent again before the key is acquired again", key, term, err)
		return classify(nil, err)
	}
	return nil
}

// release: after an acquisition whose commit heard no answer, release the
// tenure it may have started, on a new connection within ttl/3; recorded
// as unanswered unless answered.
func (s *Session) release(key string, term int64) {
	s.mu.Lock()
	s.unanswered[key] = term
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), s.e.callTimeout())
	defer cancel()
	c, err := s.e.connect(ctx)
	if err != nil {
		return
	}
	defer c.Close(context.Background())
	if _, err := scanBool(ctx, s.e, c, time.Now().Add(s.e.callTimeout()), sqlRelease, key, s.cfg.ID, term); err == nil {
		s.mu.Lock()
		if t, still := s.unanswered[key]; still && t == term {
			delete(s.unanswered, key)
		}
		s.mu.Unlock()
	}
}

// releaseAgain sends again the release of key that heard no answer, if
// any. False while the tenure it ends is still held (its row was locked):
// no try yet.
func (s *Session) releaseAgain(ctx context.Context, c *pgx.Conn, key string) (bool, error) {
	s.mu.Lock()
	term, pending := s.unanswered[key]
	s.mu.Unlock()
	if !pending {
		return true, nil
	}
	until := time.Now().Add(s.e.callTimeout())
	ok, err := scanBool(ctx, s.e, c, until, sqlRelease, key, s.cfg.ID, term)
	if err == nil && !ok {
		var held bool
		if held, err = scanBool(ctx, s.e, c, until, sqlHolds, key, s.cfg.ID, term); err == nil && held {
			return false, nil
		}
	}
	if err != nil {
		return false, classify(c, err)
	}
	s.mu.Lock()
	if t, still := s.unanswered[key]; still && t == term {
		delete(s.unanswered, key)
	}
	s.mu.Unlock()
	return true, nil
}

// take is an idle connection of the session's, or a new one.
func (s *Session) take(ctx context.Context) (*pgx.Conn, error) {
	s.mu.Lock()
	for len(s.idle) > 0 {
		c := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if !c.IsClosed() {
			s.mu.Unlock()
			return c, nil
		}
	}
	s.mu.Unlock()
	c, err := s.e.connect(ctx)
	if err != nil {
		return nil, classify(nil, err)
	}
	return c, nil
}

// give keeps c for the next call unless the call failed or the session is
// closed.
func (s *Session) give(c *pgx.Conn, err error) {
	s.mu.Lock()
	if err == nil && !c.IsClosed() && !s.closed && len(s.idle) < maxIdle {
		s.idle = append(s.idle, c)
		c = nil
	}
	s.mu.Unlock()
	if c != nil {
		c.Close(context.Background())
	}
}

// Close ends the session: the session and every lease are lost locally
// first (Lost closes, Check fails), the renewal stops, then
// le_close_session releases every key at once, in one transaction (each
// announced `released`, waiters woken). ctx bounds that call (and ttl/3).
// An error means the close was not answered: the keys are then vacated
// when the session lapses, at its ttl. Closing again returns the first
// Close's error.
func (s *Session) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.t.end(StopShutdown, errSessionClosed)
		<-s.stopped // its call cancelled
		s.mu.Lock()
		s.closed = true
		idle := s.idle
		s.idle = nil
		s.mu.Unlock()
		cctx, cancel := context.WithTimeout(ctx, s.e.callTimeout())
		defer cancel()
		var c *pgx.Conn
		var err error
		for _, ic := range idle {
			if c == nil && !ic.IsClosed() {
				c = ic
			} else {
				ic.Close(context.Background())
			}
		}
		if c == nil {
			c, err = s.e.connect(cctx)
		}
		if err == nil {
			_, err = scanBool(cctx, s.e, c, time.Now().Add(s.e.callTimeout()), sqlCloseSession, s.handle)
			c.Close(context.Background())
		}
		if err != nil {
			s.closeErr = classify(nil, err)
			s.logf("close heard no answer (%v): its keys are vacated when it lapses", err)
			return
		}
		s.logf("closed")
	})
	return s.closeErr
}
