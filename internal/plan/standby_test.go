package plan

import (
	"strings"
	"testing"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pitr"
)

func TestDecideStandby(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	report := func(mutate func(*pitr.StandbyStatus)) *pitr.StandbyStatus {
		r := &pitr.StandbyStatus{AppliedRevision: 500, SourceRevision: 500, SourceChanged: now.Add(-10 * time.Minute),
			LastSegment: "seg-1", LagKnown: true, Time: now}
		if mutate != nil {
			mutate(r)
		}
		return r
	}
	behind := report(func(r *pitr.StandbyStatus) { r.SourceRevision, r.LagRevisions, r.LagSeconds = 620, 120, 4.5 })
	advancing := report(func(r *pitr.StandbyStatus) { r.SourceChanged = now.Add(-40 * time.Second) })
	gap := report(func(r *pitr.StandbyStatus) {
		r.Stopped, r.Message, r.SourceRevision = etcdv1alpha1.ReasonSegmentGap, "revisions 501..510 are missing before segment seg-x", 600
	})
	unreadable := report(func(r *pitr.StandbyStatus) { r.Error = "list s3://etcd/prod: access denied" })
	following := StandbyObservation{Now: now, FencingWindow: 3 * time.Minute, Formed: true, Fenced: true, ApplierExists: true, Report: report(nil)}
	promote := following
	promote.Promote = true
	with := func(o StandbyObservation, mutate func(*StandbyObservation)) StandbyObservation {
		mutate(&o)
		return o
	}
	tests := map[string]struct {
		obs       StandbyObservation
		step      StandbyStep
		phase     etcdv1alpha1.StandbyPhase
		reason    string
		following bool
		message   string // part of the message
		recheck   time.Duration
	}{
		"bootstrapping": {with(following, func(o *StandbyObservation) { o.Formed, o.ApplierExists, o.Report = false, false, nil }),
			StandbyNone, etcdv1alpha1.StandbyBootstrapping, etcdv1alpha1.ReasonBootstrapping, false, "source's newest snapshot", 0},
		"bootstrapping, not fenced": {with(following, func(o *StandbyObservation) { o.Formed, o.Fenced, o.ApplierExists, o.Report = false, false, false, nil }),
			StandbyNone, etcdv1alpha1.StandbyBootstrapping, etcdv1alpha1.ReasonBootstrapping, false, "", 0},
		"formed, not fenced": {with(following, func(o *StandbyObservation) { o.Fenced, o.ApplierExists, o.Report = false, false, nil }),
			StandbyFence, etcdv1alpha1.StandbyBootstrapping, etcdv1alpha1.ReasonFencingWrites, false, "refuse client writes", 0},
		"not fenced, an applier reporting": {with(following, func(o *StandbyObservation) { o.Fenced = false }),
			StandbyFence, etcdv1alpha1.StandbyBootstrapping, etcdv1alpha1.ReasonFencingWrites, false, "", 0},
		"formed, no applier yet": {with(following, func(o *StandbyObservation) { o.ApplierExists, o.Report = false, nil }),
			StandbyRunApplier, etcdv1alpha1.StandbyFollowing, etcdv1alpha1.ReasonApplierStarting, false, "not reported", 0},
		"following, caught up": {following, StandbyRunApplier, etcdv1alpha1.StandbyFollowing, etcdv1alpha1.ReasonFollowing, true,
			"applied revision 500 of the source's 500 (caught up); last segment seg-1", 0},
		"following, behind": {with(following, func(o *StandbyObservation) { o.Report = behind }),
			StandbyRunApplier, etcdv1alpha1.StandbyFollowing, etcdv1alpha1.ReasonFollowing, true, "(120 revisions, 4.5s behind)", 0},
		"gap": {with(following, func(o *StandbyObservation) { o.Report = gap }),
			StandbyRunApplier, etcdv1alpha1.StandbyStopped, etcdv1alpha1.ReasonSegmentGap, false, "stopped at revision 500: revisions 501..510 are missing", 0},
		"source unreadable": {with(following, func(o *StandbyObservation) { o.Report = unreadable }),
			StandbyRunApplier, etcdv1alpha1.StandbyFollowing, etcdv1alpha1.ReasonSourceUnreadable, false, "access denied", 0},

		"promote, caught up, source quiet": {promote,
			StandbyStopApplier, etcdv1alpha1.StandbyPromoting, etcdv1alpha1.ReasonPromoting, false, "every complete segment is applied (revision 500)", 0},
		"promote, source still advancing": {with(promote, func(o *StandbyObservation) { o.Report = advancing }),
			StandbyRunApplier, etcdv1alpha1.StandbyFollowing, etcdv1alpha1.ReasonSourceStillAdvancing, false, "changed 40s ago", 140 * time.Second},
		"promote, forced while advancing": {with(promote, func(o *StandbyObservation) { o.Report, o.Force = advancing, true }),
			StandbyStopApplier, etcdv1alpha1.StandbyPromoting, etcdv1alpha1.ReasonPromoting, false, "every complete segment", 0},
		"promote, quiet but behind": {with(promote, func(o *StandbyObservation) { o.Report = behind }),
			StandbyRunApplier, etcdv1alpha1.StandbyFollowing, etcdv1alpha1.ReasonPromoting, false, "applying the source's last 120 revisions (to 620)", 0},
		"promote, forced and behind": {with(promote, func(o *StandbyObservation) { o.Report, o.Force = behind, true }),
			StandbyRunApplier, etcdv1alpha1.StandbyFollowing, etcdv1alpha1.ReasonPromoting, false, "applying the source's last 120 revisions", 0},
		"promote, no report": {with(promote, func(o *StandbyObservation) { o.Report = nil }),
			StandbyRunApplier, etcdv1alpha1.StandbyFollowing, etcdv1alpha1.ReasonSourceStillAdvancing, false, "waits for the applier's report", 0},
		"promote, forced, no report": {with(promote, func(o *StandbyObservation) { o.Report, o.Force = nil, true }),
			StandbyStopApplier, etcdv1alpha1.StandbyPromoting, etcdv1alpha1.ReasonPromoting, false, "without a report", 0},
		"promote, stopped at a gap": {with(promote, func(o *StandbyObservation) { o.Report = gap }),
			StandbyStopApplier, etcdv1alpha1.StandbyPromoting, etcdv1alpha1.ReasonPromoting, false, "promoting at revision 500, where the standby stopped (SegmentGap)", 0},
		"promote, unreadable for the window": {with(promote, func(o *StandbyObservation) { o.Report = unreadable }),
			StandbyStopApplier, etcdv1alpha1.StandbyPromoting, etcdv1alpha1.ReasonPromoting, false, "with the source unreadable", 0},
		"promote, window just over": {with(promote, func(o *StandbyObservation) {
			o.Report = report(func(r *pitr.StandbyStatus) { r.SourceChanged = now.Add(-3 * time.Minute) })
		}), StandbyStopApplier, etcdv1alpha1.StandbyPromoting, etcdv1alpha1.ReasonPromoting, false, "stopping the applier", 0},
		"promote before the fence": {with(promote, func(o *StandbyObservation) { o.Fenced = false }),
			StandbyFence, etcdv1alpha1.StandbyBootstrapping, etcdv1alpha1.ReasonFencingWrites, false, "", 0},
		"promote while bootstrapping": {with(promote, func(o *StandbyObservation) { o.Formed, o.Report = false, nil }),
			StandbyNone, etcdv1alpha1.StandbyBootstrapping, etcdv1alpha1.ReasonBootstrapping, false, "", 0},

		"promoting, applier still there": {with(promote, func(o *StandbyObservation) { o.Phase, o.Report = etcdv1alpha1.StandbyPromoting, nil }),
			StandbyStopApplier, etcdv1alpha1.StandbyPromoting, etcdv1alpha1.ReasonPromoting, false, "waiting for the applier to stop", 0},
		"promoting, applier still there, source advancing again": {with(promote, func(o *StandbyObservation) {
			o.Phase, o.Report = etcdv1alpha1.StandbyPromoting, advancing
		}), StandbyStopApplier, etcdv1alpha1.StandbyPromoting, etcdv1alpha1.ReasonPromoting, false, "", 0},
		"promoting, applier gone": {with(promote, func(o *StandbyObservation) {
			o.Phase, o.ApplierExists, o.Report = etcdv1alpha1.StandbyPromoting, false, nil
		}),
			StandbyRecordPromotion, etcdv1alpha1.StandbyPromoting, etcdv1alpha1.ReasonPromoting, false, "recording the revision", 0},
		"promoting, revision recorded": {with(promote, func(o *StandbyObservation) {
			o.Phase, o.ApplierExists, o.Report, o.RevisionRecorded = etcdv1alpha1.StandbyPromoting, false, nil, true
		}),
			StandbyOpenWrites, etcdv1alpha1.StandbyPromoting, etcdv1alpha1.ReasonPromoting, false, "opening writes", 0},
		"promoting, revision recorded, applier back": {with(promote, func(o *StandbyObservation) {
			o.Phase, o.RevisionRecorded = etcdv1alpha1.StandbyPromoting, true
		}),
			StandbyStopApplier, etcdv1alpha1.StandbyPromoting, etcdv1alpha1.ReasonPromoting, false, "", 0},
		"promoted": {with(promote, func(o *StandbyObservation) {
			o.Phase, o.ApplierExists, o.Report = etcdv1alpha1.StandbyPromoted, false, nil
		}),
			StandbyNone, etcdv1alpha1.StandbyPromoted, etcdv1alpha1.ReasonPromoted, false, "writes open", 0},
		"promoted, an applier left over": {with(promote, func(o *StandbyObservation) { o.Phase = etcdv1alpha1.StandbyPromoted }),
			StandbyStopApplier, etcdv1alpha1.StandbyPromoted, etcdv1alpha1.ReasonPromoted, false, "", 0},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			d := DecideStandby(tt.obs)
			if d.Step != tt.step || d.Phase != tt.phase || d.Reason != tt.reason || d.Following != tt.following || d.RecheckAfter != tt.recheck {
				t.Fatalf("%+v, want step %s, phase %s, reason %s, following %v, recheck %s", d, tt.step, tt.phase, tt.reason, tt.following, tt.recheck)
			}
			if !strings.Contains(d.Message, tt.message) {
				t.Fatalf("message %q does not say %q", d.Message, tt.message)
			}
		})
	}
}

