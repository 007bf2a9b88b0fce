package leaderlock

// Groups (contract 26) against a real server: two members share a
// group's partitions, a revoked one moving only once its owner's
// OnRevoked has returned; the guard; a member whose rounds cannot succeed
// loses everything at its local deadline; the notification hint gives a
// newcomer its share well within a renewal period, and a flood of forged
// ones no more than a round per ttl/30; Leave hands over at once. And,
// with no server: Owns reads the clock; which notifications are hints.

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// callbacks records a member's callbacks; drain is how long OnRevoked
// takes.
type callbacks struct {
	mu       sync.Mutex
	drain    time.Duration
	assigned map[int32][]time.Time
	revoked  map[int32][]time.Time // OnRevoked called
	returned map[int32][]time.Time // OnRevoked returned
	ctxOpen  []string              // OnRevoked called while OnAssigned's context was not done
	ctxs     map[int32]context.Context
}

func newCallbacks(drain time.Duration) *callbacks {
	return &callbacks{drain: drain, assigned: map[int32][]time.Time{}, revoked: map[int32][]time.Time{},
		returned: map[int32][]time.Time{}, ctxs: map[int32]context.Context{}}
}

func (c *callbacks) options(group, member string, ttl time.Duration, partitions int32) GroupOptions {
	return GroupOptions{Group: group, Member: member, TTL: ttl, Partitions: partitions, Drain: 10 * time.Second,
		OnAssigned: func(ctx context.Context, p int32, term int64) {
			c.mu.Lock()
			c.assigned[p] = append(c.assigned[p], time.Now())
			c.ctxs[p] = ctx
			c.mu.Unlock()
		},
		OnRevoked: func(p int32) {
			c.mu.Lock()
			c.revoked[p] = append(c.revoked[p], time.Now())
			if c.ctxs[p].Err() == nil {
				c.ctxOpen = append(c.ctxOpen, fmt.Sprint(p))
			}
			c.mu.Unlock()
			time.Sleep(c.drain)
			c.mu.Lock()
			c.returned[p] = append(c.returned[p], time.Now())
			c.mu.Unlock()
		}}
}

func (c *callbacks) count(m map[int32][]time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, ts := range m {
		n += len(ts)
	}
	return n
}

func join(t *testing.T, opts GroupOptions) *Member {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	m, err := JoinGroup(ctx, dsn(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = m.Leave(ctx)
	})
	return m
}

