package resourcelock

// Against a real server named by LEADERLOCK_DSN (a superuser's, for the
// dedicated database of the HOT count): the Interface's semantics as
// client-go's LeaderElector relies on them, three LeaderElectors in
// processes of their own (internal/elector) under kill -9, SIGSTOP and
// context cancel, and the renewals' row writes.

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

func dsn(t *testing.T) string {
	t.Helper()
	d := os.Getenv("LEADERLOCK_DSN")
	if d == "" {
		t.Skip("LEADERLOCK_DSN not set")
	}
	return d
}

func newKey(name string) string { return fmt.Sprintf("go-rl-%s-%d", name, rand.Int63()) }

func newLock(t *testing.T, dsn, key, id string) *Lock {
	t.Helper()
	l, err := New(Config{ConnString: dsn, Key: key, Identity: id, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func rec0(id string) rl.LeaderElectionRecord {
	now := time.Now()
	return rl.LeaderElectionRecord{HolderIdentity: id, LeaseDurationSeconds: 5,
		AcquireTime: metav1.NewTime(now), RenewTime: metav1.NewTime(now)}
}

func TestTheInterfaceAsTheLeaderElectorUsesIt(t *testing.T) {
	ctx := context.Background()
	key := newKey("interface")
	a, b := newLock(t, dsn(t), key, "a"), newLock(t, dsn(t), key, "b")
	if a.Identity() != "a" || a.Describe() != "leaderlock/"+key {
		t.Fatalf("Identity %q, Describe %q", a.Identity(), a.Describe())
	}
	if _, _, err := a.Get(ctx); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a key never held: %v", err)
	}
	if err := a.Update(ctx, rec0("a")); err == nil {
		t.Fatal("Update of a key never held")
	}
	if err := a.Create(ctx, rec0("a")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	lease, ok := a.Lease()
	if !ok || lease.Check() != nil || lease.Term < 1 {
		t.Fatalf("a's tenure: %+v, %v", lease, ok)
	}
	if _, _, err := b.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Create(ctx, rec0("b")); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("b's Create of a key held: %v", err)
	}
	rec, raw, err := b.Get(ctx)
	if err != nil || rec.HolderIdentity != "a" || rec.LeaderTransitions != int(lease.Term) ||
		rec.LeaseDurationSeconds != 5 || rec.AcquireTime.IsZero() || rec.RenewTime.Before(&rec.AcquireTime) || len(raw) == 0 {
		t.Fatalf("b's Get: %+v, %s, %v", rec, raw, err)
	}
	if err := b.Update(ctx, rec0("b")); !apierrors.IsConflict(err) {
		t.Fatalf("b's Update while a holds the key: %v", err)
	}
	if err := b.Update(ctx, rec0("a")); err == nil || apierrors.IsConflict(err) {
		t.Fatalf("b writing another's identity: %v", err)
	}
	// a renews: the record changes (RenewTime), its term does not
	time.Sleep(20 * time.Millisecond)
	if err := a.Update(ctx, rec0("a")); err != nil {
		t.Fatalf("a's renewal: %v", err)
	}
	rec2, raw2, err := b.Get(ctx)
	if err != nil || rec2.LeaderTransitions != rec.LeaderTransitions || !rec.RenewTime.Before(&rec2.RenewTime) || string(raw2) == string(raw) {
		t.Fatalf("after a's renewal b reads %+v (before %+v), %v", rec2, rec, err)
	}
	// client-go's release (ReleaseOnCancel): an empty holder
	released := rl.LeaderElectionRecord{LeaderTransitions: rec2.LeaderTransitions, LeaseDurationSeconds: 1}
	if err := a.Update(ctx, released); err != nil {
		t.Fatalf("a's release: %v", err)
	}
	if lease.Check() == nil {
		t.Fatal("a's tenure goes on after its release")
	}
	if err := a.Update(ctx, released); err != nil {
		t.Fatalf("a's release again: %v", err)
	}
	// b's Update on its read from before the release: Conflict (the
	// release changed the lease); after a Get, b leads, term + 1
	if err := b.Update(ctx, rec0("b")); !apierrors.IsConflict(err) {
		t.Fatalf("b's Update on a read from before the release: %v", err)
	}
	if rec3, _, err := b.Get(ctx); err != nil || rec3.HolderIdentity != "" || rec3.LeaderTransitions != rec.LeaderTransitions {
		t.Fatalf("after the release b reads %+v, %v", rec3, err)
	}
	if err := b.Update(ctx, rec0("b")); err != nil {
		t.Fatalf("b's Update after the release: %v", err)
	}
	lb, _ := b.Lease()
	if lb.Term != lease.Term+1 || lb.Check() != nil {
		t.Fatalf("b's tenure: term %d after a's %d (%v)", lb.Term, lease.Term, lb.Check())
	}
	// a's Lock served its Run: no more tenures
	if _, _, err := a.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := a.Update(ctx, rec0("a")); !apierrors.IsConflict(err) {
		t.Fatalf("a's Update after its tenure ended: %v", err)
	}
	// a Lock whose term read is stale: Conflict (another tenure began)
	c := newLock(t, dsn(t), key, "c")
	if _, _, err := c.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Update(ctx, rl.LeaderElectionRecord{LeaseDurationSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	d := newLock(t, dsn(t), key, "d")
	if _, _, err := d.Get(ctx); err != nil {
		t.Fatal(err)
	}
	if err := d.Update(ctx, rec0("d")); err != nil {
		t.Fatalf("d's Update of a free key: %v", err)
	}
	if err := d.Update(ctx, rl.LeaderElectionRecord{LeaseDurationSeconds: 1}); err != nil {
		t.Fatal(err)
	}
	if err := c.Update(ctx, rec0("c")); !apierrors.IsConflict(err) {
		t.Fatalf("c's Update on a term read before d's tenure: %v", err)
	}
}

// --- three LeaderElectors in processes of their own ---

var (
	electorOnce sync.Once
	electorPath string
	electorErr  error
)

func electorBinary(t *testing.T) string {
	t.Helper()
	electorOnce.Do(func() {
		dir, err := os.MkdirTemp("", "leaderlock-go-elector-")
		if err != nil {
			electorErr = err
			return
		}
		electorPath = filepath.Join(dir, "elector")
		if out, err := exec.Command("go", "build", "-o", electorPath, "./internal/elector").CombinedOutput(); err != nil {
			electorErr = fmt.Errorf("%v: %s", err, out)
		}
	})
	if electorErr != nil {
		t.Fatal(electorErr)
	}
	return electorPath
}

type elector struct {
	id, log string
	cmd     *exec.Cmd
	exited  chan struct{}
}

const (
	leaseMs, renewMs, retryMs = 1000, 600, 10
)

func startElector(t *testing.T, dir, key, id string) *elector {
	t.Helper()
	out, err := os.Create(filepath.Join(dir, id+".out"))
	if err != nil {
		t.Fatal(err)
	}
	e := &elector{id: id, log: filepath.Join(dir, id+".log"), exited: make(chan struct{})}
	e.cmd = exec.Command(electorBinary(t), dsn(t), key, id, strconv.Itoa(leaseMs), strconv.Itoa(renewMs),
		strconv.Itoa(retryMs), e.log)
	e.cmd.Stdout, e.cmd.Stderr = out, out
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = e.cmd.Wait(); out.Close(); close(e.exited) }()
	t.Cleanup(func() {
		_ = e.cmd.Process.Signal(syscall.SIGCONT)
		_ = e.cmd.Process.Kill()
		<-e.exited
	})
	return e
}

func (e *elector) signal(t *testing.T, s syscall.Signal) {
	t.Helper()
	if err := e.cmd.Process.Signal(s); err != nil {
		t.Fatal(err)
	}
}

// event is a line of an elector's log.
type event struct {
	kind, id string
	term     int64
	at       time.Time
}

func readEvents(t *testing.T, logs ...string) []event {
	t.Helper()
	var out []event
	for _, path := range logs {
		f, err := os.Open(path)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			p := strings.Fields(sc.Text())
			if len(p) < 3 {
				continue
			}
			e := event{kind: p[0], id: p[1]}
			ts := p[2]
			if p[0] == "start" || p[0] == "tick" || p[0] == "end" {
				if len(p) < 4 {
					continue
				}
				e.term, _ = strconv.ParseInt(p[2], 10, 64)
				ts = p[3]
			}
			secs, err := strconv.ParseFloat(ts, 64)
			if err != nil {
				continue
			}
			e.at = time.Unix(0, int64(secs*1e9))
			out = append(out, e)
		}
		f.Close()
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].at.Before(out[j].at) })
	return out
}

