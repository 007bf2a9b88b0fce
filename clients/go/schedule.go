package leaderlock

// Scheduled runs (contract 22): a job that every replica schedules alike
// and that runs once per due instant, on one of them. The loop is the Rust
// client's Scheduler (crates/client/src/schedule.rs), the reference: read
// the server's lease clock (le_now()), make every due instant up to it
// pending, claim the pending ones, watch those another replica claimed
// (claimed again if their claim lapses unfinished), and run a claimed one
// with the guarantees of a lease: renewed every ttl/3, a local deadline on
// the monotonic clock, and its outcome recorded. Without Every or Cron the
// due instants are the job's schedule kept in the database (contract 24,
// le_schedule), read from the server (le_next_due) as the Rust client's
// Schedule::registered().

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/robfig/cron/v3"
)

// One round trip each, bind parameters, arguments by name (as the Rust
// client's sql.rs); every name qualified (schema.go).
const (
	sqlLeNow = "SELECT @extschema@.le_now()"
	// $5 NULL: no misfire grace
	sqlClaimRun = "SELECT @extschema@.le_claim_run(job => $1, due => $2, id => $3, " +
		"ttl => pg_catalog.make_interval(secs => $4), misfire_grace => pg_catalog.make_interval(secs => $5))"
	sqlRenewRun = "SELECT @extschema@.le_renew_run(job => $1, due => $2, id => $3, " +
		"ttl => pg_catalog.make_interval(secs => $4), term => $5)"
	sqlFinishRun = "SELECT @extschema@.le_finish_run(job => $1, due => $2, id => $3, " +
		"term => $4, succeeded => $5, detail => $6)"
	// After a refused claim, what the run is now: finished (or missed), how
	// long until its live claim ends (NULL: none live), its outcome.
	sqlRunState = "SELECT r.finished_at IS NOT NULL, " +
		"CASE WHEN r.holder IS NOT NULL AND r.expires_at OPERATOR(pg_catalog.>) n.now " +
		"THEN extract(epoch FROM r.expires_at OPERATOR(pg_catalog.-) n.now)::pg_catalog.float8 END, r.outcome " +
		"FROM @extschema@.leaderlock_runs r, (SELECT @extschema@.le_now() AS now) n " +
		"WHERE r.job OPERATOR(pg_catalog.=) $1 AND r.due OPERATOR(pg_catalog.=) $2"
	// A registered schedule's first due instant strictly after $2 (NULL: no
	// schedule, or paused), and its misfire grace in seconds.
	// The next due instant after $2, the misfire grace, and the missed
	// instants the schedule's backfill lets run late (oldest first).
	sqlNextDue = "SELECT @extschema@.le_next_due(job => $1, after => $2), " +
		"(SELECT pg_catalog.date_part('epoch'::pg_catalog.text, s.misfire_grace) " +
		"FROM @extschema@.leaderlock_schedules s WHERE s.job OPERATOR(pg_catalog.=) $1), " +
		"ARRAY(SELECT @extschema@.le_backfill_due(job => $1))"
)

const (
	// raceRetry: how soon to try again a run whose claim raced another, or
	// whose row a refused claim did not find.
	raceRetry = 20 * time.Millisecond
	// absentTries: a run whose row a refused claim cannot find this many
	// times in a row is dropped: older than the retention (a row that races
	// a first claim appears within a few tries).
	absentTries = 100
	// fastTries: looks again every raceRetry this many times before backing off.
	fastTries = 10
	// detailLimit: le_finish_run's detail, in bytes.
	detailLimit = 1000
	// cronMisfireGrace: the default misfire grace of a Cron schedule (the
	// CLI's).
	cronMisfireGrace = 5 * time.Minute
	// dueLayout: how due instants are written in logs (UTC, microseconds).
	dueLayout = "2006-01-02T15:04:05.000000Z"
)

