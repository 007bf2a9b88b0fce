// A candidate of client-go's own LeaderElector on a leaderlock lease (this
// module's Lock), for the tests' three electors:
//
//	elector DSN KEY ID LEASE_MS RENEW_DEADLINE_MS RETRY_MS LOG
//
// It runs leaderelection.LeaderElector.Run in a loop, a new Lock each time
// (a Lock serves one Run), with ReleaseOnCancel and Lock.Callbacks; while
// leading it appends "tick ID TERM UNIX_SECONDS" to LOG every 20 ms,
// checking the context's Err (which reads the local deadline) before each.
// Its other lines: "start ID TERM T" when OnStartedLeading begins, "end ID
// TERM T ERR" when it returns, "stopped ID T" from OnStoppedLeading,
// "sigterm ID T" when SIGTERM (or SIGINT) arrives, which cancels Run's
// context: the LeaderElector releases, and the program exits.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/leaderlock/leaderlock/clients/go/resourcelock"
	"k8s.io/client-go/tools/leaderelection"
)

func main() {
	if len(os.Args) != 8 {
		fmt.Fprintln(os.Stderr, "usage: elector DSN KEY ID LEASE_MS RENEW_DEADLINE_MS RETRY_MS LOG")
		os.Exit(2)
	}
	dsn, key, id := os.Args[1], os.Args[2], os.Args[3]
	ms := func(s string) time.Duration {
		n, err := strconv.Atoi(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "elector:", err)
			os.Exit(2)
		}
		return time.Duration(n) * time.Millisecond
	}
	lease, renew, retry := ms(os.Args[4]), ms(os.Args[5]), ms(os.Args[6])
	logFile, err := os.OpenFile(os.Args[7], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "elector:", err)
		os.Exit(2)
	}
	now := func() string { return fmt.Sprintf("%.6f", float64(time.Now().UnixNano())/1e9) }
	line := func(format string, args ...interface{}) { fmt.Fprintf(logFile, format+"\n", args...) }

	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	go func() {
		<-signals
		line("sigterm %s %s", id, now())
		cancel()
	}()
	for ctx.Err() == nil {
		lock, err := resourcelock.New(resourcelock.Config{ConnString: dsn, Key: key, Identity: id})
		if err != nil {
			fmt.Fprintln(os.Stderr, "elector:", err)
			os.Exit(2)
		}
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
			ReleaseOnCancel: true, Name: key,
			Callbacks: lock.Callbacks(leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					l, _ := lock.Lease()
					line("start %s %d %s", id, l.Term, now())
					tick := time.NewTicker(20 * time.Millisecond)
					defer tick.Stop()
					for {
						// Before each unit of work: Err() reads the clock.
						if err := ctx.Err(); err != nil {
							line("end %s %d %s %v", id, l.Term, now(), err)
							return
						}
						line("tick %s %d %s", id, l.Term, now())
						select {
						case <-ctx.Done():
						case <-tick.C:
						}
					}
				},
				OnStoppedLeading: func() { line("stopped %s %s", id, now()) },
			}),
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "elector:", err)
			os.Exit(2)
		}
		le.Run(ctx)
		lock.Close()
	}
}
