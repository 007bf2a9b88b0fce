// A controller-runtime manager whose leader election is a leaderlock
// lease (docs/kubernetes.md):
//
//	manager DSN IDENTITY
//
// It runs no controller (those need an API server to watch): its one
// runnable needs leader election, prints the term it leads in, and checks
// the lease before each unit of work. SIGTERM: the manager stops it, and
// releases (LeaderElectionReleaseOnCancel).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/leaderlock/leaderlock/clients/go/resourcelock"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: manager DSN IDENTITY")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1], os.Args[2], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

// run is the manager of IDENTITY until ctx ends; what it does goes to out.
func run(ctx context.Context, dsn, id string, out *os.File) error {
	// The switch: a leaderlock lease instead of a Kubernetes Lease.
	lock, err := resourcelock.New(resourcelock.Config{ConnString: dsn, Key: "example-manager", Identity: id})
	if err != nil {
		return err
	}
	defer lock.Close()
	lease, renew, retry := 2*time.Second, 1500*time.Millisecond, 100*time.Millisecond
	// No API server here: a rest.Config that points nowhere. Nothing below
	// calls it (no controller, no cache in use, no webhook).
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, manager.Options{
		LeaderElection:                      true,
		LeaderElectionID:                    "example-manager",
		LeaderElectionResourceLockInterface: lock,
		LeaderElectionReleaseOnCancel:       true,
		LeaseDuration:                       &lease,
		RenewDeadline:                       &renew,
		RetryPeriod:                         &retry,
		Metrics:                             metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:              "0",
	})
	if err != nil {
		return err
	}
	// A runnable that needs leader election, as a controller does.
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		l, _ := lock.Lease()
		fmt.Fprintf(out, "leading %s %d %.6f\n", id, l.Term, float64(time.Now().UnixNano())/1e9)
		for {
			if err := l.Check(); err != nil { // the local deadline, read from the clock
				fmt.Fprintf(out, "lost %s %d %v\n", id, l.Term, err)
				return nil
			}
			select {
			case <-ctx.Done():
				fmt.Fprintf(out, "stopping %s %d %.6f\n", id, l.Term, float64(time.Now().UnixNano())/1e9)
				return nil
			case <-time.After(20 * time.Millisecond):
			}
		}
	}))
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}
