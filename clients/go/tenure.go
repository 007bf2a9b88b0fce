package leaderlock

// A tenure is one term of holding something on the server: a lease
// (Elector.lead), a run's claim (loop.runOne), a session (Session.renew).
// Each keeps a local deadline on the monotonic clock (the send time of the
// last successful call + ttl - ttl/200), renews every ttl/3 (each call
// bounded by ttl/3 and by the deadline; on a new connection after a
// failure, while time is left), stops acting when the deadline passes
// (check, read synchronously before each side effect: a timer alone is
// late after a pause; the watchdog timer closes Done too), and reports its
// loss. This file is that, once: the tenure (its state) and its renewal
// (the renewing goroutine's). What differs stays with each caller and is
// passed in (renewing): the statement sent, what a refusal means, the
// words of the log lines; a group's member (group.go) also waits on its
// connection for hints between renewals, and reads what each one answered.

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// tenure is the state of one tenure, which any goroutine reads: its local
// deadline, and why it ended. Lease, ScheduledRun and Session hold it.
type tenure struct {
	parent context.Context // Run's, Schedule's; a session's: context.Background()
	mu     sync.Mutex
	// deadline: the send time of the last successful call (acquire, claim,
	// open, renewal; monotonic clock) + ttl - ttl/200.
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

// leaseContext is the context of a tenure (OnStartedLeading's, a RunFunc's,
// a session's calls): Done closes at a loss, at the local deadline and
// when the parent context ends; Err compares the clock with the deadline
// on every call.
type leaseContext struct{ t *tenure }

func (c leaseContext) Deadline() (time.Time, bool)       { return c.t.parent.Deadline() }
func (c leaseContext) Done() <-chan struct{}             { return c.t.done }
func (c leaseContext) Err() error                        { return c.t.check() }
func (c leaseContext) Value(key interface{}) interface{} { return c.t.parent.Value(key) }

// renewing is what differs between the tenures that renew, given by the
// caller.
type renewing struct {
	// conn is the caller's connection (nil: connect first); a failed
	// renewal closes it and sets it to nil.
	conn **pgx.Conn
	// call sends one renewal on c, bounded by by; ctx is the tenure's (the
	// call ends with it). True when renewed, false when refused.
	call func(ctx context.Context, c *pgx.Conn, by time.Time) (bool, error)
	// refused: what a renewal answered false means. It ends the tenure, or
	// looks further (with r.by, r.fail, r.drop, r.retry, r.left).
	refused func()
	// logf gets the lines of a failed reconnection or renewal (while the
	// tenure lasts), renew and renewal naming it there: "cannot reconnect
	// to <renew> (...)", "<renewal> failed (...)".
	logf           func(format string, args ...interface{})
	renew, renewal string
	// renewed, when not nil, is called after a renewal moved the deadline.
	renewed func()
	// idle, when not nil, waits on the open connection c between
	// renewals: until due, or until ctx (the tenure's) ends; true when a
	// hint asks for the next renewal sooner, an error when c failed. The
	// renewal comes no sooner than soonest after the last one's start.
	idle    func(ctx context.Context, c *pgx.Conn, due time.Time) (bool, error)
	soonest time.Duration
}

// renewal runs a tenure: its watchdog, its renewals every ttl/3 (in the
// goroutine that calls run), and its end when the parent context ends.
type renewal struct {
	e                   *Elector        // ttl, margin, timeouts, connections
	t                   *tenure         // the state, shared
	ctx                 context.Context // leaseContext{t}: calls end with the tenure
	watchdog, wait      *time.Timer     // the local deadline's; the next renewal
	how                 renewing
	failure             error     // a refusal for good: it ended the tenure
	start, by, deadline time.Time // the last step's start, call bound, and deadline then
	due                 time.Time // when the next step is (the wait timer's)
}

// startTenure starts the tenure a call sent at sent won (an acquire, a
// claim, an open): its deadline sent + ttl - ttl/200, enforced by the
// watchdog as well as read by check; its end (StopShutdown) when parent
// ends; its first renewal at sent + ttl/3, made by run.
func (e *Elector) startTenure(parent context.Context, sent time.Time) *renewal {
	deadline := sent.Add(e.ttl - e.margin)
	t := newTenure(parent, deadline)
	r := &renewal{e: e, t: t, ctx: leaseContext{t}, start: sent, due: sent.Add(e.ttl / 3),
		watchdog: time.AfterFunc(time.Until(deadline), t.expireIfDue)}
	r.wait = time.NewTimer(time.Until(r.due))
	if parent.Done() != nil {
		go func() {
			select {
			case <-parent.Done():
				t.end(StopShutdown, parent.Err())
			case <-t.done:
			}
		}()
	}
	return r
}

// run renews the tenure until it ends (lost, past its deadline, shut
// down) or quit closes (nil: never), then stops its timers. A refusal for
// good that ended it is r.failure.
func (r *renewal) run(how renewing, quit <-chan struct{}) {
	r.how = how
	defer r.watchdog.Stop()
	defer r.wait.Stop()
	for {
		if how.idle != nil && *how.conn != nil {
			r.idle(quit)
		}
		select {
		case <-quit: // the caller is done with the tenure
			return
		case <-r.t.done: // no renewal
		case <-r.wait.C:
		}
		if r.t.check() != nil {
			return
		}
		if r.step() {
			how.refused()
		}
	}
}

// step renews once, reconnecting first if need be: a success moves the
// deadline and the watchdog and renews again ttl/3 after the start, a
// failure drops the connection and retries after retryEvery, a refusal
// for good ends the tenure (StopFailed). True when the server refused the
// renewal (answered false): refused decides what that means.
func (r *renewal) step() bool {
	e, t, conn := r.e, r.t, r.how.conn
	r.start = time.Now()
	_, _, r.deadline = t.state()
	if *conn == nil {
		c, err := e.connect(r.ctx)
		if err == nil {
			*conn = c
		} else if err = classify(nil, err); permanent(err) {
			r.fail(err)
			return false
		} else {
			r.how.logf("cannot reconnect to %s (%v); %v to the local deadline", r.how.renew, err, r.left())
			r.retry()
			return false
		}
	}
	// one call may take ttl/3 at most (then reconnect and retry), never
	// past the deadline; the watchdog does not wait for it either way
	r.by = r.start.Add(e.callTimeout())
	if r.by.After(r.deadline) {
		r.by = r.deadline
	}
	ok, err := r.how.call(r.ctx, *conn, r.by)
	switch {
	case err != nil:
		if err = classify(*conn, err); permanent(err) {
			r.fail(err)
			return false
		}
		if t.check() == nil {
			r.how.logf("%s failed (%v); retrying on a new connection, %v to the local deadline",
				r.how.renewal, err, r.left())
		}
		r.drop()
		r.retry()
	case ok:
		if d, extended := t.extend(r.start, e.ttl-e.margin); extended {
			r.watchdog.Reset(time.Until(d))
			r.at(r.start.Add(e.ttl / 3))
			if r.how.renewed != nil {
				r.how.renewed()
			}
		} // else the deadline passed meanwhile: the loss stands
	default:
		return true
	}
	return false
}

// fail ends the tenure with a refusal for good.
func (r *renewal) fail(err error) {
	r.failure = err
	r.t.end(StopFailed, err)
}

// retry renews again retryEvery after the step's start.
func (r *renewal) retry() { r.at(r.start.Add(r.e.retryEvery())) }

// at makes the next step due at due.
func (r *renewal) at(due time.Time) {
	r.due = due
	r.wait.Reset(time.Until(due))
}

// idle lets how.idle wait on the connection until the next step is due,
// the tenure ends or quit closes; a hint brings the step forward, to
// how.soonest after the last step's start at the earliest. A failed
// connection is dropped: the step makes a new one.
func (r *renewal) idle(quit <-chan struct{}) {
	ctx, cancel := context.WithCancel(r.ctx)
	defer cancel()
	if quit != nil {
		go func() {
			select {
			case <-quit:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	for ctx.Err() == nil && time.Now().Before(r.due) {
		hint, err := r.how.idle(ctx, *r.how.conn, r.due)
		if err != nil {
			if r.t.check() == nil {
				r.how.logf("the connection failed (%v); a new one at the next %s", err, r.how.renewal)
			}
			r.drop()
			return
		}
		if soonest := r.start.Add(r.how.soonest); hint && soonest.Before(r.due) {
			if now := time.Now(); soonest.Before(now) {
				soonest = now
			}
			r.at(soonest)
		}
	}
}

// drop closes the connection: the next step makes a new one.
func (r *renewal) drop() {
	(*r.how.conn).Close(context.Background())
	*r.how.conn = nil
}

// left is the time to the step's deadline, for logs.
func (r *renewal) left() time.Duration { return time.Until(r.deadline).Round(time.Millisecond) }
