package leaderlock

// Lock: one key's lease driven by its caller, call by call, for code that
// runs an election loop of its own (client-go's LeaderElector, through
// clients/go/resourcelock). The loop decides when to read, acquire, renew
// and release; the Lock sends each as one statement and keeps the tenure
// it won with an Elector's guarantees: a local deadline on the monotonic
// clock (the send time of the acquisition or of the last successful
// renewal + ttl - ttl/200), read by Check on every call and enforced by a
// timer (closing the tenure's context), every call bounded by it, and the
// fencing term for Guard.

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// The key's lease as its status view shows it (one slot): the holder
	// while live (remaining is NULL unless live, by the server's lease
	// clock), the last tenure's term and times. No row: never held.
	sqlLockRead = "SELECT s.holder, s.term, s.acquired_at, s.renewed_at, s.expires_at, " +
		"pg_catalog.date_part('epoch'::pg_catalog.text, s.ttl)::pg_catalog.float8, s.remaining IS NOT NULL " +
		"FROM @extschema@.leaderlock_status s WHERE s.key OPERATOR(pg_catalog.=) $1 AND s.slot IS NULL"
	// An acquisition on a condition: the key's lease is still as the
	// caller read it, its term $4 and its expiry $5 (each write of a
	// candidate changes one: an acquisition the term, a renewal or a
	// release the expiry; both NULL: the key was never held). No row: it
	// changed.
	sqlLockAcquire = "SELECT @extschema@.le_try_acquire(key => $1, id => $2, ttl => pg_catalog.make_interval(secs => $3)) " +
		"FROM @extschema@.le_lease(key => $1) l " +
		"WHERE (l.term OPERATOR(pg_catalog.=) $4::pg_catalog.int8 AND l.expires_at OPERATOR(pg_catalog.=) $5::pg_catalog.timestamptz) " +
		"OR (l.term IS NULL AND $4::pg_catalog.int8 IS NULL)"
)

// ErrLockChanged: Lock.Acquire found the key's lease changed since the
// caller read it (another tenure began, or the holder renewed or released).
var ErrLockChanged = errors.New("leaderlock: the key's lease changed since it was read")

// LockConfig of NewLock.
type LockConfig struct {
	ConnString string // libpq-style DSN or URL (pgx)
	Key        string
	Identity   string // default host:pid:random
	// Logf, when not nil, gets a line for each tenure's start and end and
	// each failed call. Keys are quoted with %q.
	Logf func(format string, args ...interface{})
	// Schema names the schema that holds leaderlock's functions, as
	// Config.Schema; default the environment variable LEADERLOCK_SCHEMA.
	Schema string
}

// LockRecord is a key's lease as Lock.Read found it.
type LockRecord struct {
	// Exists: the key has been held (it has a row); the rest is zero if not.
	Exists bool
	// Holder is the live holder, "" when none (vacant, or lapsed by the
	// server's lease clock).
	Holder string
	// Term is the last tenure's term (a fencing token: it only grows).
	Term int64
	// AcquiredAt and RenewedAt are the last tenure's start and last
	// renewal, ExpiresAt its end, past or to come (the server's clock); TTL
	// its ttl.
	AcquiredAt, RenewedAt, ExpiresAt time.Time
	TTL                              time.Duration
}

// Lock is one key's lease that its caller acquires, renews and releases,
// one call at a time (they are serialised), each one statement on a
// connection of the Lock's own (made again after a failure). The tenure it
// holds is a Lease (Lease()): Check reads its local deadline, Guard fences
// writes with its term, Context ends with it. Safe for concurrent use.
type Lock struct {
	e        *Elector
	mu       sync.Mutex // one call at a time; guards the fields below
	conn     *pgx.Conn
	lease    *Lease      // the tenure held, nil when none
	watchdog *time.Timer // closes the tenure at its local deadline
	stopped  bool        // Stop ended the tenure: its release is still owed
	closed   bool
}

// NewLock checks the configuration (its errors match ErrBadArgument); it
// connects on the first call.
func NewLock(cfg LockConfig) (*Lock, error) {
	e, err := NewElector(Config{ConnString: cfg.ConnString, Key: cfg.Key, Identity: cfg.Identity,
		Logf: cfg.Logf, Schema: cfg.Schema})
	if err != nil {
		return nil, err
	}
	return &Lock{e: e}, nil
}

// Key is the lock's key; Identity the holder it acquires as.
func (l *Lock) Key() string      { return l.e.cfg.Key }
func (l *Lock) Identity() string { return l.e.cfg.Identity }

