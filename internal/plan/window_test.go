package plan

import (
	"strings"
	"testing"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

func TestParseWindow(t *testing.T) {
	for name, tt := range map[string]struct {
		schedule, zone string
		duration       time.Duration
		err            string
	}{
		"weekly in UTC":              {"0 2 * * 6", "", 4 * time.Hour, ""},
		"a descriptor in a zone":     {"@daily", "Europe/Berlin", time.Hour, ""},
		"not cron":                   {"at two", "", time.Hour, "schedule \"at two\""},
		"six fields":                 {"0 0 2 * * 6", "", time.Hour, "schedule"},
		"an unknown zone":            {"0 2 * * *", "Mars/Olympus", time.Hour, "timeZone \"Mars/Olympus\""},
		"a zone inside the schedule": {"CRON_TZ=Asia/Tokyo 0 2 * * *", "", time.Hour, "set the time zone in timeZone"},
		"no duration":                {"0 2 * * *", "", 0, "must be positive"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseWindow(tt.schedule, tt.duration, tt.zone)
			if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("error %v, want %q", err, tt.err)
			}
		})
	}
}

// TestWindowAt: whether a window is open, when it closes and when the next opens, across midnight, in a time
// zone (summer and winter), after a missed window, and with windows that overlap.
func TestWindowAt(t *testing.T) {
	utc := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for name, tt := range map[string]struct {
		schedule, zone string
		duration       time.Duration
		now            string
		open           bool
		closes, next   string
	}{
		"before the nightly window": {"0 2 * * *", "", 4 * time.Hour, "2026-11-28T01:59:59Z", false, "", "2026-11-28T02:00:00Z"},
		"its first second":          {"0 2 * * *", "", 4 * time.Hour, "2026-11-28T02:00:00Z", true, "2026-11-28T06:00:00Z", "2026-11-29T02:00:00Z"},
		"inside it":                 {"0 2 * * *", "", 4 * time.Hour, "2026-11-28T05:00:00Z", true, "2026-11-28T06:00:00Z", "2026-11-29T02:00:00Z"},
		"closed at its end":         {"0 2 * * *", "", 4 * time.Hour, "2026-11-28T06:00:00Z", false, "", "2026-11-29T02:00:00Z"},
		"across midnight":           {"0 22 * * *", "", 4 * time.Hour, "2026-11-29T01:30:00Z", true, "2026-11-29T02:00:00Z", "2026-11-29T22:00:00Z"},
		"weekly, on a Tuesday":      {"0 2 * * 6", "", 4 * time.Hour, "2026-11-24T12:00:00Z", false, "", "2026-11-28T02:00:00Z"},
		// 02:00 in Berlin is 01:00 UTC in winter (CET) and 00:00 UTC in summer (CEST).
		"a zone in winter": {"0 2 * * *", "Europe/Berlin", time.Hour, "2026-11-28T01:30:00Z", true, "2026-11-28T02:00:00Z", "2026-11-29T01:00:00Z"},
		"a zone in summer": {"0 2 * * *", "Europe/Berlin", time.Hour, "2026-07-01T01:30:00Z", false, "", "2026-07-02T00:00:00Z"},
		"a window missed (the operator was down through it) is over": {"0 2 * * *", "", time.Hour, "2026-11-28T09:00:00Z", false, "",
			"2026-11-29T02:00:00Z"},
		"windows that overlap: open until the latest one closes, unless another opens first": {"*/10 * * * *", "", 15 * time.Minute,
			"2026-11-28T09:05:00Z", true, "2026-11-28T09:15:00Z", "2026-11-28T09:10:00Z"},
	} {
		t.Run(name, func(t *testing.T) {
			w, err := ParseWindow(tt.schedule, tt.duration, tt.zone)
			if err != nil {
				t.Fatal(err)
			}
			open, closes, next := w.At(utc(tt.now))
			if open != tt.open {
				t.Fatalf("open = %v, want %v", open, tt.open)
			}
			if (tt.closes == "") != closes.IsZero() || (tt.closes != "" && !closes.Equal(utc(tt.closes))) {
				t.Errorf("closes %s, want %q", closes.UTC().Format(time.RFC3339), tt.closes)
			}
			if !next.Equal(utc(tt.next)) {
				t.Errorf("next opens %s, want %s", next.UTC().Format(time.RFC3339), tt.next)
			}
		})
	}
}

