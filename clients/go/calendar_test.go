package leaderlock

// A schedule's due instants (calendar.go), without a server.

import (
	"errors"
	"testing"
	"time"
)

func TestScheduleDueInstants(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UTC()
	}
	sched := func(cfg ScheduleConfig) *Scheduler {
		t.Helper()
		cfg.ConnString, cfg.Job = "postgres://localhost/none", "j"
		s, err := NewScheduler(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	next := func(s *Scheduler, from string, n int) []time.Time {
		t.Helper()
		var got []time.Time
		v := at(from)
		for i := 0; i < n; i++ {
			var ok bool
			if v, ok = s.NextAfter(v); !ok {
				t.Fatalf("no due instant after %v", v)
			}
			got = append(got, v)
		}
		return got
	}
	same := func(what string, got []time.Time, want ...string) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: %v, want %v", what, got, want)
			return
		}
		for i := range got {
			if !got[i].Equal(at(want[i])) || got[i].Location() != time.UTC {
				t.Errorf("%s: %v, want %v", what, got, want)
				return
			}
		}
	}

	// Every: multiples of the period since the Unix epoch (the Rust client's test)
	every := sched(ScheduleConfig{Every: 300 * time.Second})
	same("every 300s", next(every, "2026-11-27T10:02:03Z", 2), "2026-11-27T10:05:00Z", "2026-11-27T10:10:00Z")
	same("every 300s from a due instant", next(every, "2026-11-27T10:05:00Z", 1), "2026-11-27T10:10:00Z")
	if v, _ := every.atOrAfter(at("2026-11-27T10:05:00Z")); !v.Equal(at("2026-11-27T10:05:00Z")) {
		t.Errorf("atOrAfter a due instant: %v", v)
	}
	ms := sched(ScheduleConfig{Every: 300 * time.Millisecond})
	same("every 300ms", next(ms, "2026-11-27T10:00:00.250Z", 3),
		"2026-11-27T10:00:00.3Z", "2026-11-27T10:00:00.6Z", "2026-11-27T10:00:00.9Z")
	// 7 ms does not divide a second: still multiples since the epoch
	seven := sched(ScheduleConfig{Every: 7 * time.Millisecond})
	if v, _ := seven.NextAfter(at("2026-11-27T10:00:00Z")); v.UnixMilli()%7 != 0 || v.Sub(at("2026-11-27T10:00:00Z")) > 7*time.Millisecond {
		t.Errorf("every 7ms: %v", v)
	}

	// Cron in a time zone across daylight saving (the Rust client's test):
	// 02:30 in Paris does not exist on 2026-03-29 and is skipped; it occurs
	// twice on 2026-10-25 and is due once, at the first.
	paris := sched(ScheduleConfig{Cron: "30 2 * * *", TimeZone: "Europe/Paris"})
	same("spring", next(paris, "2026-03-27T12:00:00Z", 3), "2026-03-28T01:30:00Z", "2026-03-30T00:30:00Z", "2026-03-31T00:30:00Z")
	same("autumn", next(paris, "2026-10-24T12:00:00Z", 3), "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z", "2026-10-27T01:30:00Z")
	// every 20 minutes: the repeated hour's local times are not due again
	twenty := sched(ScheduleConfig{Cron: "*/20 * * * *", TimeZone: "Europe/Paris"})
	same("autumn, every 20 minutes", next(twenty, "2026-10-25T00:30:00Z", 3),
		"2026-10-25T00:40:00Z", "2026-10-25T02:00:00Z", "2026-10-25T02:20:00Z")
	same("spring, every 20 minutes", next(twenty, "2026-03-29T00:30:00Z", 2), "2026-03-29T00:40:00Z", "2026-03-29T01:00:00Z")
	// five fields mean minutes; six have seconds first; UTC by default
	same("five fields", next(sched(ScheduleConfig{Cron: "0 3 * * *"}), "2026-11-27T10:00:00Z", 1), "2026-11-28T03:00:00Z")
	same("six fields", next(sched(ScheduleConfig{Cron: "*/15 * * * * *"}), "2026-11-27T10:00:00.5Z", 2),
		"2026-11-27T10:00:15Z", "2026-11-27T10:00:30Z")
	same("weekdays by name", next(sched(ScheduleConfig{Cron: "0 9 * * MON-FRI", TimeZone: "UTC"}), "2026-11-27T10:00:00Z", 2),
		"2026-11-30T09:00:00Z", "2026-12-01T09:00:00Z") // 2026-11-27 is a Friday

	bad := []ScheduleConfig{
		{Every: time.Second, Cron: "* * * * *"}, // both
		{TimeZone: "Europe/Paris"},              // registered: the schedule's own
		{MisfireGrace: time.Minute},             // the same
		{Every: 1500 * time.Microsecond},
		{Every: -time.Second},
		{Every: time.Second, TimeZone: "Europe/Paris"},
		{Cron: "61 * * * *"},
		{Cron: "0 3 * * *", TimeZone: "Mars/Olympus"},
		{Cron: "0 3 * * *", TimeZone: "Local"},
		{Cron: "0 3 * * 1"},        // numeric day of the week: Monday here, Sunday in the Rust client
		{Cron: "0 3 * * 1-5"},      // the same
		{Cron: "0 3 1 * MON"},      // both days restricted
		{Cron: "@daily"},           // descriptors
		{Cron: "0 0 3 * * * 2026"}, // a year field
		{Cron: "CRON_TZ=UTC 0 3 * * *"},
		{Every: time.Second, TTL: -time.Second},
	}
	for _, cfg := range bad {
		cfg.ConnString, cfg.Job = "postgres://localhost/none", "j"
		if _, err := NewScheduler(cfg); !errors.Is(err, ErrBadArgument) {
			t.Errorf("NewScheduler(%+v): %v, want ErrBadArgument", cfg, err)
		}
	}
	if _, err := NewScheduler(ScheduleConfig{ConnString: "postgres://localhost/none", Every: time.Second}); !errors.Is(err, ErrBadArgument) {
		t.Errorf("no Job: %v", err)
	}
	// neither Every nor Cron: the job's schedule kept in the database,
	// whose instants the server computes
	if s, err := NewScheduler(ScheduleConfig{ConnString: "postgres://localhost/none", Job: "j"}); err != nil {
		t.Errorf("a registered schedule: %v", err)
	} else if _, ok := s.NextAfter(at("2026-11-27T10:00:00Z")); ok {
		t.Error("a registered schedule's NextAfter computed an instant")
	}
}
