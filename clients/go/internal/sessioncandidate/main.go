// The Go client's sessions as a separate process, for the paused-process
// test (session_test.go):
//
//	sessioncandidate DSN ID TTL_SECONDS RECORDS KEY...
//
// It opens a session as ID with a ttl of TTL_SECONDS, acquires every KEY
// under it (waiting up to 10 s for each), appends "ready ID" to RECORDS,
// then works without pause, as a batch processor does: for each lease,
// lease.Check() right before each unit of work, which is appending
// "tick ID TERM UNIX_SECONDS" (one write per line) and computing for 2 ms
// (no timer, no channel: only the check can stop it). The first failed
// check appends "lost ID TERM UNIX_SECONDS" and ends it (status 3);
// SIGTERM (SIGINT) closes the session (status 0).
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
	if len(os.Args) < 6 {
		fmt.Fprintln(os.Stderr, "usage: sessioncandidate DSN ID TTL_SECONDS RECORDS KEY...")
		os.Exit(2)
	}
	dsn, id, keys := os.Args[1], os.Args[2], os.Args[5:]
	ttl, err := strconv.ParseFloat(os.Args[3], 64)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sessioncandidate: TTL_SECONDS:", err)
		os.Exit(2)
	}
	records, err := os.OpenFile(os.Args[4], os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sessioncandidate:", err)
		os.Exit(2)
	}
	record := func(line string) {
		if _, err := records.Write([]byte(line + "\n")); err != nil { // one write per line
			log.Printf("sessioncandidate: %v", err)
		}
	}
	now := func() string { return fmt.Sprintf("%.6f", float64(time.Now().UnixNano())/1e9) }

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	s, err := leaderlock.OpenSession(ctx, dsn, leaderlock.SessionConfig{
		TTL: time.Duration(ttl * float64(time.Second)), ID: id, Logf: log.Printf})
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(context.Background())
	var leases []*leaderlock.SessionLease
	for _, key := range keys {
		lease, err := s.Acquire(ctx, key, 10*time.Second)
		if err != nil {
			log.Fatal(err)
		}
		leases = append(leases, lease)
	}
	record("ready " + id)
	for ctx.Err() == nil {
		for _, lease := range leases {
			// Right before each unit of work: Check reads the clock.
			if err := lease.Check(); err != nil {
				record(fmt.Sprintf("lost %s %d %s", id, lease.Term, now()))
				log.Printf("lost: %v", err)
				s.Close(context.Background())
				os.Exit(3)
			}
			record(fmt.Sprintf("tick %s %d %s", id, lease.Term, now()))
			for start := time.Now(); time.Since(start) < 2*time.Millisecond; {
			}
		}
	}
}