// TestMaintenanceWindowDefers: outside the window optional work waits and is listed, what keeps data safe does
// not, and steps after the deferred ones go on; inside it the work runs.
func TestMaintenanceWindowDefers(t *testing.T) {
	closed := &Window{Open: false, When: "opens 2026-11-29T02:00:00Z"}
	fragmented := func() []Member {
		return []Member{sized("c-a", 1, 300, 20), sized("c-b", 2, 300, 20), sized("c-c", 3, 300, 20)}
	}
	within := func(w *Window, o Observation) Observation { o.Window = w; return o }
	tests := map[string]struct {
		spec     Spec
		obs      Observation
		want     ActionKind
		reason   string
		deferred string
	}{
		"a defragmentation waits for the window": {
			defragSpec(), within(closed, clusterAt("3.6.0", fragmented()...)),
			Wait, etcdv1alpha1.ReasonMaintenanceDeferred, "maintenance: defragmenting member c-b",
		},
		"inside the window it runs": {
			defragSpec(), within(&Window{Open: true}, clusterAt("3.6.0", fragmented()...)),
			Defragment, etcdv1alpha1.ReasonDefragmenting, "",
		},
		"without a window it runs when due": {
			defragSpec(), clusterAt("3.6.0", fragmented()...),
			Defragment, etcdv1alpha1.ReasonDefragmenting, "",
		},
		"a restart for a changed quota waits": {
			func() Spec { s := defragSpec(); s.Storage.Size = 4 << 30; return s }(), within(closed, clusterAt("3.6.0", withQuota(sized("c-a", 1, 30, 20), 128), withQuota(sized("c-b", 2, 30, 20), 128), withQuota(sized("c-c", 3, 30, 20), 128))),
			Wait, etcdv1alpha1.ReasonMaintenanceDeferred, "maintenance: restarting member",
		},
		"NOSPACE recovery never waits": {
			recoverySpec(), within(closed, noSpace(5000, 0, sized("c-a", 1, 288, 288), sized("c-b", 2, 288, 288), sized("c-c", 3, 288, 288))),
			CompactForSpace, etcdv1alpha1.ReasonRecoveringFromNoSpace, "",
		},
		"a member whose data is gone is replaced at once, with the defragmentation still deferred behind it": {
			defragSpec(), within(closed, clusterAt("3.6.0", sized("c-a", 1, 300, 20), func() Member {
				m := sized("c-b", 2, 300, 20)
				m.HasPod, m.HasPVC, m.Healthy = false, false, false
				return m
			}(), sized("c-c", 3, 300, 20))),
			RemoveMember, etcdv1alpha1.ReasonReplacingMember, "",
		},
		"a version change runs at once unless the window takes version changes": {
			func() Spec { s := defragSpec(); s.Version, s.Image = "3.6.15", "etcd:v3.6.15"; return s }(),
			within(closed, clusterAt("3.6.0", fragmented()...)),
			RollMember, etcdv1alpha1.ReasonDowngrading, "",
		},
		"with versionChanges it waits too, and so does the defragmentation after it": {
			func() Spec {
				s := defragSpec()
				s.Version, s.Image, s.Maintenance.WindowVersionChanges = "3.6.15", "etcd:v3.6.15", true
				return s
			}(),
			within(closed, clusterAt("3.6.0", fragmented()...)),
			Wait, etcdv1alpha1.ReasonMaintenanceDeferred, "version change: ",
		},
		"a move for balance waits": {
			Spec{Replicas: 3, Version: "3.6.16"},
			within(closed, func() Observation {
				o := formed(on("c-a", 1, "n1"), on("c-b", 2, "n1"), on("c-c", 3, "n2"))
				o.Placement = zones("n1=a", "n2=b", "n3=c")
				return o
			}()),
			Wait, etcdv1alpha1.ReasonMaintenanceDeferred, "rebalancing: ",
		},
		"a move under way finishes: the learner that joined is promoted and a member leaves": {
			Spec{Replicas: 3, Version: "3.6.16"},
			within(closed, func() Observation {
				o := formed(on("c-a", 1, "n1"), on("c-b", 2, "n1"), on("c-c", 3, "n2"), on("c-new", 9, "n3"))
				o.Placement = zones("n1=a", "n2=b", "n3=c")
				return o
			}()),
			RemoveMember, etcdv1alpha1.ReasonScalingDown, "",
		},
		"steps that are not optional go on past deferred work, which stays listed": {
			func() Spec { s := defragSpec(); s.Auth = true; return s }(),
			within(closed, func() Observation { o := clusterAt("3.6.0", fragmented()...); o.AuthEnabled = new(bool); return o }()),
			EnableAuth, "", "maintenance: defragmenting member c-b",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			a := Next(tt.spec, tt.obs)
			if a.Kind != tt.want || (tt.reason != "" && a.Reason != tt.reason) {
				t.Fatalf("got %s/%s (%s), want %s/%s", a.Kind, a.Reason, a.Message, tt.want, tt.reason)
			}
			got := strings.Join(a.Deferred, "; ")
			if (tt.deferred == "") != (got == "") || !strings.Contains(got, tt.deferred) {
				t.Errorf("deferred %q, want %q", got, tt.deferred)
			}
			if a.Reason == etcdv1alpha1.ReasonMaintenanceDeferred && !strings.Contains(a.Message, closed.When) {
				t.Errorf("message %q does not say when the window opens", a.Message)
			}
		})
	}
}