// TestDecideStandbyNeverPromotesUnfenced: over every combination of inputs, a promotion that is not forced never
// stops the applier while the source changed within the window, and the applier is never stopped at all unless
// promotion was asked for (or is under way, or done). The write fence: nothing runs the applier or reports
// Following before the fence is made, the fence is never made once promotion began, and writes open only with
// the applier gone and the promoted revision recorded.
func TestDecideStandbyNeverPromotesUnfenced(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	window := 3 * time.Minute
	reports := []*pitr.StandbyStatus{nil}
	for _, changed := range []time.Duration{0, time.Second, window - time.Second, window, time.Hour} {
		for _, behind := range []int64{0, 7} {
			for _, stop := range []string{"", etcdv1alpha1.ReasonSegmentGap} {
				for _, e := range []string{"", "unreadable"} {
					reports = append(reports, &pitr.StandbyStatus{AppliedRevision: 100, SourceRevision: 100 + behind, LagRevisions: behind,
						SourceChanged: now.Add(-changed), Stopped: stop, Error: e})
				}
			}
		}
	}
	phases := []etcdv1alpha1.StandbyPhase{"", etcdv1alpha1.StandbyFollowing, etcdv1alpha1.StandbyStopped, etcdv1alpha1.StandbyPromoting, etcdv1alpha1.StandbyPromoted}
	for _, r := range reports {
		for _, phase := range phases {
			for bits := range 64 {
				o := StandbyObservation{Now: now, FencingWindow: window, Report: r, Phase: phase,
					Promote: bits&1 != 0, Force: bits&2 != 0, Formed: bits&4 != 0, ApplierExists: bits&8 != 0,
					Fenced: bits&16 != 0, RevisionRecorded: bits&32 != 0}
				d := DecideStandby(o)
				stops := d.Step == StandbyStopApplier || d.Step == StandbyRecordPromotion || d.Step == StandbyOpenWrites
				begun := phase == etcdv1alpha1.StandbyPromoting || phase == etcdv1alpha1.StandbyPromoted
				switch {
				case stops && !o.Promote && !begun:
					t.Fatalf("%+v: %+v without promotion", o, d)
				case d.Step == StandbyStopApplier && !begun && !o.Force && (r == nil || now.Sub(r.SourceChanged) < window):
					t.Fatalf("%+v: stops the applier while the source changed within the window: %+v", o, d)
				case d.Step == StandbyStopApplier && !begun && r != nil && r.Stopped == "" && r.Error == "" && r.AppliedRevision < r.SourceRevision:
					t.Fatalf("%+v: stops the applier before the last complete segment is applied: %+v", o, d)
				case d.Step == StandbyRunApplier && begun:
					t.Fatalf("%+v: runs the applier again after promotion began: %+v", o, d)
				case (d.Step == StandbyRunApplier || d.Following) && !o.Fenced:
					t.Fatalf("%+v: runs the applier or reports Following before the fence: %+v", o, d)
				case d.Step == StandbyFence && begun:
					t.Fatalf("%+v: fences again after promotion began: %+v", o, d)
				case d.Step == StandbyOpenWrites && (o.ApplierExists || !o.RevisionRecorded || phase != etcdv1alpha1.StandbyPromoting):
					t.Fatalf("%+v: opens writes before the applier is gone and the revision recorded: %+v", o, d)
				}
			}
		}
	}
}
