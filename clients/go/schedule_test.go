package leaderlock

// Scheduled runs against a real server (LEADERLOCK_DSN, a superuser for
// the lost-run test).

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// runRow is a row of leaderlock_runs.
type runRow struct {
	due      time.Time
	holder   *string
	term     *int64
	outcome  *string
	detail   *string
	attempts int
}

func runRows(t *testing.T, job string) []runRow {
	t.Helper()
	c, err := pgx.Connect(context.Background(), dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	rows, err := c.Query(context.Background(),
		"SELECT due, holder, term, outcome, detail, attempts FROM leaderlock_runs WHERE job = $1 ORDER BY due", job)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []runRow
	for rows.Next() {
		var r runRow
		if err := rows.Scan(&r.due, &r.holder, &r.term, &r.outcome, &r.detail, &r.attempts); err != nil {
			t.Fatal(err)
		}
		r.due = r.due.UTC()
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func str(p *string) string {
	if p == nil {
		return "NULL"
	}
	return *p
}

// ranRun is what a callback saw; endErr is run.Check() at its end.
type ranRun struct {
	id     string
	due    time.Time
	term   int64
	endErr error
}

// ours reports whether the run was still ours at its end, or ended by the
// test's cancel (Schedule's context).
func (r ranRun) ours() bool { return r.endErr == nil || errors.Is(r.endErr, context.Canceled) }

// checkTable compares leaderlock_runs with the runs that ran (sorted by
// due instant): each recorded succeeded by its runner, in its term. A row
// without a run is allowed only after the last run, unfinished: a claim
// whose answer the test's cancel cut off (it lapses).
func checkTable(t *testing.T, rows []runRow, ran []ranRun, attempts int) {
	t.Helper()
	byDue := map[int64]runRow{}
	for _, row := range rows {
		byDue[row.due.UnixMicro()] = row
		if len(ran) > 0 && !row.due.After(ran[len(ran)-1].due) {
			continue
		}
		if row.outcome != nil {
			t.Errorf("table: run due %v %s, not run here", row.due, str(row.outcome))
		}
	}
	for i, r := range ran {
		row, ok := byDue[r.due.UnixMicro()]
		outcome := str(row.outcome)
		// the last run may have seen the shutdown between its last step and
		// its return: recorded failed, "returned after the run was lost"
		if i == len(ran)-1 && outcome == "failed" && strings.HasPrefix(str(row.detail), "returned after the run was lost: ") {
			outcome = "succeeded"
		}
		if !ok || (r.id != "" && str(row.holder) != r.id) || row.term == nil || *row.term != r.term ||
			outcome != "succeeded" || row.attempts != attempts {
			t.Errorf("table: due %v holder %s term %v outcome %s attempts %d; ran: %+v",
				row.due, str(row.holder), row.term, str(row.outcome), row.attempts, r)
		}
	}
	if len(rows) < len(ran) {
		t.Errorf("%d runs in the table, %d ran", len(rows), len(ran))
	}
}

func TestScheduleThreeReplicasRunEachDueInstantOnce(t *testing.T) {
	job := newKey("sched-three")
	period := 300 * time.Millisecond
	var mu sync.Mutex
	var ran []ranRun
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errs := make(chan error, 3)
	for _, id := range []string{"a", "b", "c"} {
		id := id
		go func() {
			errs <- Schedule(ctx, ScheduleConfig{ConnString: dsn(t), Job: job, Identity: id, Every: period,
				TTL: 2 * time.Second, MisfireGrace: -1}, // each with its own connection; no look back
				func(ctx context.Context, run *ScheduledRun) error {
					if run.Job != job || run.Identity != id || !run.IsOurs() || ctx.Err() != nil {
						t.Errorf("%s: run %+v, ours %v, ctx %v", id, run, run.IsOurs(), ctx.Err())
					}
					time.Sleep(30 * time.Millisecond) // a unit of work
					mu.Lock()
					ran = append(ran, ranRun{id: id, due: run.Due, term: run.Term, endErr: run.Check()})
					mu.Unlock()
					return nil
				})
		}()
	}
	time.Sleep(2500 * time.Millisecond)
	cancel()
	for i := 0; i < 3; i++ {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatalf("Schedule: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Schedule did not return after its context ended")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(ran, func(i, j int) bool { return ran[i].due.Before(ran[j].due) })
	if len(ran) < 5 {
		t.Fatalf("%d runs in 2.5 s every 300 ms: %+v", len(ran), ran)
	}
	byID := map[string]int{}
	for i, r := range ran {
		byID[r.id]++
		if r.due.Location() != time.UTC || r.due.UnixMicro()%period.Microseconds() != 0 {
			t.Errorf("due instant %v: not UTC or not a multiple of the period since the epoch", r.due)
		}
		if !r.ours() {
			t.Errorf("run %+v was not ours at its end", r)
		}
		if i == 0 {
			continue
		}
		p := ran[i-1]
		if !r.due.After(p.due) {
			t.Errorf("due instant %v ran twice (%s term %d, %s term %d)", r.due, p.id, p.term, r.id, r.term)
		} else if r.due.Sub(p.due) != period {
			t.Errorf("due instants %v then %v: one skipped", p.due, r.due)
		}
		if r.term <= p.term {
			t.Errorf("terms do not increase with due instants: %+v then %+v", p, r)
		}
	}
	t.Logf("%d runs, by replica %v", len(ran), byID)
	checkTable(t, runRows(t, job), ran, 1)
}

func TestScheduleErrorRecordsTheRunFailedWithItsDetail(t *testing.T) {
	job := newKey("sched-failed")
	// 999 bytes, then a character that would end at byte 1001: cut before it
	long := "boom:" + strings.Repeat("é", 600)
	var mu sync.Mutex
	calls := 0
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	returned := make(chan error, 1)
	go func() {
		returned <- Schedule(ctx, ScheduleConfig{ConnString: dsn(t), Job: job, Every: 200 * time.Millisecond,
			TTL: 2 * time.Second, MisfireGrace: -1}, func(ctx context.Context, run *ScheduledRun) error {
			mu.Lock()
			calls++
			n := calls
			mu.Unlock()
			switch n {
			case 1:
				return errors.New(long)
			case 2:
				return fmt.Errorf("second run: %w", context.DeadlineExceeded)
			}
			return nil
		})
	}()
	eventually(t, 10*time.Second, func() bool {
		rows := runRows(t, job)
		return len(rows) >= 3 && rows[2].outcome != nil
	})
	cancel()
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	rows := runRows(t, job)
	want := long[:999]
	if !utf8.ValidString(want) || len(want) != 999 {
		t.Fatal("the test's own cut is wrong")
	}
	if str(rows[0].outcome) != "failed" || str(rows[0].detail) != want {
		t.Errorf("first run: %s %q, want failed %q", str(rows[0].outcome), str(rows[0].detail), want)
	}
	if str(rows[1].outcome) != "failed" || str(rows[1].detail) != "second run: context deadline exceeded" {
		t.Errorf("second run: %s %q", str(rows[1].outcome), str(rows[1].detail))
	}
	if str(rows[2].outcome) != "succeeded" || rows[2].detail != nil {
		t.Errorf("third run (the loop goes on after failures): %s %q", str(rows[2].outcome), str(rows[2].detail))
	}
	if d := runDetail("a\x00b\xffc"); d != "a\uFFFDb\uFFFDc" {
		t.Errorf("runDetail: %q", d)
	}
}

func TestScheduleRunLostWhileRunning(t *testing.T) {
	job := newKey("sched-lost")
	ttl := 3 * time.Second
	cfg := func(id string) ScheduleConfig {
		// due hourly, looked back at for an hour: due now, on start
		return ScheduleConfig{ConnString: dsn(t), Job: job, Identity: id, Every: time.Hour, MisfireGrace: time.Hour, TTL: ttl}
	}
	type seen struct {
		run           *ScheduledRun
		lostAfter     time.Duration
		deadline      time.Time
		ctxErr, check error
		doneClosed    bool
	}
	started := make(chan *ScheduledRun, 1)
	aLost := make(chan seen, 1)
	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	aReturned := make(chan error, 1)
	go func() {
		aReturned <- Schedule(ctxA, cfg("a"), func(ctx context.Context, run *ScheduledRun) error {
			started <- run
			begin := time.Now()
			for run.IsOurs() {
				time.Sleep(5 * time.Millisecond)
			}
			s := seen{run: run, lostAfter: time.Since(begin), deadline: run.Deadline(), ctxErr: ctx.Err(), check: run.Check()}
			select {
			case <-ctx.Done():
				s.doneClosed = true
			case <-time.After(time.Second):
			}
			aLost <- s
			return nil
		})
	}()
	var runA *ScheduledRun
	select {
	case runA = <-started:
	case err := <-aReturned:
		t.Fatalf("Schedule returned: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("a did not claim the run due")
	}
	time.Sleep(ttl / 2) // renewed once: lost by a refusal, not at the first deadline
	// The claim lapses on the server (a runner lost mid-run), and b claims
	// the run again.
	c, err := pgx.Connect(context.Background(), dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(context.Background(),
		"UPDATE leaderlock_runs SET expires_at = le_now() - interval '1 second' WHERE job = $1", job); err != nil {
		t.Fatal(err)
	}
	startedB := make(chan *ScheduledRun, 1)
	ctxB, cancelB := context.WithCancel(context.Background())
	defer cancelB()
	go func() {
		_ = Schedule(ctxB, cfg("b"), func(ctx context.Context, run *ScheduledRun) error {
			startedB <- run
			time.Sleep(100 * time.Millisecond)
			return nil
		})
	}()
	var runB *ScheduledRun
	select {
	case runB = <-startedB:
	case <-time.After(10 * time.Second):
		t.Fatal("b did not claim the lapsed run")
	}
	if !runB.Due.Equal(runA.Due) || runB.Term <= runA.Term {
		t.Fatalf("b claimed %v term %d; a had %v term %d", runB.Due, runB.Term, runA.Due, runA.Term)
	}
	var s seen
	select {
	case s = <-aLost:
	case <-time.After(ttl + 2*time.Second):
		t.Fatal("a's run stayed ours after b claimed it")
	}
	var lost *LostError
	if !errors.As(s.check, &lost) || lost.Reason != StopRefused || !errors.Is(s.check, ErrLeaseLost) {
		t.Errorf("Check: %v, want a refused renewal's loss", s.check)
	}
	if !errors.Is(s.ctxErr, ErrLeaseLost) || !s.doneClosed {
		t.Errorf("the run's context: Err %v, Done closed %v", s.ctxErr, s.doneClosed)
	}
	t.Logf("a saw the loss %v after starting, %v before its local deadline", s.lostAfter.Round(time.Millisecond), time.Until(s.deadline).Round(time.Millisecond))
	eventually(t, 5*time.Second, func() bool {
		rows := runRows(t, job)
		return len(rows) == 1 && rows[0].outcome != nil
	})
	row := runRows(t, job)[0]
	if str(row.holder) != "b" || row.term == nil || *row.term != runB.Term || row.attempts != 2 || str(row.outcome) != "succeeded" {
		t.Errorf("table: holder %s term %v attempts %d outcome %s; want b's finish of term %d",
			str(row.holder), row.term, row.attempts, str(row.outcome), runB.Term)
	}
	cancelA()
	cancelB()
	if err := <-aReturned; err != nil {
		t.Errorf("a's Schedule: %v", err)
	}
}

func TestScheduleReconnectsAndRenewsOnANewConnection(t *testing.T) {
	if su, _ := query(t, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").(bool); !su {
		t.Skip("LEADERLOCK_DSN's role is not a superuser (pg_terminate_backend)")
	}
	job := newKey("sched-reconnect")
	appName := "sched-" + job[len(job)-8:]
	terminate := func() int64 {
		return query(t, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", appName).(int64)
	}
	logs := &logLines{}
	var mu sync.Mutex
	var ran []ranRun
	inRun := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	returned := make(chan error, 1)
	go func() {
		returned <- Schedule(ctx, ScheduleConfig{ConnString: with(t, dsn(t), "application_name", appName), Job: job,
			Every: 200 * time.Millisecond, TTL: 1500 * time.Millisecond, MisfireGrace: -1, Logf: logs.logf},
			func(ctx context.Context, run *ScheduledRun) error {
				mu.Lock()
				n := len(ran)
				mu.Unlock()
				if n == 3 { // past the claim's first deadline: renewed on a new connection
					inRun <- struct{}{}
					for end := time.Now().Add(2 * time.Second); time.Now().Before(end) && run.IsOurs(); {
						time.Sleep(10 * time.Millisecond)
					}
				}
				mu.Lock()
				ran = append(ran, ranRun{due: run.Due, term: run.Term, endErr: run.Check()})
				mu.Unlock()
				return nil
			})
	}()
	runs := func() int { mu.Lock(); defer mu.Unlock(); return len(ran) }
	eventually(t, 10*time.Second, func() bool { return runs() >= 2 })
	// between runs: the loop reconnects
	time.Sleep(50 * time.Millisecond)
	if terminate() == 0 {
		t.Fatal("no session to terminate")
	}
	select {
	case <-inRun: // during a run: the renewal fails and is retried on a new connection
	case <-time.After(10 * time.Second):
		t.Fatalf("no run after the session was terminated; log %q", logs.lines)
	}
	time.Sleep(200 * time.Millisecond)
	terminate()
	eventually(t, 10*time.Second, func() bool { return runs() >= 6 })
	cancel()
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range ran {
		if !r.ours() {
			t.Errorf("run %+v lost", r)
		}
	}
	if logs.count("renewal of the run due") == 0 || logs.count("cannot reach the server") == 0 {
		t.Errorf("log: %q", logs.lines)
	}
	checkTable(t, runRows(t, job), ran, 1)
	t.Logf("%d runs; log %q", len(ran), logs.lines)
}

func TestScheduleRefusalForGoodEndsIt(t *testing.T) {
	done := make(chan error, 1)
	go func() {
		done <- Schedule(context.Background(), ScheduleConfig{ConnString: dsn(t), Job: strings.Repeat("j", 256),
			Every: 100 * time.Millisecond, MisfireGrace: -1}, func(ctx context.Context, run *ScheduledRun) error {
			t.Error("a run of a job the server refuses")
			return nil
		})
	}()
	select {
	case err := <-done:
		var e *Error
		if !errors.Is(err, ErrBadArgument) || !errors.As(err, &e) || e.SQLState != "22023" {
			t.Errorf("a job name of 256 bytes: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Schedule kept retrying a refusal for good")
	}
}

// A callback that returns nil after its run was lost (here: its claim
// lapsed on the server, backdated by the test, so the next renewal is
// refused) is recorded failed, as by every client, with why in the detail.
func TestScheduleReturningAfterTheRunWasLostIsAFailure(t *testing.T) {
	job := newKey("sched-late-return")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{}, 1)
	returned := make(chan error, 1)
	go func() {
		returned <- Schedule(ctx, ScheduleConfig{ConnString: dsn(t), Job: job, Every: time.Hour,
			TTL: 3 * time.Second, MisfireGrace: time.Hour}, func(ctx context.Context, run *ScheduledRun) error {
			started <- struct{}{}
			<-ctx.Done() // the refused renewal ends it
			return nil
		})
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the run due was not claimed")
	}
	c, err := pgx.Connect(context.Background(), dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(context.Background(),
		"UPDATE leaderlock_runs SET expires_at = le_now() - interval '1 second' WHERE job = $1", job); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() bool {
		rows := runRows(t, job)
		return len(rows) == 1 && rows[0].outcome != nil
	})
	cancel()
	if err := <-returned; err != nil {
		t.Fatal(err)
	}
	rows := runRows(t, job)
	if str(rows[0].outcome) != "failed" || !strings.HasPrefix(str(rows[0].detail), "returned after the run was lost: ") {
		t.Errorf("a nil return after the run was lost: %s %q, want failed, returned after the run was lost", str(rows[0].outcome), str(rows[0].detail))
	}
}

// A scheduler given the job's name alone runs the schedule kept in the
// database (le_schedule) and follows a change and a pause without a
// restart.
func TestScheduleRegisteredFollowsAChangeAndAPause(t *testing.T) {
	job := newKey("sched-registered")
	bg := context.Background()
	c, err := pgx.Connect(bg, dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(bg)
	exec := func(sql string) {
		t.Helper()
		if _, err := c.Exec(bg, sql, job); err != nil {
			t.Fatal(err)
		}
	}
	serverNow := func() time.Time {
		t.Helper()
		var now time.Time
		if err := c.QueryRow(bg, "SELECT le_now()").Scan(&now); err != nil {
			t.Fatal(err)
		}
		return now.UTC()
	}
	type claimed struct {
		due       time.Time
		outcome   string
		claimedAt *time.Time
	}
	rows := func() []claimed {
		t.Helper()
		rs, err := c.Query(bg, "SELECT due, coalesce(outcome, ''), claimed_at FROM leaderlock_runs WHERE job = $1 ORDER BY due", job)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		var got []claimed
		for rs.Next() {
			var r claimed
			if err := rs.Scan(&r.due, &r.outcome, &r.claimedAt); err != nil {
				t.Fatal(err)
			}
			r.due = r.due.UTC()
			got = append(got, r)
		}
		if err := rs.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}
	succeeded := func(after time.Time) []time.Time {
		var dues []time.Time
		for _, r := range rows() {
			if r.outcome == "succeeded" && r.due.After(after) {
				dues = append(dues, r.due)
			}
		}
		return dues
	}
	exec("SELECT le_schedule(job => $1, every => '1 second')")
	defer func() { // before the connection closes
		if _, err := c.Exec(bg, "SELECT le_unschedule(job => $1)", job); err != nil {
			t.Errorf("le_unschedule: %v", err)
		}
	}()

	logs := &logLines{}
	var mu sync.Mutex
	var ran []time.Time // due instants run here
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	returned := make(chan error, 1)
	go func() {
		returned <- Schedule(ctx, ScheduleConfig{ConnString: dsn(t), Job: job, TTL: 3 * time.Second, Logf: logs.logf},
			func(ctx context.Context, run *ScheduledRun) error {
				mu.Lock()
				ran = append(ran, run.Due)
				mu.Unlock()
				return nil
			})
	}()
	eventually(t, 5*time.Second, func() bool { return len(succeeded(time.Time{})) >= 2 })

	// every 2 seconds: the runs due after the change are at even seconds
	// (the first may be an instant already waited for)
	exec("SELECT le_schedule(job => $1, every => '2 seconds')")
	changed := serverNow()
	eventually(t, 7*time.Second, func() bool { return len(succeeded(changed)) >= 3 })
	later := succeeded(changed)
	for i, due := range later {
		if due.Nanosecond() != 0 || due.Unix()%2 != 0 {
			if i == 0 && due.Nanosecond() == 0 {
				continue
			}
			t.Errorf("after the change to every 2 seconds, a run due %s (runs due after %s: %v)",
				due.Format(dueLayout), changed.Format(dueLayout), later)
		}
	}

	// paused: nothing claimed
	exec("SELECT le_pause_schedule(job => $1)")
	paused := serverNow()
	time.Sleep(2500 * time.Millisecond)
	for _, r := range rows() {
		if r.claimedAt != nil && r.claimedAt.After(paused) {
			t.Errorf("the run due %s claimed at %s, after the pause (%s)",
				r.due.Format(dueLayout), r.claimedAt.UTC().Format(dueLayout), paused.Format(dueLayout))
		}
	}
	mu.Lock()
	for _, due := range ran {
		if due.After(paused) {
			t.Errorf("the run due %s ran, after the pause (%s)", due.Format(dueLayout), paused.Format(dueLayout))
		}
	}
	mu.Unlock()
	// and it said so, once
	if n := logs.count("has no schedule in the database, or it is paused"); n != 1 {
		t.Errorf("the pause was told %d times (want 1): %v", n, logs.lines)
	}
	cancel()
	if err := <-returned; err != nil {
		t.Errorf("Schedule: %v", err)
	}
	t.Logf("runs due %v", ran)
}

// Backfill 2, no replica for 3.5 s (the worker records the instants
// missed): a replica run by the job's name runs the 2 latest of them late,
// each once, and no more.
func TestScheduleRegisteredRunsTheLatestMissedInstantsLate(t *testing.T) {
	job := newKey("sched-backfill")
	bg := context.Background()
	c, err := pgx.Connect(bg, dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(bg)
	dues := func(where string) []time.Time {
		t.Helper()
		rs, err := c.Query(bg, "SELECT due FROM leaderlock_runs WHERE job = $1 AND "+where+" ORDER BY due", job)
		if err != nil {
			t.Fatal(err)
		}
		defer rs.Close()
		var got []time.Time
		for rs.Next() {
			var d time.Time
			if err := rs.Scan(&d); err != nil {
				t.Fatal(err)
			}
			got = append(got, d.UTC())
		}
		return got
	}
	if _, err := c.Exec(bg, "SELECT le_schedule(job => $1, every => '1 second', misfire_grace => '0.3 seconds', backfill => 2)", job); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if _, err := c.Exec(bg, "SELECT le_unschedule(job => $1)", job); err != nil {
			t.Errorf("le_unschedule: %v", err)
		}
	}()
	time.Sleep(3500 * time.Millisecond)
	missed := func() []time.Time { return dues("outcome = 'missed'") }
	eventually(t, 2*time.Second, func() bool { return len(missed()) >= 3 })

	var mu sync.Mutex
	ran := map[time.Time]int{}
	ctx, cancel := context.WithCancel(bg)
	defer cancel()
	returned := make(chan error, 1)
	go func() {
		returned <- Schedule(ctx, ScheduleConfig{ConnString: dsn(t), Job: job, TTL: 3 * time.Second},
			func(ctx context.Context, run *ScheduledRun) error {
				mu.Lock()
				ran[run.Due.UTC()]++
				mu.Unlock()
				return nil
			})
	}()
	late := func() []time.Time { return dues("outcome = 'succeeded' AND backfilled_at IS NOT NULL") }
	eventually(t, 3*time.Second, func() bool { return len(late()) == 2 })
	time.Sleep(1200 * time.Millisecond)
	// the latest missed when the replica looked (one may be missed meanwhile)
	m := dues("(outcome = 'missed' OR backfilled_at IS NOT NULL)")
	latest := m[len(m)-2:]
	if got := late(); len(got) != 2 || !got[0].Equal(latest[0]) || !got[1].Equal(latest[1]) {
		t.Errorf("run late: %v, want the 2 latest missed %v", got, latest)
	}
	cancel()
	if err := <-returned; err != nil {
		t.Errorf("Schedule: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, d := range latest {
		if ran[d] != 1 {
			t.Errorf("the missed instant %s ran %d times here (want 1): %v", d.Format(dueLayout), ran[d], ran)
		}
	}
}
