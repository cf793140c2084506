package plan

import (
	"fmt"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pitr"
)

// Standby. A standby's members start from a snapshot of its source like any bootstrap from a backup; from then on
// an applier (a Deployment of one Pod) replays the source's segments into them and reports where it is. The
// controller's part is small and decided here: keep the applier running and report what it says, and on
// promotion refuse while the source still advances (fencing), wait until every complete segment is applied,
// stop the applier, and only once it is gone record the revision reached and open writes. Nothing writes to a
// standby but its applier, so once the applier is gone the revision read from etcd is final.
//
// Nothing else writes because of the fence: etcd's own auth refuses every client write once each role but root
// is read-only and only root and Steward's identity hold the root role. The fence is made right after the
// members formed and before the applier starts, so a standby is never reported Following while clients could
// write to it; it is undone only after the promoted revision is recorded.

// StandbyStep is what the controller does for a standby on this pass.
type StandbyStep string

// Standby steps.
const (
	// StandbyNone: nothing to do (bootstrapping, or promoted and cleaned up).
	StandbyNone StandbyStep = "None"
	// StandbyRunApplier: make sure the applier's Deployment exists as built.
	StandbyRunApplier StandbyStep = "RunApplier"
	// StandbyStopApplier: delete the applier's Deployment (promotion), and wait for its Pod to be gone.
	StandbyStopApplier StandbyStep = "StopApplier"
	// StandbyFence: make etcd refuse client writes (etcdauth.Fence), recording first what it takes.
	StandbyFence StandbyStep = "Fence"
	// StandbyRecordPromotion: the applier is gone: read the revision from etcd and record it
	// (status.standby.promotedRevision), then open writes.
	StandbyRecordPromotion StandbyStep = "RecordPromotion"
	// StandbyOpenWrites: the promoted revision is recorded: give back what the fence took (etcdauth.Unfence)
	// and declare the promotion done.
	StandbyOpenWrites StandbyStep = "OpenWrites"
)

// StandbyObservation is what the standby's next step is decided from.
type StandbyObservation struct {
	Now time.Time
	// Promote, Force and FencingWindow are spec.standby's promote, forcePromotion and fencingWindow.
	Promote, Force bool
	FencingWindow  time.Duration
	// Formed: every bootstrap member has started from the source's snapshot (status.bootstrapped).
	Formed bool
	// Phase is status.standby.phase, the controller's memory: Promoting once it began stopping the applier for
	// a promotion, Promoted once it recorded the promotion.
	Phase etcdv1alpha1.StandbyPhase
	// Fenced: the fence's record says every call of the fence was made (the controller's memory, in the
	// ConfigMap <cluster>-standby-fence).
	Fenced bool
	// RevisionRecorded: status.standby.promotedRevision is set (memory): the revision reached once the applier
	// was gone.
	RevisionRecorded bool
	// ApplierExists: the applier's Deployment, or a Pod of it, still exists.
	ApplierExists bool
	// Report is what the applier reported on this pass; nil when it did not answer (not started, not ready).
	Report *pitr.StandbyStatus
}

// StandbyDecision is the step, and the Standby condition and phase to report.
type StandbyDecision struct {
	Step  StandbyStep
	Phase etcdv1alpha1.StandbyPhase
	// Following is the Standby condition's status: True only while the applier follows without a problem.
	Following       bool
	Reason, Message string
	// RecheckAfter is when a refused promotion may be allowed (the fencing window ends); 0 when nothing waits
	// for the clock.
	RecheckAfter time.Duration
}

// DecideStandby decides a standby's step. Promotion, once begun (Phase Promoting), goes on to the end: the
// applier may already be gone, and a standby without its applier must not be left neither following nor
// writable.
func DecideStandby(o StandbyObservation) StandbyDecision {
	switch {
	case o.Phase == etcdv1alpha1.StandbyPromoted:
		d := StandbyDecision{Step: StandbyNone, Phase: etcdv1alpha1.StandbyPromoted, Reason: etcdv1alpha1.ReasonPromoted,
			Message: "promoted: an ordinary cluster, writes open"}
		if o.ApplierExists {
			d.Step = StandbyStopApplier
		}
		return d
	case o.Phase == etcdv1alpha1.StandbyPromoting:
		if o.ApplierExists {
			return StandbyDecision{Step: StandbyStopApplier, Phase: etcdv1alpha1.StandbyPromoting, Reason: etcdv1alpha1.ReasonPromoting,
				Message: "promoting: waiting for the applier to stop, so that nothing writes to the standby any more"}
		}
		if !o.RevisionRecorded {
			return StandbyDecision{Step: StandbyRecordPromotion, Phase: etcdv1alpha1.StandbyPromoting, Reason: etcdv1alpha1.ReasonPromoting,
				Message: "promoting: the applier is gone; recording the revision reached, then opening writes"}
		}
		return StandbyDecision{Step: StandbyOpenWrites, Phase: etcdv1alpha1.StandbyPromoting, Reason: etcdv1alpha1.ReasonPromoting,
			Message: "promoting: the revision reached is recorded; opening writes"}
	case !o.Formed:
		return StandbyDecision{Step: StandbyNone, Phase: etcdv1alpha1.StandbyBootstrapping, Reason: etcdv1alpha1.ReasonBootstrapping,
			Message: "the members are starting from the source's newest snapshot"}
	case !o.Fenced:
		// Before anything reports Following, and before a promotion (which undoes exactly what the fence
		// recorded): a standby whose clients could write is never shown as one that follows.
		return StandbyDecision{Step: StandbyFence, Phase: etcdv1alpha1.StandbyBootstrapping, Reason: etcdv1alpha1.ReasonFencingWrites,
			Message: "making etcd refuse client writes (every role but root read-only) before the applier starts"}
	case o.Promote:
		return promoteStandby(o)
	}
	return follow(o.Report)
}

