package leaderlock

// Lease.Guard fences the leader's writes: it lets a transaction through
// while the lease is held, and refuses (ErrLeaseLost, LE001 from the
// server) once it is lost, ending the tenure at once; the transaction then
// rolls back. And OnStartedLeading's context reads the clock: past the
// local deadline its Err is not nil, whether or not a timer has run.

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

func TestGuardLetsTheLeaderWriteAndRefusesAfterALoss(t *testing.T) {
	if su, _ := query(t, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").(bool); !su {
		t.Skip("LEADERLOCK_DSN's role is not a superuser (le_force_release)")
	}
	key := newKey("guard")
	work, err := pgx.Connect(context.Background(), dsn(t))
	if err != nil {
		t.Fatal(err)
	}
	defer work.Close(context.Background())
	if _, err := work.Exec(context.Background(), "CREATE TEMP TABLE writes (term bigint)"); err != nil {
		t.Fatal(err)
	}
	// write is what the README shows: Guard first in the transaction.
	write := func(ctx context.Context, lease Lease) error {
		tx, err := work.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.Background())
		if err := lease.Guard(ctx, tx); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "INSERT INTO writes VALUES ($1)", lease.Term); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	var first, second error
	var ctxErr error
	reason := make(chan StopReason, 1)
	e, err := NewElector(Config{ConnString: dsn(t), Key: key, TTL: 10 * time.Second, Callbacks: LeaderCallbacks{
		OnStartedLeading: func(ctx context.Context, lease Lease) {
			first = write(ctx, lease)
			query(t, "SELECT le_force_release($1)", key) // an operator takes the lease away
			query(t, "SELECT le_try_acquire($1, 'rival', '30 seconds')", key)
			second = write(ctx, lease)
			ctxErr = ctx.Err() // synchronously: the Guard's refusal ended the tenure
		},
		OnStoppedLeading: func(r StopReason) { reason <- r },
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Run(ctx); err != nil {
		t.Fatal(err)
	}
	defer query(t, "SELECT le_release($1, 'rival')", key)
	if first != nil {
		t.Fatalf("the leader's guarded write failed: %v", first)
	}
	var lost *LostError
	var pe *pgconn.PgError
	if !errors.Is(second, ErrLeaseLost) || !errors.As(second, &lost) || lost.Reason != StopRefused ||
		!errors.As(second, &pe) || pe.Code != "LE001" {
		t.Fatalf("the write after the loss: %v", second)
	}
	if !errors.Is(ctxErr, ErrLeaseLost) {
		t.Fatalf("the context after the Guard's refusal: %v", ctxErr)
	}
	if r := <-reason; r != StopRefused {
		t.Fatalf("reason %v", r)
	}
	var n int64
	if err := work.QueryRow(context.Background(), "SELECT count(*) FROM writes").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d writes (%v): the one after the loss was not rolled back", n, err)
	}
}

func TestTheLeaseContextReadsTheClock(t *testing.T) {
	// No timer runs here: only the clock can end this tenure.
	deadline := time.Now().Add(300 * time.Millisecond)
	tn := newTenure(context.Background(), deadline)
	ctx, lease := leaseContext{tn}, Lease{t: tn}
	valid := ctx.Err() == nil && lease.Check() == nil
	after := time.Now() // both read the clock before this
	if !valid && after.Before(deadline) {
		t.Fatalf("not valid %v before its deadline", deadline.Sub(after))
	}
	time.Sleep(time.Until(deadline) + 10*time.Millisecond)
	if !valid { // (looked at or past the deadline: that look may have closed Done)
		t.Logf("the first look ended %v past the deadline", after.Sub(deadline))
	} else {
		select {
		case <-ctx.Done():
			t.Fatal("Done closed before anything looked")
		default:
		}
	}
	err := ctx.Err()
	if !errors.Is(err, ErrLeaseLost) || !errors.Is(err, context.DeadlineExceeded) || lease.Valid() {
		t.Fatalf("past the deadline: %v", err)
	}
	select {
	case <-ctx.Done():
	default:
		t.Fatal("Err was not nil but Done was open")
	}
	var tx pgx.Tx // never reached: the Guard checks the clock first
	if err := lease.Guard(context.Background(), tx); !errors.Is(err, ErrLeaseLost) {
		t.Fatalf("Guard past the deadline: %v", err)
	}
}