// ScheduleConfig of a Scheduler: the job, when it is due (Every or Cron;
// neither: the job's schedule kept in the database), and how long a claim
// lasts.
type ScheduleConfig struct {
	ConnString string // libpq-style DSN or URL (pgx)
	// Job names the job (1 to 255 bytes): every replica that schedules it
	// under this name shares its runs.
	Job      string
	Identity string // this replica's id; default host:pid:random
	// Every: a run at every multiple of Every since the Unix epoch, so that
	// every replica (and every client) computes the same instants. Whole
	// milliseconds, at least 1 ms. Neither Every nor Cron: the job's
	// schedule kept in the database (le_schedule, contract 24) is run, each
	// due instant read from the server (le_next_due), so that a change or
	// a pause (le_pause_schedule) is followed within Poll, without a
	// restart; its misfire grace is the schedule's (leave TimeZone and
	// MisfireGrace unset). While the job has no schedule, or it is paused,
	// nothing is claimed, and it is looked at again every Poll.
	Every time.Duration
	// Cron: five fields (minute hour day-of-month month day-of-week), or
	// six with seconds first, read in TimeZone; parsed by
	// github.com/robfig/cron/v3. Days of the week by name only (MON-FRI,
	// SUN: cron implementations number them differently), and not both
	// day-of-month and day-of-week restricted (they combine them
	// differently), so that every client reads an expression alike. Across
	// a daylight saving change a local time that does not exist is
	// skipped, and one that occurs twice is due once, at the first (the
	// Rust client's rule).
	Cron string
	// TimeZone of Cron: an IANA name (Europe/Paris); default UTC. Go reads
	// the zone database of the host (or of time/tzdata if the program
	// imports it).
	TimeZone string
	// TTL: length of a claim, renewed every ttl/3 while the run goes on;
	// default 10 s.
	TTL time.Duration
	// MisfireGrace: a run not claimed within this time after its due
	// instant is not run, and recorded missed (once); also how far back a
	// Scheduler that starts looks for a run due before it started. Zero:
	// the default, the period with Every (a run not started before the next
	// one is due is missed) and 5 minutes with Cron, as the CLI's.
	// Negative: no limit (and no look back). A schedule kept in the
	// database has its own.
	MisfireGrace time.Duration
	// Poll: how often to look at a run another replica has claimed (it is
	// claimed again if that claim lapses unfinished), and at a schedule
	// kept in the database; default 1 s.
	Poll time.Duration
	// Logf, when not nil, gets one line per event worth an operator's
	// attention: each run claimed and finished, runs settled elsewhere,
	// reconnections, failed renewals, a lost claim, a refusal for good.
	Logf func(format string, args ...interface{})
	// Schema names the schema that holds leaderlock's functions, as
	// Config.Schema; default the environment variable LEADERLOCK_SCHEMA.
	Schema string
}

// RunFunc runs one due run. Its context ends when the run is lost (a
// renewal refused), at the local deadline, and when Schedule's context is
// done; its Err() reads the clock on every call. Check run.IsOurs() (or
// ctx.Err()) right before each side effect. Its error is the run's
// outcome: nil records it succeeded, an error failed, with the error's
// text as the detail (at most 1000 bytes).
type RunFunc func(ctx context.Context, run *ScheduledRun) error

// ScheduledRun is a run this replica claimed: act for it only while
// IsOurs.
type ScheduledRun struct {
	Job, Identity string
	// Due is the run's due instant, on the server's lease clock (UTC).
	Due time.Time
	// Term is the claim's fencing term: above every earlier claim of any
	// run of the job. Pass it with each side effect to systems that refuse
	// lower ones.
	Term int64
	t    *tenure
}

// IsOurs reports whether this replica may still act for the run: the
// claim is live by the local clock (read on each call, on the monotonic
// clock: a process paused past the deadline sees the loss on its first
// call after it resumes), no renewal was refused, and Schedule's context
// is not done. Check it right before every side effect.
func (r *ScheduledRun) IsOurs() bool { return r.Check() == nil }

// Check is nil while IsOurs; else an error matching ErrLeaseLost (a
// *LostError: StopRefused when a renewal was refused, StopDeadline when
// the local deadline passed, StopFailed when a renewal was rejected for
// good), or Schedule's context's error on shutdown (context.Canceled once
// the callback has returned).
func (r *ScheduledRun) Check() error {
	if r == nil || r.t == nil {
		return &LostError{Reason: StopRefused, Err: errors.New("not a run from a Scheduler")}
	}
	return r.t.check()
}

// Deadline is the run's local deadline now: the send time of the claim or
// of its last successful renewal + ttl - ttl/200. Renewals move it.
func (r *ScheduledRun) Deadline() time.Time {
	if r == nil || r.t == nil {
		return time.Time{}
	}
	_, _, d := r.t.state()
	return d
}