// follow reports the applier's state while the standby follows.
func follow(r *pitr.StandbyStatus) StandbyDecision {
	d := StandbyDecision{Step: StandbyRunApplier, Phase: etcdv1alpha1.StandbyFollowing}
	switch {
	case r == nil:
		d.Reason, d.Message = etcdv1alpha1.ReasonApplierStarting, "the applier has not reported yet"
	case r.Stopped != "":
		d.Phase, d.Reason = etcdv1alpha1.StandbyStopped, r.Stopped
		d.Message = fmt.Sprintf("stopped at revision %d: %s", r.AppliedRevision, r.Message)
	case r.Error != "":
		d.Reason = etcdv1alpha1.ReasonSourceUnreadable
		d.Message = fmt.Sprintf("at revision %d, %d behind the source's last known revision %d; retrying: %s", r.AppliedRevision, r.LagRevisions, r.SourceRevision, r.Error)
	default:
		d.Following, d.Reason, d.Message = true, etcdv1alpha1.ReasonFollowing, describeLag(r)
	}
	return d
}

func describeLag(r *pitr.StandbyStatus) string {
	s := fmt.Sprintf("applied revision %d of the source's %d", r.AppliedRevision, r.SourceRevision)
	switch {
	case r.LagRevisions == 0:
		s += " (caught up)"
	case r.LagKnown:
		s += fmt.Sprintf(" (%d revisions, %.1fs behind)", r.LagRevisions, r.LagSeconds)
	default:
		s += fmt.Sprintf(" (%d revisions behind)", r.LagRevisions)
	}
	if r.LastSegment != "" {
		s += "; last segment " + r.LastSegment
	}
	return s
}

// promoteStandby is the step of a standby asked to promote that has not begun stopping its applier.
//
// Fencing: a primary that still runs keeps writing segments (at least a heartbeat a minute), so a source whose
// segments changed within the window has a primary that may still take writes, which the promoted standby would
// never see: two writable clusters with one history. Unless forced, the applier keeps following until the source
// has been quiet for the whole window. The window counts on the applier's own clock from when it saw the change,
// so clocks of the two sites never meet.
//
// Then every complete segment is applied before the applier stops ("the last complete segment"); a standby
// stopped at a gap, or whose source became unreadable, promotes where it is, and the message says so.
func promoteStandby(o StandbyObservation) StandbyDecision {
	r := o.Report
	wait := StandbyDecision{Step: StandbyRunApplier, Phase: etcdv1alpha1.StandbyFollowing}
	if r != nil && r.Stopped != "" {
		wait.Phase = etcdv1alpha1.StandbyStopped
	}
	if !o.Force {
		if r == nil {
			wait.Reason = etcdv1alpha1.ReasonSourceStillAdvancing
			wait.Message = "promotion waits for the applier's report, which tells whether the source still advances (or set forcePromotion)"
			return wait
		}
		if quiet := o.Now.Sub(r.SourceChanged); quiet < o.FencingWindow {
			wait.Reason, wait.RecheckAfter = etcdv1alpha1.ReasonSourceStillAdvancing, o.FencingWindow-quiet
			wait.Message = fmt.Sprintf("promotion refused: the source's segments changed %s ago (at revision %d): its primary may still take writes. "+
				"Promoting once they have not changed for %s (fencingWindow), or at once with forcePromotion after fencing the primary",
				quiet.Round(time.Second), r.SourceRevision, o.FencingWindow)
			return wait
		}
	}
	if r != nil && r.Stopped == "" && r.Error == "" && r.AppliedRevision < r.SourceRevision {
		wait.Reason = etcdv1alpha1.ReasonPromoting
		wait.Message = fmt.Sprintf("promoting: applying the source's last %d revisions (to %d) first", r.LagRevisions, r.SourceRevision)
		return wait
	}
	d := StandbyDecision{Step: StandbyStopApplier, Phase: etcdv1alpha1.StandbyPromoting, Reason: etcdv1alpha1.ReasonPromoting}
	switch {
	case r == nil:
		d.Message = "promoting (forced) without a report from the applier: stopping it; the revision it reached is the promoted one"
	case r.Stopped != "":
		d.Message = fmt.Sprintf("promoting at revision %d, where the standby stopped (%s): %s; the source's changes after it are not on the promoted cluster",
			r.AppliedRevision, r.Stopped, r.Message)
	case r.Error != "":
		d.Message = fmt.Sprintf("promoting at revision %d with the source unreadable (%s): changes it may hold past revision %d are not on the promoted cluster",
			r.AppliedRevision, r.Error, r.SourceRevision)
	default:
		d.Message = fmt.Sprintf("promoting: every complete segment is applied (revision %d); stopping the applier", r.AppliedRevision)
	}
	return d
}