func keys(m map[int32]int64) []int32 {
	var ps []int32
	for p := range m {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	return ps
}

// owningWithin waits until each member owns its count of partitions.
func owningWithin(t *testing.T, d time.Duration, want map[*Member]int) {
	t.Helper()
	until := time.Now().Add(d)
	for {
		ok := true
		for m, n := range want {
			ok = ok && len(m.Owned()) == n
		}
		if ok {
			return
		}
		if time.Now().After(until) {
			for m, n := range want {
				t.Logf("%s owns %v, not %d", m.ID(), m.Owned(), n)
			}
			t.Fatalf("not within %v", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestGroupTwoMembersSharePartitionsMovedOnlyOnceDrained(t *testing.T) {
	group := newKey("group-share")
	ca, cb := newCallbacks(500*time.Millisecond), newCallbacks(0)
	a := join(t, ca.options(group, "a", 3*time.Second, 4))
	before := a.Owned()
	if len(before) != 4 {
		t.Fatalf("the first member owns %v, not 4 partitions", before)
	}
	b := join(t, cb.options(group, "b", 3*time.Second, 0))
	owningWithin(t, 5*time.Second, map[*Member]int{a: 2, b: 2})
	eventually(t, time.Second, func() bool { return cb.count(cb.assigned) == 2 }) // called after Owns says so
	for _, p := range keys(b.Owned()) {
		term, _ := b.Owns(p)
		ca.mu.Lock()
		returned := ca.returned[p]
		ca.mu.Unlock()
		cb.mu.Lock()
		assigned := cb.assigned[p]
		cb.mu.Unlock()
		if term <= before[p] {
			t.Errorf("partition %d: b owns it in term %d, a did in %d", p, term, before[p])
		}
		if _, ours := a.Owns(p); ours {
			t.Errorf("partition %d owned by both", p)
		}
		// given back as OnRevoked returns, not at a later round (every 1 s)
		if len(returned) != 1 || len(assigned) != 1 || assigned[0].Before(returned[0]) ||
			assigned[0].Sub(returned[0]) > 300*time.Millisecond {
			t.Errorf("partition %d: a's OnRevoked returned at %v, b's OnAssigned at %v", p, returned, assigned)
		} else {
			t.Logf("partition %d: b's OnAssigned %d ms after a's OnRevoked returned", p, assigned[0].Sub(returned[0]).Milliseconds())
		}
	}
	for _, p := range keys(a.Owned()) {
		if term, _ := a.Owns(p); term != before[p] {
			t.Errorf("partition %d: a kept it, in term %d, not %d", p, term, before[p])
		}
	}
	if len(ca.ctxOpen) > 0 {
		t.Errorf("OnRevoked called with OnAssigned's context not done: %v", ca.ctxOpen)
	}
}

func TestGroupGuardAdmitsTheOwnerAndRefusesASupersededTerm(t *testing.T) {
	group := newKey("group-guard")
	a := join(t, newCallbacks(0).options(group, "a", 3*time.Second, 2))
	old := a.Owned()
	ctx := context.Background()
	work, err := pgx.Connect(ctx, dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer work.Close(ctx)
	guarded := func(m *Member, p int32, term *int64) (int64, error) {
		tx, err := work.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		if term != nil { // a paused owner's view: that term, unchecked here
			return *term, m.assert(ctx, tx, p, *term)
		}
		return m.Guard(ctx, tx, p)
	}
	if term, err := guarded(a, 1, nil); err != nil || term != old[1] {
		t.Fatalf("the owner's guard: term %d, %v (owns in %d)", term, err, old[1])
	}
	b := join(t, newCallbacks(0).options(group, "b", 3*time.Second, 0))
	owningWithin(t, 5*time.Second, map[*Member]int{a: 1, b: 1})
	q := keys(b.Owned())[0]
	var pe *pgconn.PgError
	if _, err := guarded(a, q, ptr(old[q])); !errors.Is(err, ErrLeaseLost) || !errors.As(err, &pe) || pe.Code != "LE001" {
		t.Fatalf("the guard of partition %d in its superseded term %d: %v", q, old[q], err)
	}
	if _, err := guarded(a, q, nil); !errors.Is(err, ErrLeaseLost) || errors.As(err, &pe) {
		t.Fatalf("a's guard of partition %d, not its own (refused here, no call): %v", q, err)
	}
	bTerm, err := guarded(b, q, nil)
	if err != nil || bTerm <= old[q] {
		t.Fatalf("the new owner's guard: term %d, %v", bTerm, err)
	}
	// q back to a, in a later term: the old one is refused all the same
	if err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	owningWithin(t, 5*time.Second, map[*Member]int{a: 2})
	if _, err := guarded(a, q, ptr(old[q])); !errors.Is(err, ErrLeaseLost) || !errors.As(err, &pe) || pe.Code != "LE001" {
		t.Fatalf("the guard of partition %d, a's again, in its superseded term %d: %v", q, old[q], err)
	}
	if term, err := guarded(a, q, nil); err != nil || term <= bTerm {
		t.Fatalf("a's guard of partition %d, its own again: term %d, %v (b's was %d)", q, term, err, bTerm)
	}
}

func ptr(i int64) *int64 { return &i }

func TestGroupMemberWhoseRoundsCannotSucceedLosesEverythingAtItsDeadline(t *testing.T) {
	group := newKey("group-deadline")
	ttl := 1500 * time.Millisecond
	ca := newCallbacks(0)
	opts := ca.options(group, "a", ttl, 2)
	opts.Logf = t.Logf
	a := join(t, opts)
	grants := a.Owned() // (no round can succeed from the lock on: these are the grants held then)
	if len(grants) != 2 {
		t.Fatalf("owns %v", grants)
	}
	ctx := context.Background()
	locker, err := pgx.Connect(ctx, dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer locker.Close(ctx)
	tx, err := locker.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// every le_join of the member waits for its session's row
	if _, err := tx.Exec(ctx, `SELECT 1 FROM leaderlock_sessions s JOIN leaderlock_members m USING (session)
		WHERE m.grp = $1 AND m.member = $2 FOR UPDATE OF s`, group, "a"); err != nil {
		t.Fatal(err)
	}
	locked := time.Now()
	time.Sleep(ttl / 2)
	if n := len(a.Owned()); n != 2 {
		t.Fatalf("owns %d partitions %v after its row was locked, before its deadline", n, time.Since(locked))
	}
	// told by OnRevoked at the deadline, with no Owns asked meanwhile
	eventually(t, ttl, func() bool { return ca.count(ca.returned) == 2 })
	var told time.Duration
	ca.mu.Lock()
	for _, ts := range ca.revoked {
		if d := ts[0].Sub(locked); d > told {
			told = d
		}
	}
	ca.mu.Unlock()
	t.Logf("every partition lost (OnRevoked) %d ms after the member's row was locked (ttl %v)", told.Milliseconds(), ttl)
	// The deadline is at most ttl after the lock (every round applied was
	// sent before it); OnRevoked runs on a goroutine after it: a
	// scheduling allowance.
	if told > ttl+250*time.Millisecond {
		t.Fatalf("told %v after the lock (ttl %v)", told, ttl)
	}
	// None of the grants held at the lock is owned now. (Past the server's
	// expiry of its session the member may join again, in a new session and
	// later terms, while the row is still locked: those are not these.)
	for p, term := range a.Owned() {
		if was, ok := grants[p]; ok && term <= was {
			t.Fatalf("owns partition %d in term %d (held in term %d at the lock) past its deadline", p, term, was)
		}
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	// joins again (a new session: the old one lapsed)
	owningWithin(t, 4*ttl, map[*Member]int{a: 2})
}

// ttlHinted: rounds every 2 s; a newcomer that owns its share within
// newcomerBound owes it to a hint.
const (
	ttlHinted     = 6 * time.Second
	newcomerBound = time.Second
)

func TestGroupNewcomerOwnsItsShareWellWithinARenewalPeriod(t *testing.T) {
	var took []string
	for i := 0; i < 3; i++ {
		group := newKey("group-newcomer")
		a := join(t, newCallbacks(0).options(group, "a", ttlHinted, 4))
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		b := join(t, newCallbacks(0).options(group, "b", ttlHinted, 0))
		owningWithin(t, newcomerBound, map[*Member]int{a: 2, b: 2})
		took = append(took, fmt.Sprintf("%d ms", time.Since(start).Milliseconds()))
	}
	t.Logf("a newcomer owned its 2 of 4 partitions %v after JoinGroup began (rounds every %v)", took, ttlHinted/3)
}

// Any role may notify: forged hints naming the member, as fast as one
// session sends them, bring rounds sooner at most once per ttl/30.
func TestGroupAFloodOfForgedHintsBringsRoundsAtABoundedRate(t *testing.T) {
	group := newKey("group-flood")
	ttl := 3 * time.Second // rounds every 1 s; sooner at most every 100 ms
	m := join(t, newCallbacks(0).options(group, "a", ttl, 2))
	c, err := pgx.Connect(context.Background(), dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	before, start, sent := m.rounds.Load(), time.Now(), 0
	for time.Since(start) < 2*time.Second {
		sent++
		payload := fmt.Sprintf(`{"event":"partition_granted","group":%q,"partition":1,"member":"a","term":%d,"at":"t"}`, group, sent)
		if _, err := c.Exec(context.Background(), "SELECT pg_notify('leaderlock', $1)", payload); err != nil {
			t.Fatal(err)
		}
	}
	rounds := m.rounds.Load() - before
	t.Logf("%d forged hints in %v: %d rounds", sent, time.Since(start).Round(time.Millisecond), rounds)
	if rounds < 10 || rounds > 22 {
		t.Fatalf("%d rounds in 2 s of hints: not one per %v", rounds, ttl/30)
	}
	if len(m.Owned()) != 2 {
		t.Fatalf("owns %v", m.Owned())
	}
}

func TestGroupLeaveHandsPartitionsOverAtOnce(t *testing.T) {
	group := newKey("group-leave")
	ca, cb := newCallbacks(0), newCallbacks(time.Second)
	a := join(t, ca.options(group, "a", ttlHinted, 4))
	b := join(t, cb.options(group, "b", ttlHinted, 0))
	owningWithin(t, newcomerBound, map[*Member]int{a: 2, b: 2})
	theirs := b.Owned()
	start := time.Now()
	left := make(chan error, 1)
	go func() { left <- b.Leave(context.Background()) }()
	// b owns nothing from Leave on, well before its drain ends (a
	// scheduling allowance for the goroutine that calls Leave)
	owningWithin(t, 250*time.Millisecond, map[*Member]int{b: 0})
	time.Sleep(200 * time.Millisecond) // b drains: its partitions stay its own on the server
	if d := time.Since(start); d >= cb.drain {
		t.Logf("(looked %v after Leave began, past b's drain: not asked whether a waited)", d)
	} else if n := len(a.Owned()); n != 2 {
		t.Fatalf("a owns %d partitions while b drains", n)
	}
	if err := <-left; err != nil {
		t.Fatal(err)
	}
	returned := time.Since(start)
	owningWithin(t, newcomerBound, map[*Member]int{a: 4})
	t.Logf("Leave returned after %d ms (OnRevoked drains %v); a owned all 4 %d ms after Leave began",
		returned.Milliseconds(), cb.drain, time.Since(start).Milliseconds())
	for p, term := range theirs {
		if now, _ := a.Owns(p); now <= term {
			t.Errorf("partition %d: a owns it in term %d, b did in %d", p, now, term)
		}
	}
	if cb.count(cb.returned) != 2 || returned < cb.drain {
		t.Errorf("Leave returned after %v, %d OnRevoked returned", returned, cb.count(cb.returned))
	}
	select {
	case <-b.Stopped():
	default:
		t.Error("the member has not stopped after Leave")
	}
}

// Owns reads the clock: past the membership's deadline it is false with
// no timer run (none here).
func TestOwnsReadsTheClock(t *testing.T) {
	m := &Member{ctx: context.Background(), parts: map[int32]*partition{}}
	deadline := time.Now().Add(300 * time.Millisecond)
	of := newTenure(context.Background(), deadline)
	m.cur = of
	m.apply(of, []assignedRow{{partitionTerm{3, 7}, "owned"}})
	term, ok := m.Owns(3)
	after := time.Now() // Owns read the clock before this
	if (!ok && after.Before(deadline)) || (ok && term != 7) {
		t.Fatalf("Owns(3) = %d, %v, %v before the deadline", term, ok, deadline.Sub(after))
	}
	time.Sleep(time.Until(deadline) + 10*time.Millisecond)
	if _, ok := m.Owns(3); ok {
		t.Fatal("owned past the deadline")
	}
}

func TestJoinGroupBadOptions(t *testing.T) {
	for _, opts := range []GroupOptions{{}, {Group: "g", TTL: -time.Second}, {Group: "g", Partitions: -1}} {
		if _, err := JoinGroup(context.Background(), "postgres://nowhere", opts); !errors.Is(err, ErrBadArgument) {
			t.Errorf("%+v: %v", opts, err)
		}
	}
}

func TestOnlyWellFormedAnnouncementsNamingTheMemberAreHints(t *testing.T) {
	ok := `{"event":"partition_granted","group":"g","partition":3,"member":"m","term":7,"at":"t","extra":1}`
	if !namesMember(ok, "g", "m") {
		t.Errorf("not a hint: %s", ok)
	}
	for _, bad := range []string{
		ok[:len(ok)-1],
		`[1]`,
		`{"event":"partition_granted","group":"g","partition":3,"member":"other","term":7,"at":"t"}`,
		`{"event":"partition_granted","group":"h","partition":3,"member":"m","term":7,"at":"t"}`,
		`{"event":"acquired","group":"g","partition":3,"member":"m","term":7,"at":"t"}`,
		`{"event":"partition_revoked","group":"g","partition":0,"member":"m","term":7,"at":"t"}`,
		`{"event":"partition_revoked","group":"g","partition":3,"member":"m","term":-1,"at":"t"}`,
		`{"event":"partition_revoked","group":"g","partition":3,"member":"m","term":"7","at":"t"}`,
		`{"event":"partition_revoked","group":"g","partition":3.5,"member":"m","term":7,"at":"t"}`,
		`{"event":"partition_freed","group":"g","partition":3,"member":"m","term":7}`,
		`{"event":"partition_freed","group":"g","partition":3,"member":"m","term":7,"at":null}`,
	} {
		if namesMember(bad, "g", "m") {
			t.Errorf("a hint: %s", bad)
		}
	}
}
