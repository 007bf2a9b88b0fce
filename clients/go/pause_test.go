package leaderlock

// A leader process paused (SIGSTOP) past its ttl, then resumed: the
// README's idiom (internal/candidate) must not do one more unit of work
// once its local deadline has passed. After the pause, its ticker, the
// deadline timer and the renewal all fire at once; a select on ctx.Done()
// and a ticker picks at random, so the idiom checks ctx.Err(), which reads
// the clock.

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestAPausedLeaderDoesNothingPastItsDeadline(t *testing.T) {
	dsn(t)
	if os.Getenv("LEADERLOCK_EDITION") == "portable" {
		// what a paused process does is the client's: the same against either edition
		t.Skip("client-side: run against the compiled edition")
	}
	const rounds = 2
	ttl := 1500 * time.Millisecond
	for round := 1; round <= rounds; round++ {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) { pausedPastItsDeadline(t, ttl) })
	}
}

func pausedPastItsDeadline(t *testing.T, ttl time.Duration) {
	key := newKey("paused")
	records := filepath.Join(t.TempDir(), "records")
	a := startCandidate(t, key, "a", ttl, records)
	eventually(t, 15*time.Second, func() bool { return lastTicker(t, records) == "a" })
	startCandidate(t, key, "b", ttl, records)
	eventually(t, 10*time.Second, func() bool { return leader(t, key) == "a" && len(readTicks(t, records)) > 10 })
	time.Sleep(300 * time.Millisecond) // b is waiting, a renewing

	a.signal(t, syscall.SIGSTOP)
	pausedAt := time.Now()
	eventually(t, ttl+5*time.Second, func() bool { return lastTicker(t, records) == "b" })
	time.Sleep(ttl)
	a.signal(t, syscall.SIGCONT)
	resumedAt := time.Now()
	time.Sleep(time.Second)

	var termA int64
	var lastA time.Time
	for _, tk := range readTicks(t, records) {
		if tk.id == "a" && tk.at.After(lastA) {
			lastA, termA = tk.at, tk.term
		}
	}
	late := 0
	for _, tk := range readTicks(t, records) {
		// a's lease could not outlive the pause by more than the ttl
		if tk.id == "a" && tk.term == termA && tk.at.After(pausedAt.Add(ttl)) {
			late++
		}
	}
	t.Logf("a paused %.1f s (ttl %v); its last tick %d ms after the pause; b led meanwhile",
		resumedAt.Sub(pausedAt).Seconds(), ttl, lastA.Sub(pausedAt).Milliseconds())
	if late > 0 {
		t.Fatalf("the paused leader did %d units of work past its deadline (last %d ms after it resumed)",
			late, lastA.Sub(resumedAt).Milliseconds())
	}
	if h := leader(t, key); h != "b" {
		t.Fatalf("leader after a resumed: %q", h)
	}
}
