package plan

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Maintenance windows. Optional disruptive work (work Steward chooses to do, not work that keeps data safe)
// waits for a window the user declares: the steps that start it are deferred while the window is closed, and the
// planner goes on to the steps after them, so that nothing else waits for the window. Each deferred step is a
// whole step (one member defragmented, restarted or moved), so work that does not finish within a window stops
// between two members, a safe point by construction, and goes on in the next.

// WindowSchedule is a parsed spec.maintenance.window: when windows open, for how long.
type WindowSchedule struct {
	schedule cron.Schedule
	duration time.Duration
}

// ParseWindow reads a window's cron schedule in the IANA time zone timeZone (UTC when empty).
func ParseWindow(schedule string, duration time.Duration, timeZone string) (WindowSchedule, error) {
	if strings.HasPrefix(schedule, "TZ=") || strings.HasPrefix(schedule, "CRON_TZ=") {
		return WindowSchedule{}, fmt.Errorf("schedule %q: set the time zone in timeZone, not in the schedule", schedule)
	}
	if duration <= 0 {
		return WindowSchedule{}, fmt.Errorf("duration %s: must be positive", duration)
	}
	zone := "UTC"
	if timeZone != "" {
		if _, err := time.LoadLocation(timeZone); err != nil {
			return WindowSchedule{}, fmt.Errorf("timeZone %q: %w", timeZone, err)
		}
		zone = timeZone
	}
	s, err := cron.ParseStandard("CRON_TZ=" + zone + " " + schedule)
	if err != nil {
		return WindowSchedule{}, fmt.Errorf("schedule %q: %w", schedule, err)
	}
	return WindowSchedule{schedule: s, duration: duration}, nil
}

// At is the window at time now: whether one is open, when it closes (zero while closed), and when the next one
// opens. A window is open from each scheduled time for the duration; where windows overlap, the open one closes
// when the latest to open does, unless another opens before. A window missed (the operator was down through it)
// is simply over: the work waits for the next.
func (w WindowSchedule) At(now time.Time) (open bool, closes, nextOpens time.Time) {
	// Starts in (now-duration, now] hold now; the latest of them closes last.
	start := w.schedule.Next(now.Add(-w.duration))
	next := w.schedule.Next(now)
	if start.IsZero() || start.After(now) {
		return false, time.Time{}, next
	}
	for s := w.schedule.Next(start); !s.IsZero() && !s.After(now); s = w.schedule.Next(s) {
		start = s
	}
	return true, start.Add(w.duration), next
}

// Window is spec.maintenance.window at the moment of the observation.
type Window struct {
	// Open: optional disruptive work may run now.
	Open bool
	// When says when the next window opens (or why none will: a schedule that cannot be read), for messages.
	When string
}

// optionalWork is the work of one of nextAfterBootstrap's steps that waits for a maintenance window: what it
// is, for status, and whether the action the step returned is such work.
type optionalWork struct {
	what       string
	deferrable func(spec Spec, obs Observation, a Action) bool
}

func notAWait(_ Spec, _ Observation, a Action) bool { return a.Kind != Wait }

// The optional work of nextAfterBootstrap's steps; the other steps never wait (membership, replacement, TLS mode
// switches, auth, NOSPACE recovery). The waits these steps return (a member still restarting, a refused version
// change) are reported as they are.
var (
	versionWork = optionalWork{what: "version change", deferrable: func(spec Spec, _ Observation, a Action) bool {
		return spec.Maintenance.WindowVersionChanges && a.Kind != Wait
	}}
	clientAuthWork = optionalWork{what: "restart for client authentication", deferrable: notAWait}
	peerCheckWork  = optionalWork{what: "restart for peer authentication", deferrable: notAWait}
	// Defragmentation by threshold and restarts for a quota the user changed (and the backup a defragmentation
	// waits for); never a NOSPACE recovery, whose restarts for a raised quota are part of it.
	maintenanceWork = optionalWork{what: "maintenance", deferrable: func(_ Spec, obs Observation, _ Action) bool { return !obs.NoSpaceAlarm }}
	rebalanceWork   = optionalWork{what: "rebalancing", deferrable: func(Spec, Observation, Action) bool { return true }}
)

// deferredWait is the step of a cluster that has nothing to do but work waiting for the window.
func deferredWait(obs Observation, deferred []string) Action {
	return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonMaintenanceDeferred, Deferred: deferred,
		Message: fmt.Sprintf("waiting for the maintenance window (%s): %s", obs.Window.When, strings.Join(deferred, "; "))}
}