// call runs f on the lock's connection (made first if need be), bounded by
// ctx and by the call timeout (max(100 ms, ttl/3)) from now; a failure
// other than the server's answer drops the connection. Errors are
// classified (*Error for a refusal for good). l.mu is held.
func (l *Lock) call(ctx context.Context, f func(ctx context.Context, c *pgx.Conn) error) error {
	if l.closed {
		return errors.New("leaderlock: the Lock was closed")
	}
	if l.conn == nil {
		c, err := l.e.connect(ctx)
		if err != nil {
			return classify(nil, err)
		}
		l.conn = c
	}
	err := f(ctx, l.conn)
	var pe *pgconn.PgError
	if err != nil && !errors.As(err, &pe) && !errors.Is(err, pgx.ErrNoRows) {
		l.conn.Close(context.Background())
		l.conn = nil
		return err
	}
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return classify(l.conn, err)
	}
	return err
}

// Read returns the key's lease now (one statement).
func (l *Lock) Read(ctx context.Context) (LockRecord, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var r LockRecord
	err := l.call(ctx, func(ctx context.Context, c *pgx.Conn) error {
		row, cancel := l.e.call(ctx, c, time.Now().Add(l.e.callTimeout()), sqlLockRead, l.e.cfg.Key)
		defer cancel()
		var holder *string
		var term *int64
		var acquired, renewed, expires *time.Time
		var ttl *float64
		var live bool
		if err := row.Scan(&holder, &term, &acquired, &renewed, &expires, &ttl, &live); err != nil {
			return err
		}
		if term == nil {
			return nil
		}
		r.Exists, r.Term = true, *term
		if live && holder != nil {
			r.Holder = *holder
		}
		if acquired != nil {
			r.AcquiredAt = *acquired
		}
		if renewed != nil {
			r.RenewedAt = *renewed
		} else {
			r.RenewedAt = r.AcquiredAt
		}
		if expires != nil {
			r.ExpiresAt = *expires
		}
		if ttl != nil {
			r.TTL = time.Duration(math.Round(*ttl * float64(time.Second)))
		}
		return nil
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return LockRecord{}, nil
	}
	return r, err
}

// Acquire takes the key for ttl if no one holds it live and its lease is
// still as read (Read's record: its term and expiry; a zero LockRecord: the
// key was never held): true when taken, with the tenure in Lease(). False
// when another holds it; ErrLockChanged when the lease changed since (a
// tenure began, the holder renewed or released): both leave no tenure.
// Acquiring a key this identity holds live (an answer that was lost)
// extends that tenure and returns it. A release under this identity that
// heard no answer is sent again first.
func (l *Lock) Acquire(ctx context.Context, ttl time.Duration, as LockRecord) (bool, error) {
	if ttl <= 0 {
		return false, badArgument("ttl must be positive")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lease != nil && l.lease.Check() == nil {
		return false, badArgument("the Lock holds a tenure already: renew it")
	}
	l.stopped = false
	l.e.ttl, l.e.margin = ttl, ttl/200
	var wantTerm *int64
	var wantExpiry *time.Time
	if as.Exists {
		wantTerm, wantExpiry = &as.Term, &as.ExpiresAt
	}
	var won, changed bool
	var term int64
	var start time.Time
	err := l.call(ctx, func(ctx context.Context, c *pgx.Conn) error {
		if free, err := l.e.releaseAgain(ctx, c); err != nil || !free {
			return err // (a lost release's tenure still held: not now)
		}
		start = time.Now()
		by := start.Add(l.e.callTimeout())
		row, cancel := l.e.call(ctx, c, by, sqlLockAcquire, l.e.cfg.Key, l.e.cfg.Identity, ttl.Seconds(),
			wantTerm, wantExpiry)
		err := row.Scan(&won)
		cancel()
		if errors.Is(err, pgx.ErrNoRows) {
			changed = true
			return nil
		}
		if err != nil || !won {
			return err
		}
		row, cancel = l.e.call(ctx, c, by, sqlTermOf, l.e.cfg.Key, l.e.cfg.Identity)
		err = row.Scan(&term)
		cancel()
		if errors.Is(err, pgx.ErrNoRows) { // taken from us at once
			won = false
			return nil
		}
		return err
	})
	if err != nil {
		// (an answer lost may leave the tenure granted: a later Acquire
		// gets it back, or it lapses at its ttl)
		return false, err
	}
	if changed {
		return false, ErrLockChanged
	}
	if !won {
		return false, nil
	}
	deadline := start.Add(ttl - ttl/200)
	if !time.Now().Before(deadline) {
		return false, nil // too late to act on: it lapses
	}
	t := newTenure(context.Background(), deadline)
	l.lease = &Lease{Key: l.e.cfg.Key, Identity: l.e.cfg.Identity, Term: term, t: t, ext: l.e.ext}
	l.watchdog = time.AfterFunc(time.Until(deadline), t.expireIfDue)
	l.e.logf("leading in term %d", term)
	return true, nil
}

// Renew renews the tenure held for ttl (le_renew with its term), within
// the call timeout and never past the local deadline: true when renewed
// (the deadline moves to the send time + ttl - ttl/200). False when there
// is no tenure, it has ended (its deadline passed, it was released), or
// the server refused (another holds the key now): the tenure ends then. An
// error leaves the tenure as it was (its deadline still runs).
func (l *Lock) Renew(ctx context.Context, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		return false, badArgument("ttl must be positive")
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lease == nil || l.lease.Check() != nil {
		return false, nil
	}
	t, term := l.lease.t, l.lease.Term
	l.e.ttl, l.e.margin = ttl, ttl/200
	start := time.Now()
	_, _, deadline := t.state()
	by := start.Add(l.e.callTimeout())
	if by.After(deadline) {
		by = deadline
	}
	var ok bool
	err := l.call(ctx, func(ctx context.Context, c *pgx.Conn) error {
		var err error
		ok, err = scanBool(ctx, l.e, c, by, sqlRenew, l.e.cfg.Key, l.e.cfg.Identity, ttl.Seconds(), term)
		return err
	})
	if err != nil {
		if permanent(err) {
			t.end(StopFailed, err)
		}
		return false, err
	}
	if !ok {
		t.end(StopRefused, nil)
		l.e.logf("stopped leading term %d: %s", term, StopRefused)
		return false, nil
	}
	d, extended := t.extend(start, ttl-ttl/200)
	if !extended {
		return false, nil // the deadline passed meanwhile: the loss stands
	}
	l.watchdog.Reset(time.Until(d))
	return true, nil
}

// Release ends the tenure held: locally first (Check fails, its context
// ends; see Stop), then le_release with its term, on the lock's connection or a new
// one, within max(100 ms, ttl/3). A release that heard no answer is sent
// again before the next Acquire under this identity (by any Lock or
// Elector of this process); the lease lapses at its ttl otherwise. No
// tenure, or one that has ended: nil.
func (l *Lock) Release(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lease == nil {
		return nil
	}
	lease := l.lease
	l.watchdog.Stop()
	reason, _, deadline := lease.t.state()
	lease.t.end(StopShutdown, context.Canceled)
	owed := reason == 0 || (reason == StopShutdown && l.stopped)
	l.stopped = false
	if !owed || !time.Now().Before(deadline) {
		return nil // lost, released or lapsed already: nothing of ours to release
	}
	term := lease.Term
	err := l.e.release(l.conn, &term)
	if l.conn != nil && l.conn.IsClosed() {
		l.conn = nil
	}
	if err != nil {
		l.e.logf("release failed (%v): the lease lapses at its ttl", err)
		return err
	}
	l.e.logf("stopped leading term %d: released", term)
	return nil
}

// Stop ends the tenure held locally (Check fails, its context ends, a
// Renew is refused) and keeps its release for Release, which sends it
// while the local deadline has not passed: the caller stops its work
// first, then hands the key over.
func (l *Lock) Stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lease == nil {
		return
	}
	if reason, _, _ := l.lease.t.state(); reason == 0 {
		l.lease.t.end(StopShutdown, context.Canceled)
		l.stopped = true
	}
}

// Lease returns the tenure this Lock holds or held last (its Check tells
// whether it still does: not after a loss, its deadline or Release), and
// whether there is one.
func (l *Lock) Lease() (Lease, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lease == nil {
		return Lease{}, false
	}
	return *l.lease, true
}

// Close ends the tenure held locally (without a release: it lapses at its
// ttl) and closes the connection.
func (l *Lock) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lease != nil {
		l.watchdog.Stop()
		l.lease.t.end(StopShutdown, context.Canceled)
	}
	if l.conn != nil {
		l.conn.Close(context.Background())
		l.conn = nil
	}
	l.closed = true
}