// Scheduler runs a job's due runs; see Schedule.
type Scheduler struct {
	cfg      ScheduleConfig
	e        *Elector // connection settings, ttl and margin, backoff, Logf
	every    time.Duration
	cron     *cron.SpecSchedule
	loc      *time.Location
	grace    *float64 // seconds; nil: no limit (or, registered, the schedule's)
	lookback time.Duration
	// registered: the job's schedule kept in the database (neither Every
	// nor Cron)
	registered bool
}

// NewScheduler checks the configuration; its errors match ErrBadArgument.
func NewScheduler(cfg ScheduleConfig) (*Scheduler, error) {
	if cfg.Job == "" {
		return nil, badArgument("Job must not be empty")
	}
	if cfg.TTL < 0 || cfg.Poll < 0 {
		return nil, badArgument("TTL and Poll must be positive")
	}
	if cfg.Poll == 0 {
		cfg.Poll = time.Second
	}
	s := &Scheduler{}
	switch {
	case cfg.Every != 0 && cfg.Cron != "":
		return nil, badArgument("give Every or Cron, not both")
	case cfg.Every != 0:
		if cfg.Every < time.Millisecond || cfg.Every%time.Millisecond != 0 {
			return nil, badArgument("Every must be whole milliseconds, at least 1ms (got %v)", cfg.Every)
		}
		if cfg.TimeZone != "" {
			return nil, badArgument("TimeZone applies to Cron only")
		}
		s.every = cfg.Every
	case cfg.Cron != "":
		spec, loc, err := parseCron(cfg.Cron, cfg.TimeZone)
		if err != nil {
			return nil, err
		}
		s.cron, s.loc = spec, loc
	default:
		if cfg.TimeZone != "" || cfg.MisfireGrace != 0 {
			return nil, badArgument("a schedule kept in the database (neither Every nor Cron) has its own TimeZone and MisfireGrace")
		}
		s.registered = true
	}
	grace := cfg.MisfireGrace
	if grace == 0 && !s.registered {
		grace = cfg.Every
		if s.cron != nil {
			grace = cronMisfireGrace
		}
	}
	if grace > 0 {
		secs := grace.Seconds()
		s.grace, s.lookback = &secs, grace
	}
	e, err := NewElector(Config{ConnString: cfg.ConnString, Key: cfg.Job, Identity: cfg.Identity, TTL: cfg.TTL, Logf: cfg.Logf,
		Schema: cfg.Schema})
	if err != nil {
		return nil, err
	}
	cfg.Identity, cfg.TTL, cfg.Schema = e.cfg.Identity, e.ttl, e.cfg.Schema
	s.cfg, s.e = cfg, e
	return s, nil
}

// Schedule is NewScheduler(cfg) and its Run.
func Schedule(ctx context.Context, cfg ScheduleConfig, fn RunFunc) error {
	s, err := NewScheduler(cfg)
	if err != nil {
		return err
	}
	return s.Run(ctx, fn)
}

// pendingRun is a due run not settled yet: when to look at it again, and
// how often its row was not found.
type pendingRun struct {
	due   time.Time
	at    time.Time
	tries int
}

// turn is what next found: a run claimed (claimed, its term and when the
// claim was sent), or settled elsewhere (its outcome; "" if its row is
// gone).
type turn struct {
	due     time.Time
	claimed bool
	term    int64
	sent    time.Time
	outcome string
}

// loop is one Run's state: its connection, the next due instant not yet
// looked at (registered: the last one made pending), and the pending runs.
type loop struct {
	s       *Scheduler
	conn    *pgx.Conn
	started bool // cursor is set
	more    bool // the schedule has instants from cursor on
	cursor  time.Time
	pending map[int64]*pendingRun // by due instant, in microseconds
	absent  int8                  // a schedule kept in the database: 0 not looked at, 1 found, 2 absent or paused (told)
}

func (l *loop) drop() {
	if l.conn != nil {
		// (closed already when a call was cancelled)
		l.conn.Close(context.Background())
		l.conn = nil
	}
}

