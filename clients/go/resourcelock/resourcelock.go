// Package resourcelock is client-go's resourcelock.Interface backed by a
// leaderlock lease: client-go's leaderelection.LeaderElector (and what is
// built on it, controller-runtime's manager among them) elects its leader
// in PostgreSQL instead of in a Kubernetes Lease, and the leader gets a
// fencing term and a local deadline.
//
// The LeaderElector's record maps onto the key's lease:
//
//	HolderIdentity        the live holder ("" when vacant or lapsed by the
//	                      server's lease clock)
//	LeaseDurationSeconds  the tenure's ttl, in whole seconds (rounded up)
//	AcquireTime           the tenure's start (the server's clock)
//	RenewTime             its last renewal
//	LeaderTransitions     the term (a fencing token that only grows)
//
// Get reads it (one statement; NotFound when the key was never held).
// Create acquires a key never held (AlreadyExists otherwise). Update is an
// optimistic write, as on the API server: it fails with a Conflict when the
// lease changed since Get. Writing this identity as holder renews the
// tenure this Lock holds (le_renew with its term: one HOT update of one
// row), or, with no tenure, acquires the key only if its term is still the
// one Get read and no one holds it live (the server decides, by its clock:
// a lapsed lease is taken at once, not after the LeaderElector's own
// observation of a full lease duration); writing an empty holder (the
// LeaderElector's ReleaseOnCancel) releases it. The term is
// Lease().Term; Lease().Check reads the local deadline; Lease().Guard
// fences a write in PostgreSQL.
//
// A Lock serves one LeaderElector.Run: once a tenure it held has ended
// (lost, past its local deadline, released), Create and Update fail, so
// that the elector steps down (its OnStartedLeading told to stop by
// Callbacks' context must not find itself leading again without being
// started again); make a new Lock for the next Run.
package resourcelock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	leaderlock "github.com/leaderlock/leaderlock/clients/go"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

// leases is the resource the errors name, as client-go's LeaseLock's do.
var leases = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// Config of New.
type Config struct {
	ConnString string // libpq-style DSN or URL (pgx)
	// Key is the leaderlock key the election holds (one slot).
	Key string
	// Identity is this candidate's, unique among them (the
	// LeaderElector's; client-go's ResourceLockConfig.Identity); required.
	Identity string
	// EventRecorder, when not nil, gets the LeaderElector's events
	// ("became leader", "stopped leading") on a Lease object named Key in
	// Namespace, as client-go's LeaseLock records them.
	EventRecorder rl.EventRecorder
	Namespace     string
	// Logf, when not nil, gets a line for each tenure's start and end and
	// each failed call.
	Logf func(format string, args ...interface{})
	// Schema names the schema that holds leaderlock's functions; default
	// the environment variable LEADERLOCK_SCHEMA, else the one found.
	Schema string
}

// Lock implements client-go's resourcelock.Interface on a leaderlock key.
type Lock struct {
	cfg  Config
	lock *leaderlock.Lock

	mu      sync.Mutex
	read    *leaderlock.LockRecord // what the last Get read; nil before
	held    bool                   // a tenure was won by this Lock
	running chan struct{}          // Callbacks' OnStartedLeading runs until closed
}

var _ rl.Interface = (*Lock)(nil)

// New checks the configuration; it connects on the first call.
func New(cfg Config) (*Lock, error) {
	if cfg.Identity == "" {
		return nil, errors.New("resourcelock: Identity must not be empty")
	}
	l, err := leaderlock.NewLock(leaderlock.LockConfig{ConnString: cfg.ConnString, Key: cfg.Key,
		Identity: cfg.Identity, Logf: cfg.Logf, Schema: cfg.Schema})
	if err != nil {
		return nil, err
	}
	return &Lock{cfg: cfg, lock: l}, nil
}

// record maps a lease onto client-go's record.
func record(r leaderlock.LockRecord) *rl.LeaderElectionRecord {
	renewed := r.RenewedAt
	if renewed.IsZero() {
		renewed = r.AcquiredAt
	}
	return &rl.LeaderElectionRecord{
		HolderIdentity:       r.Holder,
		LeaseDurationSeconds: int(math.Ceil(r.TTL.Seconds())),
		AcquireTime:          metav1.NewTime(r.AcquiredAt),
		RenewTime:            metav1.NewTime(renewed),
		LeaderTransitions:    int(r.Term),
	}
}

// Get returns the key's lease as client-go's record (NotFound when the key
// was never held), and its JSON.
func (l *Lock) Get(ctx context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	r, err := l.lock.Read(ctx)
	if err != nil {
		return nil, nil, err
	}
	if !r.Exists { // (then Update has nothing to write over: Create)
		return nil, nil, apierrors.NewNotFound(leases, l.cfg.Key)
	}
	l.mu.Lock()
	l.read = &r
	l.mu.Unlock()
	rec := record(r)
	// The record's times are whole seconds in JSON (metav1.Time): the
	// lease's version, its term and expiry to the microsecond, goes with
	// them, so that the LeaderElector, which compares these bytes to tell
	// a renewal, sees each one.
	raw, err := json.Marshal(struct {
		rl.LeaderElectionRecord
		Term      int64            `json:"term"`
		ExpiresAt metav1.MicroTime `json:"expiresAt"`
	}{*rec, r.Term, metav1.NewMicroTime(r.ExpiresAt)})
	if err != nil {
		return nil, nil, err
	}
	return rec, raw, nil
}

// ttl is the record's lease duration; at least a second.
func ttl(ler rl.LeaderElectionRecord) time.Duration {
	if ler.LeaseDurationSeconds < 1 {
		return time.Second
	}
	return time.Duration(ler.LeaseDurationSeconds) * time.Second
}

