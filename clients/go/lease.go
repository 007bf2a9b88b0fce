package leaderlock

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// In the caller's transaction (Guard), with the schema its lease's connections found.
const sqlAssertLeader = "SELECT @extschema@.le_assert_leader(key => $1, id => $2, term => $3)"

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

// Context returns a context that ends when parent ends or when this
// tenure does (a loss, the local deadline, a release): its Done is closed
// by a timer then (late after a pause of the process), and its Err reads
// the clock on every call, as OnStartedLeading's context does; check Err
// before each unit of work. Call cancel when done with it.
func (l Lease) Context(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(parent)
	if l.t == nil {
		cancel()
		return ctx, cancel
	}
	go func() {
		select {
		case <-l.t.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return tenureContext{ctx, l.t}, cancel
}

// tenureContext is parent's context, whose Err is the tenure's first.
type tenureContext struct {
	context.Context
	t *tenure
}

func (c tenureContext) Err() error {
	if err := c.t.check(); err != nil {
		return err
	}
	return c.Context.Err()
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
