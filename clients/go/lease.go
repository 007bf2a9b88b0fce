package leaderlock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgconn"
	"github.com/jackc/pgx/v4"
)

// In the caller's transaction (Guard), with the schema its lease's connections found.
const sqlAssertLeader = "SELECT @extschema@.le_assert_leader(key => $1, id => $2, term => $3)"

// tenure is one term of leadership: its local deadline, and why it ended.
type tenure struct {
	parent context.Context // Run's
	mu     sync.Mutex
	// deadline: the send time of the last successful acquire or renewal
	// (monotonic clock) + ttl - ttl/200.
	deadline time.Time
	reason   StopReason // 0 while the tenure lasts
	cause    error
	done     chan struct{}
}

func newTenure(parent context.Context, deadline time.Time) *tenure {
	return &tenure{parent: parent, deadline: deadline, done: make(chan struct{})}
}

// endLocked ends the tenure for reason, unless it has ended already.
func (t *tenure) endLocked(reason StopReason, cause error) {
	if t.reason == 0 {
		t.reason, t.cause = reason, cause
		close(t.done)
	}
}

func (t *tenure) end(reason StopReason, cause error) {
	t.mu.Lock()
	t.endLocked(reason, cause)
	t.mu.Unlock()
}

// check is nil while the tenure lasts; it reads the clock on every call,
// so no goroutine, timer or select order can make it late.
func (t *tenure) check() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reason == 0 {
		if err := t.parent.Err(); err != nil {
			t.endLocked(StopShutdown, err)
		} else if !time.Now().Before(t.deadline) {
			t.endLocked(StopDeadline, nil)
		}
	}
	switch t.reason {
	case 0:
		return nil
	case StopShutdown:
		if err := t.parent.Err(); err != nil {
			return err
		}
		return context.Canceled
	}
	return &LostError{Reason: t.reason, Err: t.cause}
}

// extend moves the deadline after a renewal sent at start succeeded,
// unless the tenure has ended or its deadline passed meanwhile (then the
// loss stands). It returns the new deadline, or false.
func (t *tenure) extend(start time.Time, by time.Duration) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reason == 0 && !time.Now().Before(t.deadline) {
		t.endLocked(StopDeadline, nil)
	}
	if t.reason != 0 {
		return time.Time{}, false
	}
	t.deadline = start.Add(by)
	return t.deadline, true
}

// expireIfDue ends the tenure if its deadline has passed (the watchdog).
func (t *tenure) expireIfDue() {
	t.mu.Lock()
	if t.reason == 0 && !time.Now().Before(t.deadline) {
		t.endLocked(StopDeadline, nil)
	}
	t.mu.Unlock()
}

func (t *tenure) state() (StopReason, error, time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reason, t.cause, t.deadline
}

// leaseContext is the context OnStartedLeading gets: Done closes at a loss,
// at the local deadline and when Run's context ends; Err compares the
// clock with the deadline on every call.
type leaseContext struct{ t *tenure }

func (c leaseContext) Deadline() (time.Time, bool)       { return c.t.parent.Deadline() }
func (c leaseContext) Done() <-chan struct{}             { return c.t.done }
func (c leaseContext) Err() error                        { return c.t.check() }
func (c leaseContext) Value(key interface{}) interface{} { return c.t.parent.Value(key) }

// Lease is the leadership OnStartedLeading holds.
type Lease struct {
	Key, Identity string
	// Term is the fencing token: Guard passes it to le_assert_leader in
	// your transaction; pass it to other systems with each write.
	Term int64
	// Value is Config.Value, announced with this leadership.
	Value interface{}
	t     *tenure
	ext   *extSchema
}

// Check returns nil while this process may act as leader: the lease is
// live by the local clock (read on each call: a process paused past its
// deadline sees the loss on its first call after it resumes, whatever its
// timers and goroutines do) and Run's context is not done. Else an error
// matching ErrLeaseLost (a *LostError), or Run's context's error on
// shutdown. Call it (or the context's Err) before each unit of work.
func (l Lease) Check() error {
	if l.t == nil {
		return &LostError{Reason: StopRefused, Err: errors.New("not a lease from OnStartedLeading")}
	}
	return l.t.check()
}

// Valid is Check() == nil.
func (l Lease) Valid() bool { return l.Check() == nil }

// Deadline is the local deadline now: renewals move it forward.
func (l Lease) Deadline() time.Time {
	if l.t == nil {
		return time.Time{}
	}
	_, _, d := l.t.state()
	return d
}

// Guard fences a write: call it in the transaction that makes the leader's
// writes, before them. It checks the local deadline, then runs
// le_assert_leader(key, id, term) in tx, which takes a share lock on the
// lease until tx ends: no other candidate's acquisition can commit before
// tx does, so tx commits only while this lease is held. When the server
// says another leads (LE001) the tenure ends (OnStartedLeading's context
// is cancelled) and Guard returns an error matching ErrLeaseLost: roll tx
// back. Keep guarded transactions shorter than ttl/3 (a renewal waits
// for them no longer than that). tx is in the database the Elector's
// connections go to: le_assert_leader is called in the schema they found.
func (l Lease) Guard(ctx context.Context, tx pgx.Tx) error {
	if err := l.Check(); err != nil {
		return err
	}
	var term int64
	err := tx.QueryRow(ctx, l.ext.sql(sqlAssertLeader), l.Key, l.Identity, l.Term).Scan(&term)
	if err == nil {
		return nil
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == sqlstateNotLeader {
		l.t.end(StopRefused, err)
		return &LostError{Reason: StopRefused, Err: err}
	}
	return classify(nil, err)
}
