// The Go client as a candidate of the scenario suite (tests/clients):
// candidate DSN KEY ID TTL_SECONDS RECORDS. While it leads it appends
// "tick ID TERM UNIX_SECONDS" to RECORDS every 20 ms, checking the lease
// before each; SIGTERM or SIGINT: stop and release.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	leaderlock "github.com/leaderlock/leaderlock/clients/go"
)

func main() {
	if len(os.Args) != 6 {
		fmt.Fprintln(os.Stderr, "usage: candidate DSN KEY ID TTL_SECONDS RECORDS")
		os.Exit(2)
	}
	ttl, err := strconv.ParseFloat(os.Args[4], 64)
	if err != nil {
		panic(err)
	}
	records, err := os.OpenFile(os.Args[5], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		panic(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	for ctx.Err() == nil {
		leaderlock.RunOrDie(ctx, leaderlock.Config{
			ConnString: os.Args[1], Key: os.Args[2], Identity: os.Args[3],
			TTL: time.Duration(ttl * float64(time.Second)),
			Callbacks: leaderlock.LeaderCallbacks{OnStartedLeading: func(ctx context.Context, l leaderlock.Lease) {
				for l.Valid() {
					now := float64(time.Now().UnixNano()) / 1e9
					fmt.Fprintf(records, "tick %s %d %.6f\n", l.Identity, l.Term, now)
					time.Sleep(20 * time.Millisecond)
				}
			}},
		})
	}
}