// ended is the error of a write after this Lock's tenure ended.
func (l *Lock) ended() error {
	return apierrors.NewConflict(leases, l.cfg.Key,
		errors.New("this Lock's tenure has ended (a Lock serves one LeaderElector.Run: make a new one)"))
}

// Create acquires the key if it was never held (AlreadyExists otherwise,
// or when another candidate acquired it first).
func (l *Lock) Create(ctx context.Context, ler rl.LeaderElectionRecord) error {
	if ler.HolderIdentity != l.cfg.Identity {
		return apierrors.NewBadRequest(fmt.Sprintf("resourcelock: Create with holder %q, not this Lock's identity %q",
			ler.HolderIdentity, l.cfg.Identity))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held {
		return l.ended()
	}
	ok, err := l.lock.Acquire(ctx, ttl(ler), leaderlock.LockRecord{})
	if errors.Is(err, leaderlock.ErrLockChanged) || (err == nil && !ok) {
		return apierrors.NewAlreadyExists(leases, l.cfg.Key)
	}
	if err != nil {
		return err
	}
	l.held = true
	return nil
}

// Update writes the record, if the lease did not change since Get: this
// identity as holder renews the tenure held, or acquires the key when none
// is; an empty holder releases it (after Callbacks' OnStartedLeading has
// returned). A change, a refusal, or a tenure that has ended: Conflict.
func (l *Lock) Update(ctx context.Context, ler rl.LeaderElectionRecord) error {
	switch ler.HolderIdentity {
	case "":
		return l.release(ctx)
	case l.cfg.Identity:
	default:
		return apierrors.NewBadRequest(fmt.Sprintf("resourcelock: Update with holder %q, not this Lock's identity %q",
			ler.HolderIdentity, l.cfg.Identity))
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held {
		if lease, _ := l.lock.Lease(); lease.Check() != nil {
			return l.ended()
		}
		ok, err := l.lock.Renew(ctx, ttl(ler))
		if err != nil {
			return err
		}
		if !ok {
			return l.ended()
		}
		return nil
	}
	if l.read == nil {
		return errors.New("resourcelock: Update before Get or Create")
	}
	ok, err := l.lock.Acquire(ctx, ttl(ler), *l.read)
	if errors.Is(err, leaderlock.ErrLockChanged) || (err == nil && !ok) {
		return apierrors.NewConflict(leases, l.cfg.Key, errors.New("the lease is held, or changed since it was read"))
	}
	if err != nil {
		return err
	}
	l.held = true
	return nil
}

// release: the LeaderElector's ReleaseOnCancel. The tenure ends locally
// first (its Check fails, Callbacks' context ends), then, once Callbacks'
// OnStartedLeading has returned (or the local deadline passed: then the
// lease lapses by itself), le_release with its term: the next candidate
// may lead at once. Nothing held, or a tenure that has ended: nothing to
// release, nil (as a release that found the record another's).
func (l *Lock) release(ctx context.Context) error {
	l.mu.Lock()
	running := l.running
	held := l.held
	l.mu.Unlock()
	lease, ok := l.lock.Lease()
	if !held || !ok || lease.Check() != nil {
		return nil
	}
	l.lock.Stop()
	if running != nil {
		deadline := time.NewTimer(time.Until(lease.Deadline()))
		defer deadline.Stop()
		select {
		case <-running:
		case <-deadline.C:
		case <-ctx.Done():
		}
	}
	return l.lock.Release(ctx)
}

// RecordEvent records the LeaderElector's events, if Config.EventRecorder.
func (l *Lock) RecordEvent(s string) {
	if l.cfg.EventRecorder == nil {
		return
	}
	subject := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: l.cfg.Key, Namespace: l.cfg.Namespace}}
	subject.Kind = "Lease"
	subject.APIVersion = coordinationv1.SchemeGroupVersion.String()
	l.cfg.EventRecorder.Eventf(subject, corev1.EventTypeNormal, "LeaderElection", "%s", l.cfg.Identity+" "+s)
}

// Identity is the candidate's identity.
func (l *Lock) Identity() string { return l.cfg.Identity }

// Describe names the lock in the LeaderElector's logs: leaderlock/KEY.
func (l *Lock) Describe() string { return "leaderlock/" + l.cfg.Key }

// Lease is the tenure this Lock holds or held last (Term: the fencing
// token; Check: nil while it is held by the local clock; Guard: fences a
// write in your transaction), and whether there is one.
func (l *Lock) Lease() (leaderlock.Lease, bool) { return l.lock.Lease() }

// Close ends the tenure held locally (it lapses at its ttl unless the
// LeaderElector released it) and closes the connection.
func (l *Lock) Close() { l.lock.Close() }

// Callbacks returns cb with OnStartedLeading given a context that also
// ends when the tenure does (a loss, the local deadline: its Err reads the
// clock on every call, so check it before each unit of work; a select on
// Done alone can act once more after a pause of the process), and with a
// release (ReleaseOnCancel) sent only once OnStartedLeading has returned:
// the next leader starts after this one has stopped, as with leaderlock's
// own Elector. Without it, the LeaderElector releases while
// OnStartedLeading may still run, and its context ends only when the
// elector has given up renewing.
func (l *Lock) Callbacks(cb leaderelection.LeaderCallbacks) leaderelection.LeaderCallbacks {
	started := cb.OnStartedLeading
	if started == nil {
		return cb
	}
	cb.OnStartedLeading = func(ctx context.Context) {
		lease, ok := l.lock.Lease()
		if !ok {
			return
		}
		lctx, cancel := lease.Context(ctx)
		defer cancel()
		done := make(chan struct{})
		l.mu.Lock()
		l.running = done
		l.mu.Unlock()
		defer close(done)
		started(lctx)
	}
	return cb
}
