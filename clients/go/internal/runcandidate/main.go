// The Go client as a runner of scheduled runs for the scenario suite:
//
//	runcandidate DSN JOB ID PERIOD_MS TTL_SECONDS GRACE_SECONDS RECORDS WORK_SECONDS
//
// It schedules JOB every PERIOD_MS milliseconds as ID, with a claim ttl of
// TTL_SECONDS and a misfire grace of GRACE_SECONDS (0: the default, the
// period; negative: none). For each run it appends to RECORDS (O_APPEND,
// one write per line) "start ID TERM DUE UNIX_SECONDS", then until
// WORK_SECONDS have passed: if the run is no longer ours, "lost ..." and
// the callback returns nil; else "tick ..." and a 20 ms sleep; then
// "end ...". DUE is the due instant in UTC (2006-01-02T15:04:05.000000Z),
// UNIX_SECONDS the time of the line, with 6 decimals. SIGTERM (SIGINT)
// ends it with status 143 (130), once the run under way has returned and
// its outcome was recorded.
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
	if len(os.Args) != 9 {
		fmt.Fprintln(os.Stderr, "usage: runcandidate DSN JOB ID PERIOD_MS TTL_SECONDS GRACE_SECONDS RECORDS WORK_SECONDS")
		os.Exit(2)
	}
	dsn, job, id, recordsPath := os.Args[1], os.Args[2], os.Args[3], os.Args[7]
	number := func(i int, name string) float64 {
		v, err := strconv.ParseFloat(os.Args[i], 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "runcandidate: %s: %v\n", name, err)
			os.Exit(2)
		}
		return v
	}
	seconds := func(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }
	period := time.Duration(number(4, "PERIOD_MS")) * time.Millisecond
	ttl := seconds(number(5, "TTL_SECONDS"))
	grace := seconds(number(6, "GRACE_SECONDS"))
	work := seconds(number(8, "WORK_SECONDS"))
	records, err := os.OpenFile(recordsPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "runcandidate:", err)
		os.Exit(2)
	}
	// Each record bears the time read before the check that allowed it: a
	// pause between the check and the write (a SIGSTOP) must not date the
	// unit of work after the pause.
	record := func(kind string, run *leaderlock.ScheduledRun, at time.Time) {
		line := fmt.Sprintf("%s %s %d %s %.6f\n", kind, id, run.Term,
			run.Due.UTC().Format("2006-01-02T15:04:05.000000Z"), float64(at.UnixNano())/1e9)
		if _, err := records.Write([]byte(line)); err != nil { // one write per line
			log.Printf("runcandidate: %v", err)
		}
	}

	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGTERM, os.Interrupt)
	ctx, cancel := context.WithCancel(context.Background())
	code := 0
	go func() {
		sig := <-signals
		if sig == syscall.SIGTERM {
			code = 128 + int(syscall.SIGTERM)
		} else {
			code = 128 + int(syscall.SIGINT)
		}
		cancel()
	}()
	err = leaderlock.Schedule(ctx, leaderlock.ScheduleConfig{
		ConnString:   dsn,
		Job:          job,
		Identity:     id,
		Every:        period,
		TTL:          ttl,
		MisfireGrace: grace,
		Logf:         log.Printf,
	}, func(ctx context.Context, run *leaderlock.ScheduledRun) error {
		at := time.Now()
		if !run.IsOurs() { // (paused right after the claim)
			record("lost", run, at)
			return nil
		}
		record("start", run, at)
		end := time.Now().Add(work)
		for time.Now().Before(end) {
			// Right before each unit of work: IsOurs reads the clock.
			at = time.Now()
			if !run.IsOurs() {
				record("lost", run, at)
				return nil
			}
			record("tick", run, at)
			time.Sleep(20 * time.Millisecond)
		}
		record("end", run, time.Now())
		return nil
	})
	records.Close()
	if err != nil {
		log.Printf("runcandidate: %v", err)
		os.Exit(1)
	}
	<-ctx.Done() // Schedule returns nil only once ctx is done
	os.Exit(code)
}