// Run runs the job's due runs until ctx is done, one at a time: fn runs
// in its own goroutine for each run this replica claims, while this one
// renews the claim every ttl/3; once fn has returned, its outcome is
// recorded (tried even past the deadline, and after ctx is done) and the
// loop goes on, whatever fn returned. While no run is ours, the due runs
// are claimed as they come (on the server's lease clock), and runs other
// replicas claimed are watched until they finish (claimed again if their
// claim lapses unfinished). A lost connection or an unreachable server is
// retried with jittered backoff (see Logf); a refusal for good (no
// extension, no privilege, a bad job name or id) ends Run with an *Error
// (errors.Is(err, ErrRejected)). Otherwise Run returns nil when ctx is
// done, once fn has returned. One Run at a time per Scheduler.
func (s *Scheduler) Run(ctx context.Context, fn RunFunc) error {
	if fn == nil {
		return badArgument("fn must not be nil")
	}
	l := &loop{s: s, more: true, pending: map[int64]*pendingRun{}}
	defer l.drop()
	bo := &backoff{e: s.e}
	for ctx.Err() == nil {
		tn, err := l.next(ctx)
		if err == nil {
			bo.reset()
			if !tn.claimed {
				outcome := tn.outcome
				if outcome == "" {
					outcome = "gone"
				}
				s.e.logf("run due %s settled elsewhere: %s", tn.due.Format(dueLayout), outcome)
				continue
			}
			if err := l.runOne(ctx, tn, fn); err != nil {
				return err
			}
			continue
		}
		if ctx.Err() != nil {
			return nil
		}
		if err = classify(l.conn, err); permanent(err) {
			s.e.logf("%v", err)
			return err
		}
		l.drop()
		d := bo.next()
		s.e.logf("cannot reach the server (%v); trying again in %v", err, d.Round(time.Millisecond))
		if sleepCtx(ctx, d) != nil {
			return nil
		}
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// next waits until a run is due and settled or claimed.
func (l *loop) next(ctx context.Context) (turn, error) {
	s := l.s
	for {
		if err := ctx.Err(); err != nil {
			return turn{}, err
		}
		if l.conn != nil && l.conn.IsClosed() {
			l.drop()
		}
		if l.conn == nil {
			c, err := s.e.connect(ctx)
			if err != nil {
				return turn{}, err
			}
			l.conn = c
		}
		var now time.Time
		row, cancel := s.e.call(ctx, l.conn, time.Now().Add(s.e.callTimeout()), sqlLeNow)
		err := row.Scan(&now)
		cancel()
		if err != nil {
			return turn{}, err
		}
		now = now.UTC()
		here := time.Now()
		// the next due instant after now (none: false), and how long to
		// sleep at most before reading the server's clock again
		var upcoming time.Time
		var more bool
		most := 10 * time.Second
		if s.registered {
			// Read again every poll: a change or a pause is followed
			// without a restart.
			if upcoming, more, err = l.makeRegisteredPending(ctx, now, here); err != nil {
				return turn{}, err
			}
			most = s.cfg.Poll
		} else {
			if !l.started {
				c, ok := s.atOrAfter(now.Add(-s.lookback))
				if !ok {
					return turn{}, badArgument("the schedule has no due instant")
				}
				l.cursor, l.started = c, true
			}
			for l.more && !l.cursor.After(now) {
				l.makePending(l.cursor, here)
				c, ok := s.NextAfter(l.cursor)
				l.cursor, l.more = c, ok
			}
			upcoming, more = l.cursor, l.more
		}
		var ready *pendingRun // the earliest due run ready to be looked at
		for _, p := range l.pending {
			if !p.at.After(here) && (ready == nil || p.due.Before(ready.due)) {
				ready = p
			}
		}
		if ready == nil {
			// Wake at the next due instant or the next look, whichever
			// comes first; read the server's clock again then.
			wait := most
			if d := upcoming.Sub(now); more && d < wait {
				wait = d
			}
			for _, p := range l.pending {
				if d := p.at.Sub(here); d < wait {
					wait = d
				}
			}
			if err := sleepCtx(ctx, wait); err != nil {
				return turn{}, err
			}
			continue
		}
		tn, done, err := l.lookAt(ctx, ready)
		if err != nil || done {
			return tn, err
		}
	}
}

// makePending makes the run due at due pending, unless it is already.
func (l *loop) makePending(due time.Time, here time.Time) {
	k := due.UnixMicro()
	if _, ok := l.pending[k]; !ok {
		l.pending[k] = &pendingRun{due: due, at: here}
	}
}

// makeRegisteredPending makes pending every due instant up to now of the
// job's schedule kept in the database, read from the server: after the
// last one made pending (l.cursor), or at the start after now less the
// schedule's misfire grace; the next one after now. False while the job
// has no schedule or it is paused: then looked at from the start again,
// so that no instant of the pause is ever claimed past its grace. Never
// from further back than one grace (the server refuses those claims): a
// change to a shorter period does not make pending every instant of the
// new schedule since the last one.
func (l *loop) makeRegisteredPending(ctx context.Context, now, here time.Time) (time.Time, bool, error) {
	s, e := l.s, l.s.e
	from, have := l.cursor, l.started
	for {
		after := now
		if have {
			after = from
		}
		var next *time.Time
		var grace *float64
		var late []time.Time
		row, cancel := e.call(ctx, l.conn, time.Now().Add(e.callTimeout()), sqlNextDue, s.cfg.Job, after)
		err := row.Scan(&next, &grace, &late)
		cancel()
		if err != nil {
			return time.Time{}, false, err
		}
		// Missed instants the backfill lets run late: claimed as any due
		// run (the server decides, each once).
		for _, due := range late {
			l.makePending(due.UTC(), here)
		}
		if next == nil {
			l.started = false
			if l.absent != 2 {
				e.logf("job %q has no schedule in the database, or it is paused: nothing runs until "+
					"le_schedule or le_resume_schedule", s.cfg.Job)
				l.absent = 2
			}
			return time.Time{}, false, nil
		}
		if l.absent == 2 {
			e.logf("job %q: its schedule in the database runs again", s.cfg.Job)
		}
		l.absent = 1
		back := time.Duration(0)
		if grace != nil && *grace > 0 {
			back = time.Duration(*grace * float64(time.Second))
		}
		n := next.UTC()
		if floor := now.Add(-back).Add(-time.Microsecond); !have || n.Before(floor) {
			// the first look, or an instant past its grace: from one
			// misfire grace back
			from, have = floor, true
			continue
		}
		if n.After(now) {
			return n, true, nil
		}
		l.makePending(n, here)
		from = n
		l.cursor, l.started = n, true
	}
}

// lookAt tries to claim the pending run p: a turn, or false when it is to
// be looked at again later.
func (l *loop) lookAt(ctx context.Context, p *pendingRun) (turn, bool, error) {
	s, e := l.s, l.s.e
	key := p.due.UnixMicro()
	sent := time.Now()
	var term *int64
	row, cancel := e.call(ctx, l.conn, sent.Add(e.callTimeout()), sqlClaimRun, s.cfg.Job, p.due, s.cfg.Identity, e.ttl.Seconds(), s.grace)
	err := row.Scan(&term)
	cancel()
	if err != nil {
		return turn{}, false, err
	}
	if term != nil {
		delete(l.pending, key)
		return turn{due: p.due, claimed: true, term: *term, sent: sent}, true, nil
	}
	var finished bool
	var remaining *float64
	var outcome *string
	row, cancel = e.call(ctx, l.conn, time.Now().Add(e.callTimeout()), sqlRunState, s.cfg.Job, p.due)
	err = row.Scan(&finished, &remaining, &outcome)
	cancel()
	here := time.Now()
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// Refused before its row was made (its job's row taken, the
		// failover step not taken yet, or due before the retention):
		// every 20 ms fastTries times, then backing off, doubling up to
		// the poll, given up after absentTries (about a minute and a half).
		p.tries++
		if p.tries >= absentTries {
			delete(l.pending, key)
			return turn{due: p.due}, true, nil
		}
		shift := p.tries - fastTries
		if shift < 0 {
			shift = 0
		}
		if shift > 10 {
			shift = 10
		}
		backoff := raceRetry << uint(shift)
		if limit := s.cfg.Poll; backoff > limit && limit >= raceRetry {
			backoff = limit
		}
		p.at = here.Add(backoff)
	case err != nil:
		return turn{}, false, err
	case finished:
		delete(l.pending, key)
		tn := turn{due: p.due}
		if outcome != nil {
			tn.outcome = *outcome
		}
		return tn, true, nil
	case remaining != nil:
		// Claimed live by another: look again when it may have finished or
		// lapsed.
		wait := time.Duration(*remaining * float64(time.Second))
		if wait < 0 {
			wait = 0
		}
		if wait > s.cfg.Poll {
			wait = s.cfg.Poll
		}
		p.at, p.tries = here.Add(wait+raceRetry), 0
	default: // not live: a claim raced this one
		p.at, p.tries = here.Add(raceRetry), 0
	}
	return turn{}, false, nil
}

// runOne runs a claimed run to its end and records its outcome; an error
// only for a refusal for good.
func (l *loop) runOne(ctx context.Context, tn turn, fn RunFunc) error {
	s, e := l.s, l.s.e
	due := tn.due.Format(dueLayout)
	if ctx.Err() != nil {
		// claimed as Run's context ended: not started, nor finished; the
		// claim lapses and another replica may claim the run again
		e.logf("shutting down: the run due %s (term %d) is not started; its claim lapses", due, tn.term)
		return nil
	}
	r := e.startTenure(ctx, tn.sent)
	t := r.t
	run := &ScheduledRun{Job: s.cfg.Job, Identity: s.cfg.Identity, Due: tn.due, Term: tn.term, t: t}
	e.logf("running the run due %s, term %d", due, tn.term)
	var fnErr error
	returned := make(chan struct{})
	go func() {
		fnErr = fn(r.ctx, run)
		close(returned)
	}()
	secs := e.ttl.Seconds()
	// renewed until fn returns or the run is lost (refused, past the deadline, shut down)
	r.run(renewing{conn: &l.conn, logf: e.logf, renew: "renew the run due " + due, renewal: "renewal of the run due " + due,
		call: func(ctx context.Context, c *pgx.Conn, by time.Time) (bool, error) {
			return scanBool(ctx, e, c, by, sqlRenewRun, s.cfg.Job, tn.due, s.cfg.Identity, secs, tn.term)
		},
		refused: func() {
			e.logf("the claim of the run due %s (term %d) is lost: its renewal was refused", due, tn.term)
			t.end(StopRefused, nil)
		}}, returned)
	<-returned
	// Returning after the run was lost (stopped at its deadline, taken
	// over, shut down) is no success: recorded failed, as by every client.
	lostBefore := run.Check()
	t.end(StopShutdown, nil) // fn has returned: the run is no longer acted on
	if fnErr == nil && lostBefore != nil {
		fnErr = fmt.Errorf("returned after the run was lost: %w", lostBefore)
	}
	succeeded := fnErr == nil
	var detail *string
	if fnErr != nil {
		d := runDetail(fnErr.Error())
		detail = &d
	}
	recorded, err := l.finish(tn, succeeded, detail)
	outcome := "succeeded"
	if !succeeded {
		outcome = fmt.Sprintf("failed (%s)", *detail)
	}
	switch {
	case err != nil:
		e.logf("the run due %s (term %d) %s; not recorded: %v", due, tn.term, outcome, err)
	case !recorded:
		e.logf("the run due %s (term %d) %s; not recorded: it was claimed again since", due, tn.term, outcome)
	default:
		e.logf("the run due %s (term %d) %s", due, tn.term, outcome)
	}
	if r.failure != nil {
		return r.failure
	}
	if permanent(err) {
		return err
	}
	return nil
}

// finish records the run's outcome: three tries, each within ttl/3, on a
// new connection after a failure, whether or not Run's context is done.
// False when the run was claimed again since.
func (l *loop) finish(tn turn, succeeded bool, detail *string) (bool, error) {
	s, e := l.s, l.s.e
	var last error
	for try := 0; try < 3; try++ {
		if try > 0 {
			time.Sleep(e.retryEvery())
		}
		ctx, cancel := context.WithTimeout(context.Background(), e.callTimeout())
		if l.conn != nil && l.conn.IsClosed() { // a renewal cancelled at the deadline closes it
			l.drop()
		}
		if l.conn == nil {
			c, err := e.connect(ctx)
			if err != nil {
				cancel()
				if last = classify(nil, err); permanent(last) {
					return false, last
				}
				continue
			}
			l.conn = c
		}
		ok, err := scanBool(ctx, e, l.conn, time.Now().Add(e.callTimeout()), sqlFinishRun,
			s.cfg.Job, tn.due, s.cfg.Identity, tn.term, succeeded, detail)
		cancel()
		if err == nil {
			return ok, nil
		}
		if last = classify(l.conn, err); permanent(last) {
			return false, last
		}
		l.drop()
	}
	return false, last
}

// runDetail is an error's text as le_finish_run takes it: valid UTF-8
// without NUL, cut to at most 1000 bytes at a character boundary.
func runDetail(s string) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", "\uFFFD"), "\uFFFD")
	if len(s) <= detailLimit {
		return s
	}
	i := detailLimit
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}
