// The Go client as a candidate of the scenario suite (tests/clients):
//
//	candidate DSN KEY ID TTL_SECONDS RECORDS [IDIOM]
//
// IDIOM is the README's way of using the client; Go has one, runordie (the
// default). The program is that idiom, word for word, with appending
// "tick ID TERM UNIX_SECONDS" to RECORDS every 20 ms as the unit of work:
// RunOrDie in a loop, ReleaseOnCancel, SIGTERM or SIGINT cancelling the
// context, and ctx.Err() checked before each unit of work.
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	leaderlock "github.com/leaderlock/leaderlock/clients/go"
)

func main() {
	if len(os.Args) < 6 || len(os.Args) > 7 || (len(os.Args) == 7 && os.Args[6] != "runordie") {
		fmt.Fprintln(os.Stderr, "usage: candidate DSN KEY ID TTL_SECONDS RECORDS [runordie]")
		os.Exit(2)
	}
	ttl, err := strconv.ParseFloat(os.Args[4], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "candidate: TTL_SECONDS:", err)
		os.Exit(2)
	}
	records, err := os.OpenFile(os.Args[5], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "candidate:", err)
		os.Exit(2)
	}
	doWork := func(ctx context.Context, lease leaderlock.Lease) {
		fmt.Fprintf(records, "tick %s %d %.6f\n", lease.Identity, lease.Term, float64(time.Now().UnixNano())/1e9)
	}

	// The README's idiom from here on.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg := leaderlock.Config{
		ConnString:      os.Args[1],
		Key:             os.Args[2],
		Identity:        os.Args[3],
		TTL:             time.Duration(ttl * float64(time.Second)),
		ReleaseOnCancel: true, // on SIGTERM: hand over at once
		Logf:            log.Printf,
		Callbacks: leaderlock.LeaderCallbacks{
			OnStartedLeading: func(ctx context.Context, lease leaderlock.Lease) {
				tick := time.NewTicker(20 * time.Millisecond)
				defer tick.Stop()
				for {
					// Before each unit of work: Err() reads the clock.
					if ctx.Err() != nil {
						return
					}
					doWork(ctx, lease)
					select {
					case <-ctx.Done():
						return
					case <-tick.C:
					}
				}
			},
			OnStoppedLeading: func(reason leaderlock.StopReason) {
				log.Printf("stopped leading: %s", reason)
			},
		},
	}
	for ctx.Err() == nil { // campaign again after a tenure ends
		leaderlock.RunOrDie(ctx, cfg)
	}
}
