package leaderlock

// A schedule's calendar: the due instants of Every (multiples of the
// period since the Unix epoch) or of a cron expression in a time zone, a
// wall time that a daylight saving change repeats due once (as the
// server's calendar, contract 22).

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronParser: five fields, or six with seconds first; no descriptors
// (@every is relative to the process's start, not shared by replicas).
var cronParser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// parseCron parses expr for time zone tz, refusing what cron
// implementations read differently (see ScheduleConfig.Cron).
func parseCron(expr, tz string) (*cron.SpecSchedule, *time.Location, error) {
	fields := strings.Fields(expr)
	if len(fields) != 5 && len(fields) != 6 {
		return nil, nil, badArgument("cron expression %q: five fields (minute hour day-of-month month day-of-week), or six with seconds first", expr)
	}
	if strings.Contains(fields[0], "=") || strings.HasPrefix(fields[0], "@") {
		return nil, nil, badArgument("cron expression %q: no descriptors or TZ= prefix (the time zone is TimeZone)", expr)
	}
	dom, dow := fields[len(fields)-3], fields[len(fields)-1]
	restricted := func(f string) bool { return f != "*" && f != "?" }
	if restricted(dom) && restricted(dow) {
		return nil, nil, badArgument("cron expression %q: restrict the day of the month or the day of the week, not both "+
			"(cron implementations combine them differently)", expr)
	}
	for _, item := range strings.Split(dow, ",") {
		if strings.ContainsAny(strings.SplitN(item, "/", 2)[0], "0123456789") {
			return nil, nil, badArgument("cron expression %q: name the days of the week (MON-FRI, SUN), "+
				"cron implementations number them differently", expr)
		}
	}
	var loc *time.Location
	switch tz {
	case "", "UTC":
		loc = time.UTC
	case "Local":
		return nil, nil, badArgument("TimeZone %q: name a zone, replicas may not share this host's", tz)
	default:
		l, err := time.LoadLocation(tz)
		if err != nil {
			return nil, nil, &Error{Kind: ErrBadArgument, Message: fmt.Sprintf("leaderlock: bad argument: TimeZone %q: %v", tz, err), Err: err}
		}
		loc = l
	}
	sched, err := cronParser.Parse(strings.Join(fields, " "))
	if err != nil {
		return nil, nil, &Error{Kind: ErrBadArgument, Message: fmt.Sprintf("leaderlock: bad argument: cron expression %q: %v", expr, err), Err: err}
	}
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return nil, nil, badArgument("cron expression %q: not a schedule of fields", expr)
	}
	spec.Location = loc
	return spec, loc, nil
}

// NextAfter returns the first due instant strictly after t (UTC), or false
// when the schedule has none (a cron expression that never matches again),
// or is the one kept in the database (the server computes its instants).
func (s *Scheduler) NextAfter(t time.Time) (time.Time, bool) {
	if s.registered {
		return time.Time{}, false
	}
	if s.every > 0 {
		p := s.every.Microseconds()
		us := t.UnixMicro()
		q := us / p
		if us%p < 0 { // floor
			q--
		}
		return time.UnixMicro((q + 1) * p).UTC(), true
	}
	n := t
	for {
		n = s.cron.Next(n)
		if n.IsZero() {
			return time.Time{}, false
		}
		if !repeatedWallTime(n, s.loc) {
			return n.UTC(), true
		}
	}
}

// atOrAfter returns the first due instant at or after t.
func (s *Scheduler) atOrAfter(t time.Time) (time.Time, bool) {
	return s.NextAfter(t.Add(-time.Microsecond))
}

// repeatedWallTime reports whether t's local time in loc occurred before,
// in the hour (or so) that a daylight saving change repeats: due once, at
// the first.
func repeatedWallTime(t time.Time, loc *time.Location) bool {
	lt := t.In(loc)
	start, _ := lt.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, off := lt.Zone()
	_, before := start.Add(-time.Second).In(loc).Zone()
	return before > off && lt.Sub(start) < time.Duration(before-off)*time.Second
}
