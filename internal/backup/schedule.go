package backup

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
)

// Schedule is a parsed cron schedule, evaluated in UTC.
type Schedule struct{ s cron.Schedule }

// ParseSchedule parses standard five-field cron syntax or a descriptor (@hourly, @daily, @every 1h, ...). Time
// zones in the expression (CRON_TZ=, TZ=) are refused: schedules are UTC, so that a backup's name says when it
// was due.
func ParseSchedule(expr string) (Schedule, error) {
	if len(expr) >= 3 && (expr[:3] == "TZ=" || len(expr) >= 8 && expr[:8] == "CRON_TZ=") {
		return Schedule{}, fmt.Errorf("schedule %q: time zones are not supported, schedules run in UTC", expr)
	}
	s, err := cron.ParseStandard(expr)
	if err != nil {
		return Schedule{}, fmt.Errorf("schedule %q: %w", expr, err)
	}
	return Schedule{s: s}, nil
}

// Next is the first scheduled time after t.
func (s Schedule) Next(t time.Time) time.Time { return s.s.Next(t.UTC()) }

// Due returns the most recent scheduled time in (last, now], if any, and the next scheduled time after now.
// Missed times before the most recent one are skipped, not caught up: one backup after downtime is enough, and
// a burst of backups would only load the cluster. The walk is bounded so that a schedule like "every minute"
// after a week of downtime costs little.
func (s Schedule) Due(last, now time.Time) (due time.Time, ok bool, next time.Time) {
	const maxSteps = 10000
	t := s.Next(last)
	if t.IsZero() || t.After(now) {
		return time.Time{}, false, t
	}
	for i := 0; i < maxSteps; i++ {
		n := s.Next(t)
		if n.IsZero() || n.After(now) {
			return t, true, n
		}
		t = n
	}
	// Far behind: take now's minute as the due time rather than walking further.
	t = now.UTC().Truncate(time.Minute)
	return t, true, s.Next(now)
}
