package leaderlock

// Lock, driven call by call (as resourcelock does for client-go), against
// a real server: reads, acquisitions on the term read, renewals, the local
// deadline, a refused renewal, Guard and a release handed over.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func newTestLock(t *testing.T, key, id string) *Lock {
	t.Helper()
	l, err := NewLock(LockConfig{ConnString: dsn(t), Key: key, Identity: id, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func TestLockAcquiresOnTheTermReadRenewsAndHandsOver(t *testing.T) {
	ctx := context.Background()
	key := newKey("lock")
	a, b := newTestLock(t, key, "a"), newTestLock(t, key, "b")
	r, err := a.Read(ctx)
	if err != nil || r.Exists || r.Holder != "" || r.Term != 0 {
		t.Fatalf("a key never held: %+v, %v", r, err)
	}
	if ok, err := a.Acquire(ctx, 2*time.Second, LockRecord{Exists: true, Term: 7, ExpiresAt: time.Now()}); ok || !errors.Is(err, ErrLockChanged) {
		t.Fatalf("Acquire on a term the key never had: %v, %v", ok, err)
	}
	sent := time.Now()
	if ok, err := a.Acquire(ctx, 2*time.Second, r); !ok || err != nil {
		t.Fatalf("Acquire: %v, %v", ok, err)
	}
	lease, held := a.Lease()
	if !held || lease.Check() != nil || lease.Term < 1 {
		t.Fatalf("the tenure: %+v, held %v, Check %v", lease, held, lease.Check())
	}
	if d := lease.Deadline(); d.Before(sent.Add(2*time.Second-10*time.Millisecond)) || d.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("deadline %v, not the send time + ttl - ttl/200", time.Until(d))
	}
	r, err = b.Read(ctx)
	if err != nil || !r.Exists || r.Holder != "a" || r.Term != lease.Term || r.TTL != 2*time.Second ||
		r.AcquiredAt.IsZero() || r.RenewedAt.Before(r.AcquiredAt) {
		t.Fatalf("b reads %+v, %v", r, err)
	}
	if ok, err := b.Acquire(ctx, 2*time.Second, r); ok || err != nil {
		t.Fatalf("b's Acquire while a holds it: %v, %v", ok, err)
	}
	if ok, err := a.Acquire(ctx, 2*time.Second, r); ok || err == nil {
		t.Fatalf("a's Acquire while it holds the key: %v, %v", ok, err)
	}
	before := lease.Deadline()
	time.Sleep(50 * time.Millisecond)
	if ok, err := a.Renew(ctx, 2*time.Second); !ok || err != nil {
		t.Fatalf("Renew: %v, %v", ok, err)
	}
	if !lease.Deadline().After(before) {
		t.Fatal("the renewal did not move the deadline")
	}
	if ok, err := b.Acquire(ctx, 2*time.Second, r); ok || !errors.Is(err, ErrLockChanged) {
		t.Fatalf("b's Acquire on the lease as it was before a renewed: %v, %v", ok, err)
	}
	stale := r
	if work, held := a.Lease(); !held || work.Term != lease.Term {
		t.Fatal("Lease() after a renewal")
	}
	lctx, cancel := lease.Context(ctx)
	defer cancel()
	if err := a.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(lease.Check(), context.Canceled) || lctx.Err() == nil {
		t.Fatalf("after Release: Check %v, the context's Err %v", lease.Check(), lctx.Err())
	}
	select {
	case <-lctx.Done():
	case <-time.After(time.Second):
		t.Fatal("the tenure's context is not done after the release")
	}
	if ok, err := a.Renew(ctx, 2*time.Second); ok || err != nil {
		t.Fatalf("Renew after the release: %v, %v", ok, err)
	}
	r, err = b.Read(ctx)
	if err != nil || r.Holder != "" || r.Term != lease.Term {
		t.Fatalf("after the release b reads %+v, %v", r, err)
	}
	if ok, err := b.Acquire(ctx, 2*time.Second, stale); ok || !errors.Is(err, ErrLockChanged) {
		t.Fatalf("b's Acquire on the lease as it was before the release: %v, %v", ok, err)
	}
	released := time.Now()
	if ok, err := b.Acquire(ctx, 2*time.Second, r); !ok || err != nil {
		t.Fatalf("b's Acquire after the release: %v, %v", ok, err)
	}
	lb, _ := b.Lease()
	t.Logf("b led in term %d, %d ms after a's release", lb.Term, time.Since(released).Milliseconds())
	if lb.Term <= lease.Term {
		t.Fatalf("b's term %d after a's %d", lb.Term, lease.Term)
	}
	if ok, err := a.Acquire(ctx, 2*time.Second, r); ok || !errors.Is(err, ErrLockChanged) {
		t.Fatalf("a's Acquire on the lease as it was before b's tenure: %v, %v", ok, err)
	}
}

func TestLockTenureEndsAtItsLocalDeadlineAndAtARefusal(t *testing.T) {
	ctx := context.Background()
	key := newKey("lock-deadline")
	a := newTestLock(t, key, "a")
	if ok, err := a.Acquire(ctx, 300*time.Millisecond, LockRecord{}); !ok || err != nil {
		t.Fatalf("Acquire: %v, %v", ok, err)
	}
	lease, _ := a.Lease()
	lctx, cancel := lease.Context(ctx)
	defer cancel()
	time.Sleep(time.Until(lease.Deadline()))
	var lost *LostError
	if err := lease.Check(); !errors.As(err, &lost) || lost.Reason != StopDeadline || !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Check past the deadline: %v", err)
	}
	if lctx.Err() == nil {
		t.Fatal("the context's Err past the deadline")
	}
	if ok, err := a.Renew(ctx, 300*time.Millisecond); ok || err != nil {
		t.Fatalf("Renew past the deadline: %v, %v", ok, err)
	}

	// a new tenure, force-released by an operator: the renewal is refused
	// (once the server's lease has lapsed too: it ends after the local
	// deadline, by the time the acquisition took to come back)
	for until := time.Now().Add(5 * time.Second); leader(t, key) != "" && time.Now().Before(until); {
		time.Sleep(5 * time.Millisecond)
	}
	r, _ := a.Read(ctx)
	if ok, err := a.Acquire(ctx, 5*time.Second, r); !ok || err != nil {
		t.Fatalf("Acquire again: %v, %v", ok, err)
	}
	lease, _ = a.Lease()
	query(t, "SELECT le_force_release($1)", key)
	if ok, err := a.Renew(ctx, 5*time.Second); ok || err != nil {
		t.Fatalf("Renew after le_force_release: %v, %v", ok, err)
	}
	if err := lease.Check(); !errors.As(err, &lost) || lost.Reason != StopRefused {
		t.Fatalf("Check after a refused renewal: %v", err)
	}
}

func TestLockGuardFencesWithTheTerm(t *testing.T) {
	ctx := context.Background()
	key := newKey("lock-guard")
	a := newTestLock(t, key, "a")
	if ok, err := a.Acquire(ctx, 5*time.Second, LockRecord{}); !ok || err != nil {
		t.Fatalf("Acquire: %v, %v", ok, err)
	}
	lease, _ := a.Lease()
	c, err := pgx.Connect(ctx, dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Guard(ctx, tx); err != nil {
		t.Fatalf("Guard while leading: %v", err)
	}
	_ = tx.Rollback(ctx)
	query(t, "SELECT le_force_release($1)", key)
	tx, err = c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if err := lease.Guard(ctx, tx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Guard after a force-release: %v", err)
	}
	if lease.Check() == nil {
		t.Fatal("the tenure goes on after LE001")
	}
}