// tenure is one elector's time inside OnStartedLeading doing work: from
// its start to its last tick.
type tenure struct {
	id         string
	term       int64
	from, last time.Time
	ended      bool
}

func tenures(events []event) []*tenure {
	byKey := map[string]*tenure{}
	var out []*tenure
	for _, e := range events {
		k := e.id + "/" + strconv.FormatInt(e.term, 10)
		switch e.kind {
		case "start":
			tn := &tenure{id: e.id, term: e.term, from: e.at, last: e.at}
			byKey[k] = tn
			out = append(out, tn)
		case "tick":
			if tn := byKey[k]; tn != nil {
				tn.last = e.at
			}
		case "end":
			if tn := byKey[k]; tn != nil {
				tn.ended = true
			}
		}
	}
	return out
}

// leader waits for a tenure that has not ended, started after since.
func leader(t *testing.T, logs []string, since time.Time, within time.Duration) *tenure {
	t.Helper()
	until := time.Now().Add(within)
	for time.Now().Before(until) {
		ts := tenures(readEvents(t, logs...))
		for i := len(ts) - 1; i >= 0; i-- {
			if !ts[i].ended && ts[i].from.After(since) {
				return ts[i]
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no leader started within %v", within)
	return nil
}

func eventOf(t *testing.T, log, kind string) (time.Time, bool) {
	for _, e := range readEvents(t, log) {
		if e.kind == kind {
			return e.at, true
		}
	}
	return time.Time{}, false
}

func TestThreeLeaderElectorsUnderKillStopAndCancel(t *testing.T) {
	dir := t.TempDir()
	key := newKey("three")
	electors := map[string]*elector{}
	var logs []string
	n := 0
	spawn := func() {
		n++
		id := fmt.Sprintf("e%d", n)
		e := startElector(t, dir, key, id)
		electors[id] = e
		logs = append(logs, e.log)
	}
	for i := 0; i < 3; i++ {
		spawn()
	}
	defer func() {
		if t.Failed() {
			for _, e := range electors {
				out, _ := os.ReadFile(e.log)
				t.Logf("%s's log (last 2000 bytes):\n%s", e.id, tail(out, 2000))
			}
		}
	}()
	start := time.Now()
	l := leader(t, logs, start, 10*time.Second)
	t.Logf("%s leads in term %d, %d ms after the start", l.id, l.term, l.from.Sub(start).Milliseconds())
	time.Sleep(300 * time.Millisecond)

	// kill -9 of the leader: the next leads once the lease lapses (ttl 1 s)
	killed := time.Now()
	electors[l.id].signal(t, syscall.SIGKILL)
	next := leader(t, logs, killed, 5*time.Second)
	t.Logf("kill -9 of %s: %s leads in term %d, %d ms after the kill (lease duration %d ms)",
		l.id, next.id, next.term, next.from.Sub(killed).Milliseconds(), leaseMs)
	spawn()
	time.Sleep(300 * time.Millisecond)

	// SIGSTOP of the leader past its lease: another leads meanwhile; once
	// resumed, the paused one does nothing (its context's Err reads the
	// local deadline)
	l = next
	stopped := time.Now()
	electors[l.id].signal(t, syscall.SIGSTOP)
	next = leader(t, logs, stopped, 5*time.Second)
	time.Sleep(time.Until(stopped.Add(2500 * time.Millisecond)))
	resumed := time.Now()
	electors[l.id].signal(t, syscall.SIGCONT)
	t.Logf("SIGSTOP of %s for %.1f s: %s leads in term %d, %d ms after the stop", l.id,
		resumed.Sub(stopped).Seconds(), next.id, next.term, next.from.Sub(stopped).Milliseconds())
	time.Sleep(500 * time.Millisecond)

	// context cancel (SIGTERM) of the leader, three times: ReleaseOnCancel
	// hands over once OnStartedLeading has returned
	var handovers []time.Duration
	for round := 0; round < 3; round++ {
		l = leader(t, logs, time.Time{}, 5*time.Second)
		time.Sleep(200 * time.Millisecond)
		e := electors[l.id]
		e.signal(t, syscall.SIGTERM)
		select {
		case <-e.exited:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not exit after SIGTERM", l.id)
		}
		cancelled, ok := eventOf(t, e.log, "sigterm")
		if !ok {
			t.Fatalf("%s logged no sigterm", l.id)
		}
		next = leader(t, logs, cancelled, 5*time.Second)
		handovers = append(handovers, next.from.Sub(cancelled))
		t.Logf("SIGTERM to %s: %s leads in term %d, %.1f ms after the cancel", l.id, next.id, next.term,
			float64(next.from.Sub(cancelled).Microseconds())/1000)
		spawn()
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	for _, e := range electors {
		_ = e.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, e := range electors {
		select {
		case <-e.exited:
		case <-time.After(5 * time.Second):
		}
	}

	// never two inside OnStartedLeading at once: each tenure's work, from
	// its start to its last tick, ends before the next one starts; terms
	// grow
	ts := tenures(readEvents(t, logs...))
	sort.Slice(ts, func(i, j int) bool { return ts[i].from.Before(ts[j].from) })
	for i := 1; i < len(ts); i++ {
		prev, cur := ts[i-1], ts[i]
		if !prev.last.Before(cur.from) {
			t.Errorf("%s (term %d) acted at %s, after %s (term %d) started at %s", prev.id, prev.term,
				prev.last.Format("15:04:05.000000"), cur.id, cur.term, cur.from.Format("15:04:05.000000"))
		}
		if cur.term <= prev.term {
			t.Errorf("term %d (%s) after term %d (%s)", cur.term, cur.id, prev.term, prev.id)
		}
	}
	if len(ts) < 6 {
		t.Errorf("%d tenures, expected 6 at least", len(ts))
	}
	worst := time.Duration(0)
	for _, h := range handovers {
		if h > worst {
			worst = h
		}
	}
	t.Logf("%d tenures; ReleaseOnCancel hand-overs %v (the longest %.1f ms)", len(ts), handovers,
		float64(worst.Microseconds())/1000)
	if worst >= 100*time.Millisecond {
		t.Errorf("a ReleaseOnCancel hand-over took %v, not under 100 ms", worst)
	}
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// --- the renewals' row writes ---

// counting counts the renewals the LeaderElector made through the Lock.
type counting struct {
	*Lock
	renewals atomic.Int64
	enough   func()
}

func (c *counting) Update(ctx context.Context, ler rl.LeaderElectionRecord) error {
	c.mu.Lock()
	renewal := c.held
	c.mu.Unlock()
	err := c.Lock.Update(ctx, ler)
	if err == nil && renewal && ler.HolderIdentity != "" {
		if c.renewals.Add(1) == hotRenewals {
			c.enough()
		}
	}
	return err
}

const hotRenewals = 10000

// tableWrites reads pg_stat_user_tables' updates of leaderlock's table.
func tableWrites(t *testing.T, c *pgx.Conn) (upd, hot int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Exec(ctx, "SELECT pg_stat_clear_snapshot()"); err != nil {
		t.Fatal(err)
	}
	err := c.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables s
		JOIN pg_extension e ON e.extname = 'leaderlock' AND s.schemaname = e.extnamespace::regnamespace::text
		WHERE s.relname = 'leaderlock'`).Scan(&upd, &hot)
	if err != nil {
		t.Fatal(err)
	}
	return upd, hot
}

// dedicatedDatabase makes a database of the test's own with leaderlock,
// so that pg_stat_user_tables counts the election's writes alone; it
// returns its DSN, or the test's DSN if the role cannot.
func dedicatedDatabase(t *testing.T) string {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	db := fmt.Sprintf("ll_go_rl_hot_%d", rand.Int31())
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+db); err != nil {
		t.Logf("no database of the test's own (%v): counting in the test's database", err)
		return dsn(t)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+db+" WITH (FORCE)") })
	cfg := admin.Config()
	d := fmt.Sprintf("host=%s port=%d user=%s dbname=%s", cfg.Host, cfg.Port, cfg.User, db)
	c, err := pgx.Connect(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE EXTENSION leaderlock"); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestRenewalsAreHOTUpdatesOfOneRow(t *testing.T) {
	d := dedicatedDatabase(t)
	ctx := context.Background()
	stats, err := pgx.Connect(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	defer stats.Close(ctx)
	upd0, hot0 := tableWrites(t, stats)

	runCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	lock := &counting{Lock: newLock(t, d, newKey("hot"), "hot"), enough: cancel}
	var led atomic.Bool
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: lock, LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Microsecond,
		ReleaseOnCancel: true,
		Callbacks: lock.Callbacks(leaderelection.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context) { led.Store(true); <-ctx.Done() },
			OnStoppedLeading: func() {},
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	le.Run(runCtx)
	took := time.Since(began)
	lock.Close() // its backend exits: its counts reach the shared statistics
	renewals := lock.renewals.Load()
	if !led.Load() || renewals < hotRenewals {
		t.Fatalf("led %v, %d renewals in %v", led.Load(), renewals, took)
	}
	var upd, hot int64
	last, steady := int64(-1), time.Now()
	for time.Since(steady) < 1500*time.Millisecond {
		time.Sleep(100 * time.Millisecond)
		if upd, hot = tableWrites(t, stats); upd != last {
			last, steady = upd, time.Now()
		}
	}
	du, dh := upd-upd0, hot-hot0
	ratio := float64(dh) / float64(du)
	t.Logf("%d renewals by client-go's LeaderElector in %.1f s (%.0f/s, RetryPeriod 100µs): %d updates of leaderlock's table, %d HOT: %.4f",
		renewals, took.Seconds(), float64(renewals)/took.Seconds(), du, dh, ratio)
	if du < renewals {
		t.Fatalf("%d updates counted for %d renewals", du, renewals)
	}
	if ratio < 0.99 {
		t.Fatalf("n_tup_hot_upd / n_tup_upd = %.4f, under 0.99", ratio)
	}
}
