package plan

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// Version steps, taken once membership is settled, one member per pass.
const (
	// RollMember restarts member Members[0] in place on Version and Image (its Pod's image changes; its volume,
	// name and member ID stay).
	RollMember ActionKind = "RollMember"
	// MoveLeader hands leadership from MemberID to TargetID, so that the leader is never restarted while it leads.
	MoveLeader ActionKind = "MoveLeader"
	// EnableDowngrade asks etcd to lower the cluster version to Version (major.minor), which lets members run
	// the older release; etcd then migrates every member's storage version down.
	EnableDowngrade ActionKind = "EnableDowngrade"
	// CancelDowngrade cancels a downgrade etcd has enabled that spec.version no longer asks for.
	CancelDowngrade ActionKind = "CancelDowngrade"
)

// Version is an etcd release, major.minor.patch.
type Version struct{ Major, Minor, Patch int }

// ParseVersion reads "3.6.16", "v3.6.16" or a cluster version "3.6" / "3.6.0". Pre-release and build suffixes
// are refused: Steward only rolls members between releases.
func ParseVersion(s string) (Version, error) {
	parts := strings.Split(strings.TrimPrefix(s, "v"), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return Version{}, fmt.Errorf("version %q is not major.minor.patch", s)
	}
	var n [3]int
	for i, p := range parts {
		if p == "" || len(p) > 4 || (len(p) > 1 && p[0] == '0') {
			return Version{}, fmt.Errorf("version %q: %q is not a version number", s, p)
		}
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return Version{}, fmt.Errorf("version %q: %q is not a version number", s, p)
		}
		n[i] = v
	}
	return Version{n[0], n[1], n[2]}, nil
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }

// MinorString is major.minor, the form etcd's cluster version and downgrade API use.
func (v Version) MinorString() string { return fmt.Sprintf("%d.%d", v.Major, v.Minor) }

// Less orders releases.
func (v Version) Less(o Version) bool {
	if v.Major != o.Major {
		return v.Major < o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor < o.Minor
	}
	return v.Patch < o.Patch
}

func (v Version) sameMinor(o Version) bool { return v.Major == o.Major && v.Minor == o.Minor }

// minorsApart is how many minor versions o is above v (negative when below); both are 3.x in practice.
func (v Version) minorsApart(o Version) int { return (o.Major-v.Major)*100 + o.Minor - v.Minor }

// upgradeFloor is, per minor, the oldest patch release etcd's upgrade guide allows to move to the next minor:
//
//	3.5 -> 3.6: 3.5.26 or later (3.5.20 fixed learners reverting, 3.5.26 "zombie" members; etcd names 3.5.26
//	            the only safe path)
//	3.6 -> 3.7: 3.6.11 or later
var upgradeFloor = map[string]Version{
	"3.5": {3, 5, 26},
	"3.6": {3, 6, 11},
}

// firstDowngradableMinor: etcd's downgrade API exists from 3.6; a 3.5 cluster cannot be downgraded in place.
var firstDowngradableMinor = Version{3, 6, 0}

// versionGoal is what the spec's version asks of a cluster in its observed state.
type versionGoal int

const (
	goalNone        versionGoal = iota // every member runs the spec's version and image
	goalRoll                           // restart members on the spec's version, one at a time
	goalEnable                         // enable etcd's downgrade first
	goalCancel                         // cancel a downgrade the spec no longer wants
	goalRefused                        // the change is not allowed from the observed state
	goalWaitingCV                      // etcd has not settled its cluster version yet
	goalWaitingSnap                    // members still replay log entries the next minor cannot read
)

// defaultSnapshotCount is etcd's --snapshot-count default per minor: how many applied entries trigger a raft
// snapshot when the spec does not set it.
var defaultSnapshotCount = map[string]uint64{"3.5": 100000, "3.6": 10000, "3.7": 10000}

// snapshotInterval is how many entries members of minor cv apply between two raft snapshots at most.
func snapshotInterval(spec Spec, cv Version) uint64 {
	if spec.SnapshotCount > 0 {
		return uint64(spec.SnapshotCount)
	}
	if n, ok := defaultSnapshotCount[cv.MinorString()]; ok {
		return n
	}
	return 100000
}

// stale reports whether a member's Pod is not yet set to the spec's version and image.
func stale(spec Spec, m Member) bool {
	return m.HasPod && (m.PodVersion != spec.Version || (spec.Image != "" && m.PodImage != spec.Image))
}

// restartPending reports whether a member's Pod was changed but the process does not run it yet: the kubelet
// has not restarted the container, or etcd reports another version than the Pod was set to.
func restartPending(m Member) bool {
	if !m.HasPod {
		return false
	}
	if m.ContainerImage != "" && m.PodImage != "" && !SameImage(m.ContainerImage, m.PodImage) {
		return true
	}
	return m.RunningVersion != "" && m.PodVersion != "" && m.RunningVersion != m.PodVersion
}

// waitForRestart waits for member m's process to run what its Pod was switched to.
func waitForRestart(m Member) Action {
	return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForRestart,
		Message: fmt.Sprintf("waiting for member %s to restart on %s (image %s; the container runs %s, etcd reports %s)",
			m.Name, m.PodVersion, m.PodImage, orUnknown(m.ContainerImage), orUnknown(m.RunningVersion))}
}

// SameImage compares image references the way the kubelet reports them (it may add the default registry); the
// controller uses it too, to tell a Pod switched to an image its container has not run yet.
func SameImage(a, b string) bool {
	norm := func(s string) string {
		s = strings.TrimPrefix(s, "docker.io/")
		return strings.TrimPrefix(s, "library/")
	}
	return norm(a) == norm(b)
}

// decideVersion compares the spec's version with the cluster version etcd reports and with what members run,
// by etcd's rules: patch changes freely; up one minor only from the patch releases etcd's upgrade guide names;
// down one minor only through etcd's downgrade API (3.6+), and a member is moved to the older release only once
// etcd has migrated its storage version down.
func decideVersion(spec Spec, obs Observation, members []Member) (versionGoal, string) {
	anyStale := false
	for _, m := range members {
		if m.InEtcd && stale(spec, m) {
			anyStale = true
		}
	}
	target, err := ParseVersion(spec.Version)
	if err != nil {
		return goalRefused, err.Error()
	}
	downgrading := obs.DowngradeTarget != ""
	if !anyStale {
		if downgrading {
			if dt, err := ParseVersion(obs.DowngradeTarget); err == nil && !dt.sameMinor(target) {
				return goalCancel, fmt.Sprintf("etcd has a downgrade to %s enabled that spec.version %s does not ask for", obs.DowngradeTarget, spec.Version)
			}
		}
		return goalNone, ""
	}
	if obs.ClusterVersion == "" {
		return goalWaitingCV, "etcd has not reported its cluster version yet"
	}
	cv, err := ParseVersion(obs.ClusterVersion)
	if err != nil {
		return goalRefused, fmt.Sprintf("etcd reports cluster version %q, which Steward cannot read", obs.ClusterVersion)
	}
	if downgrading {
		if dt, err := ParseVersion(obs.DowngradeTarget); err == nil && !dt.sameMinor(target) {
			return goalCancel, fmt.Sprintf("cancelling etcd's downgrade to %s: spec.version is now %s", obs.DowngradeTarget, spec.Version)
		}
	}
	switch apart := cv.minorsApart(target); {
	case apart == 0:
		return goalRoll, ""
	case apart == 1:
		return upgradeOneMinor(spec, obs, members, cv, target)
	case apart == -1:
		if cv.Less(firstDowngradableMinor) {
			return goalRefused, fmt.Sprintf("etcd %s has no downgrade API: a cluster at %s cannot be downgraded in place; restore a backup into a new cluster instead", cv.MinorString(), cv.MinorString())
		}
		if downgrading {
			return goalWaitingCV, fmt.Sprintf("etcd's downgrade to %s is enabled; waiting for the cluster version to follow", target.MinorString())
		}
		return goalEnable, fmt.Sprintf("enabling etcd's downgrade from %s to %s", cv.MinorString(), target.MinorString())
	case apart > 1:
		next := Version{cv.Major, cv.Minor + 1, 0}.MinorString()
		return goalRefused, fmt.Sprintf("the cluster is at etcd %s and spec.version %s is %d minor versions ahead: etcd upgrades one minor version at a time, and Steward has no %s release to pass through (the operator's --upgrade-via names none, or spec.image pins a single image); set spec.version to a %s release first",
			cv.MinorString(), spec.Version, apart, next, next)
	default:
		return goalRefused, fmt.Sprintf("the cluster is at etcd %s and spec.version %s is %d minor versions behind: etcd downgrades one minor version at a time",
			cv.MinorString(), spec.Version, -apart)
	}
}

// upgradeOneMinor is decideVersion's answer for a cluster one minor below the spec: roll, unless a member
// runs a release etcd does not upgrade from, or members have yet to snapshot past where the cluster reached its
// cluster version.
func upgradeOneMinor(spec Spec, obs Observation, members []Member, cv, target Version) (versionGoal, string) {
	floor, known := upgradeFloor[cv.MinorString()]
	if !known {
		return goalRefused, fmt.Sprintf("Steward knows no upgrade path from etcd %s to %s", cv.MinorString(), target.MinorString())
	}
	var tooOld []string
	for _, m := range members {
		running := runningVersion(m)
		v, err := ParseVersion(running)
		if err != nil || !m.InEtcd {
			continue
		}
		if v.sameMinor(cv) && v.Less(floor) {
			tooOld = append(tooOld, fmt.Sprintf("%s runs %s", m.Name, running))
		}
	}
	if len(tooOld) > 0 {
		sort.Strings(tooOld)
		return goalRefused, fmt.Sprintf("etcd supports upgrading to %s only from %s or later (%s): set spec.version to a %s release at or above %s first",
			target.MinorString(), floor, strings.Join(tooOld, ", "), cv.MinorString(), floor)
	}
	// A member restarts by replaying its log from its last raft snapshot. Until every member on cv has
	// snapshotted past the point where the cluster reached cv, its log may hold entries the release before
	// cv wrote, which target cannot read (etcd 3.7 panics on entries written under 3.5). Snapshots come every
	// snapshotInterval applied entries; the slack covers entries applied in one batch.
	if obs.ClusterVersionSince > 0 {
		need := obs.ClusterVersionSince + snapshotInterval(spec, cv) + catchUpSlack
		var behind []string
		for _, m := range members {
			if running, err := ParseVersion(m.RunningVersion); m.InEtcd && (err != nil || running.sameMinor(cv)) && m.AppliedIndex < need {
				behind = append(behind, fmt.Sprintf("%s needs %d more", m.Name, need-m.AppliedIndex))
			}
		}
		if len(behind) > 0 {
			sort.Strings(behind)
			return goalWaitingSnap, fmt.Sprintf("waiting for members to take a raft snapshot past index %d, where the cluster reached %s, before moving to %s: a member replays its log from its last snapshot and %s cannot read entries written before %s (applied entries: %s)",
				obs.ClusterVersionSince, cv.MinorString(), target.MinorString(), target.MinorString(), cv.MinorString(), strings.Join(behind, ", "))
		}
	}
	return goalRoll, ""
}

// joinVersion is the version and image a member that joins now (a learner, or a member re-created on its volume
// without a recorded version) starts with: the spec's when the cluster may run it, else the leader's, so that a
// pending downgrade or a refused change never lets a member start on a release the cluster cannot take.
func joinVersion(spec Spec, obs Observation, members []Member) (version, image string) {
	spec, _, _ = upgradeStage(spec, obs)
	goal, _ := decideVersion(spec, obs, members)
	if goal == goalNone || goal == goalRoll {
		return spec.Version, spec.Image
	}
	var fallback *Member
	for i := range members {
		m := &members[i]
		if !m.HasPod || m.PodVersion == "" || !m.InEtcd {
			continue
		}
		if m.ID == obs.LeaderID {
			return m.PodVersion, m.PodImage
		}
		if fallback == nil {
			fallback = m
		}
	}
	if fallback != nil {
		return fallback.PodVersion, fallback.PodImage
	}
	return spec.Version, spec.Image
}

// catchUpSlack is how far (in raft entries) a member's applied index may trail the leader's commit index and
// still count as caught up before the next member restarts: well inside the 5000 entries etcd keeps for
// followers to catch up from its log, and far more than the few entries in flight between two status calls.
const catchUpSlack = 1000

// upgradeStage turns a spec.version two or more minors above the cluster version into the next single-minor
// step etcd allows: the same spec with the version and image of spec.UpgradeVia's release of the next minor,
// and the words that tell every message of the stage where it stands. False when spec.version is at most one
// minor ahead, a downgrade is under way, or no release of the next minor is known (decideVersion then refuses
// the jump and says why). Every rule of a single-minor upgrade applies to each stage unchanged, the snapshot
// wait before the next minor included, because each stage is one.
func upgradeStage(spec Spec, obs Observation) (Spec, string, bool) {
	target, err := ParseVersion(spec.Version)
	cv, err2 := ParseVersion(obs.ClusterVersion)
	if err != nil || err2 != nil || obs.DowngradeTarget != "" || cv.minorsApart(target) < 2 {
		return spec, "", false
	}
	via, ok := spec.UpgradeVia[Version{cv.Major, cv.Minor + 1, 0}.MinorString()]
	if !ok {
		return spec, "", false
	}
	stage := spec
	stage.Version, stage.Image = via.Version, via.Image
	return stage, fmt.Sprintf("upgrading from %s to %s through %s: ", cv.MinorString(), spec.Version, via.Version), true
}

// ClusterVersionRising reports whether etcd is about to raise its cluster version by itself: no downgrade is
// enabled, and every member etcd lists reports a release of a later minor than the cluster version (the tail of
// an upgrade, after the last member restarted). etcd's leader compares its members' versions every few seconds
// and raises the cluster version to their lowest; no Kubernetes event says when it did, so the controller looks
// again soon instead of at the steady pace, and status shows the raised version, which ends the upgrade for a
// user, seconds after etcd raised it rather than up to a steady period later.
func ClusterVersionRising(obs Observation) bool {
	cv, err := ParseVersion(obs.ClusterVersion)
	if err != nil || obs.DowngradeTarget != "" {
		return false
	}
	listed := 0
	for _, m := range obs.Members {
		if !m.InEtcd {
			continue
		}
		v, err := ParseVersion(m.RunningVersion)
		if err != nil || cv.minorsApart(v) < 1 {
			return false
		}
		listed++
	}
	return listed > 0
}

// nextVersionStep returns the step that moves a settled cluster (every member healthy, no learner, as many
// voters as specified) toward spec.version, one minor at a time, and false when there is nothing to do.
func nextVersionStep(spec Spec, obs Observation, members []Member) (Action, bool) {
	stage, label, staged := upgradeStage(spec, obs)
	if !staged {
		return nextVersionStepTo(spec, obs, members)
	}
	a, ok := nextVersionStepTo(stage, obs, members)
	if !ok {
		// Every member runs the stage's release; etcd's leader raises the cluster version by itself once it sees
		// that (within seconds), and only then may the next minor start.
		cv, _ := ParseVersion(obs.ClusterVersion)
		via, _ := ParseVersion(stage.Version)
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForClusterVersion,
			Message: fmt.Sprintf("%severy member runs %s; waiting for etcd to raise the cluster version from %s to %s before the next minor",
				label, stage.Version, cv.MinorString(), via.MinorString())}, true
	}
	a.Message = label + a.Message
	return a, true
}

// nextVersionStepTo returns the step toward spec.version, at most one minor from the cluster version.
func nextVersionStepTo(spec Spec, obs Observation, members []Member) (Action, bool) {
	goal, why := decideVersion(spec, obs, members)
	switch goal {
	case goalNone:
		// Every Pod is set to the spec's release; the last one switched may still be restarting.
		for _, m := range members {
			if restartPending(m) {
				return waitForRestart(m), true
			}
		}
		return Action{}, false
	case goalRefused:
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonVersionChangeRefused, Message: why}, true
	case goalWaitingCV:
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForClusterVersion, Message: why}, true
	case goalWaitingSnap:
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForSnapshot, Message: why}, true
	case goalCancel:
		return Action{Kind: CancelDowngrade, Reason: etcdv1alpha1.ReasonDowngrading, Message: why}, true
	case goalEnable:
		target, _ := ParseVersion(spec.Version)
		return Action{Kind: EnableDowngrade, Version: target.MinorString(), Reason: etcdv1alpha1.ReasonDowngrading, Message: why}, true
	}

	// Every member runs what its Pod says and has caught up with the leader, or the last restart is not over.
	var leader *Member
	for i := range members {
		if members[i].InEtcd && members[i].ID == obs.LeaderID {
			leader = &members[i]
		}
	}
	for _, m := range members {
		if restartPending(m) {
			return waitForRestart(m), true
		}
		if leader != nil && m.InEtcd && leader.CommitIndex > m.AppliedIndex+catchUpSlack {
			return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForCatchUp,
				Message: fmt.Sprintf("waiting for member %s to catch up (applied %d, leader committed %d)", m.Name, m.AppliedIndex, leader.CommitIndex)}, true
		}
	}

	var todo []Member
	for _, m := range members {
		if m.InEtcd && !m.IsLearner && stale(spec, m) {
			todo = append(todo, m)
		}
	}
	if len(todo) == 0 {
		return Action{}, false
	}
	sort.Slice(todo, func(i, j int) bool { return todo[i].Name < todo[j].Name })
	// Followers first; the leader last, and only after it has handed leadership to a member already rolled.
	next := followerFirst(todo, obs.LeaderID)
	voters := 0
	for _, m := range members {
		if m.InEtcd && !m.IsLearner {
			voters++
		}
	}
	if next.ID == obs.LeaderID && voters > 1 {
		if to, ok := transferee(members, next, func(m Member) bool { return !stale(spec, m) }); ok {
			return Action{Kind: MoveLeader, Members: []string{next.Name, to.Name}, MemberID: next.ID, TargetID: to.ID, Reason: etcdv1alpha1.ReasonMovingLeader,
				Message: fmt.Sprintf("moving leadership from %s to %s before restarting %s", next.Name, to.Name, next.Name)}, true
		}
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonMovingLeader, Message: fmt.Sprintf("no healthy follower to take leadership from %s", next.Name)}, true
	}
	return rollStep(spec, obs, members, next, len(todo), voters), true
}

// rollStep restarts member m on the spec's version, unless it is moving down a minor and etcd has not yet
// migrated its storage version down (a 3.5 binary cannot read 3.6 data), or may raise its cluster version to m's
// minor any moment (see heldFromGoingBack).
func rollStep(spec Spec, obs Observation, members []Member, m Member, left, voters int) Action {
	target, _ := ParseVersion(spec.Version)
	from := runningVersion(m)
	reason := etcdv1alpha1.ReasonRestartingForImage
	if cur, err := ParseVersion(from); err == nil {
		switch {
		case target.Less(cur):
			reason = etcdv1alpha1.ReasonDowngrading
		case cur.Less(target):
			reason = etcdv1alpha1.ReasonUpgrading
		}
	}
	if m.PodDeleting {
		// Its roll re-creates its Pod (other start flags): the new one comes once the old one has gone.
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonPodDeleting, Message: fmt.Sprintf("waiting for the Pod of member %s to go; it is re-created on %s", m.Name, spec.Version)}
	}
	if storageAbove(m, target, from) {
		return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForStorageVersion,
			Message: fmt.Sprintf("waiting for etcd to migrate member %s's storage version (%s) down to %s before it restarts on %s", m.Name, orUnknown(m.StorageVersion), target.MinorString(), spec.Version)}
	}
	if a, held := heldFromGoingBack(spec, obs, members, m, from); held {
		return a
	}
	return Action{Kind: RollMember, Members: []string{m.Name}, MemberID: m.ID, Version: spec.Version, Image: spec.Image, Reason: reason,
		Message: fmt.Sprintf("restarting member %s on %s (from %s; %d of %d members left)", m.Name, spec.Version, orUnknown(from), left, voters)}
}

// storageAbove reports whether member m's data may be in a newer format than target's minor reads: its storage
// version says so, or it is not known while the member runs (from) a newer minor.
func storageAbove(m Member, target Version, from string) bool {
	if sv, err := ParseVersion(m.StorageVersion); err == nil {
		return target.minorsApart(sv) > 0
	}
	cur, err := ParseVersion(from)
	return err == nil && cur.minorsApart(target) < 0
}

// transferee picks the healthy voter to take leadership from leader: by name, among those preferred first when
// preferred is given (a roll prefers a member already on the new release).
func transferee(members []Member, leader Member, preferred func(Member) bool) (Member, bool) {
	rank := func(m Member) bool { return preferred != nil && preferred(m) }
	var best Member
	found := false
	for _, m := range members {
		if !m.InEtcd || m.IsLearner || !m.Healthy || m.ID == leader.ID {
			continue
		}
		if !found || (rank(m) && !rank(best)) || (rank(m) == rank(best) && m.Name < best.Name) {
			best, found = m, true
		}
	}
	return best, found
}

// followerFirst picks the first of members (in their order) that does not lead, the leader only when it is the
// only one: members are restarted followers first, the leader last, so that leadership moves once.
func followerFirst(members []Member, leaderID uint64) Member {
	for _, m := range members {
		if m.ID != leaderID {
			return m
		}
	}
	return members[0]
}

// rollUnhealthy restarts on the spec's version a member that is down and whose Pod is not at the spec's version
// (a release that crashes, an image that cannot be pulled, and the user set spec.version back). Restarting a
// member that is already down lowers nobody's health, so it is safe whenever the others keep a quorum; without
// it a failed roll would block its own repair (every other step waits for all members to be healthy).
func rollUnhealthy(spec Spec, obs Observation, members []Member) (Action, bool) {
	spec, _, _ = upgradeStage(spec, obs)
	goal, _ := decideVersion(spec, obs, members)
	if goal != goalRoll {
		return Action{}, false
	}
	for _, m := range members {
		if !m.InEtcd || m.IsLearner || m.Healthy || !stale(spec, m) {
			continue
		}
		voters, healthyOthers := votersAndHealthyOthers(members, m.Name)
		if healthyOthers < Quorum(voters) {
			return Action{}, false
		}
		// Moving down a minor needs the storage version, which a member that is down cannot report. Only while no
		// downgrade is under way is it known anyway: it follows the cluster version, which is the spec's minor.
		if target, err := ParseVersion(spec.Version); err == nil && (m.StorageVersion != "" || obs.DowngradeTarget != "") && storageAbove(m, target, m.PodVersion) {
			return Action{}, false
		}
		if a, held := heldFromGoingBack(spec, obs, members, m, m.PodVersion); held {
			return a, true
		}
		if m.PodDeleting {
			return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonPodDeleting, Message: fmt.Sprintf("waiting for the Pod of member %s to go; it is re-created on %s", m.Name, spec.Version)}, true
		}
		return Action{Kind: RollMember, Members: []string{m.Name}, MemberID: m.ID, Version: spec.Version, Image: spec.Image,
			Reason: etcdv1alpha1.ReasonRestartingForImage, Message: fmt.Sprintf("restarting member %s, which is down, on %s", m.Name, spec.Version)}, true
	}
	return Action{}, false
}

// heldFromGoingBack keeps member m, on release from, from being restarted straight on the spec's older minor
// (the way back from an upgrade that has not finished) when that may no longer be safe. etcd's leader raises the
// cluster version to the newer minor as soon as every member reports running it, within seconds and without
// asking anyone; from then on the older release refuses the member's data ("cluster cannot be downgraded") and
// only etcd's downgrade leads back. The cluster version Steward observed a moment ago proves nothing, so m goes
// straight back only when the leader cannot raise it: another voter is healthy on the older minor, or m's Pod
// never ran its newer image (the kubelet cannot pull or create it). Otherwise Steward waits for the cluster
// version to rise, and then downgrades through etcd.
func heldFromGoingBack(spec Spec, obs Observation, members []Member, m Member, from string) (Action, bool) {
	target, err := ParseVersion(spec.Version)
	cur, err2 := ParseVersion(from)
	if err != nil || err2 != nil || cur.minorsApart(target) >= 0 || obs.DowngradeTarget != "" || podImageNeverRan(m) {
		return Action{}, false
	}
	for _, o := range members {
		if o.Name == m.Name || !o.InEtcd || o.IsLearner || !o.Healthy {
			continue
		}
		if v, err := ParseVersion(o.RunningVersion); err == nil && v.sameMinor(target) {
			return Action{}, false
		}
	}
	state := "runs"
	if !m.Healthy {
		state = "is down on"
	}
	return Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForClusterVersion,
		Message: fmt.Sprintf("member %s %s %s and no other voter runs %s: etcd may raise the cluster version to %s at any moment, after which %s cannot read the member's data; waiting for that and then downgrading through etcd, rather than restarting %s on %s directly (if %s cannot come back on %s, it is replaced after spec.replaceUnhealthyAfter)",
			m.Name, state, from, target.MinorString(), cur.MinorString(), spec.Version, m.Name, spec.Version, m.Name, from)}, true
}

// podImageNeverRan reports whether the kubelet says member m's Pod cannot pull or create its etcd container, so
// no process of the Pod's image has run. Not when the status merely shows an earlier container: it may be stale.
func podImageNeverRan(m Member) bool {
	return m.PodStuck != "" && m.PodStuck != PodStuckImageNotStarted
}

// runningVersion is the version member m runs as etcd reports it, else (it does not answer) what its Pod is set to.
func runningVersion(m Member) string {
	if m.RunningVersion != "" {
		return m.RunningVersion
	}
	return m.PodVersion
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// ParseUpgradeVia reads the operator's --upgrade-via: the releases a cluster passes through on an upgrade of
// more than one minor, comma-separated, one full release per minor ("3.6.16"), each at or above the patch etcd's
// upgrade guide requires to move on to the next minor (a release below it could be entered but never left).
// It returns them as etcd names them, without a "v".
func ParseUpgradeVia(s string) ([]string, error) {
	var releases []string
	seen := map[string]Version{}
	for _, r := range strings.Split(s, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		v, err := ParseVersion(r)
		if err != nil {
			return nil, err
		}
		if strings.Count(r, ".") != 2 {
			return nil, fmt.Errorf("release %q: name a full release, major.minor.patch", r)
		}
		if prev, dup := seen[v.MinorString()]; dup {
			return nil, fmt.Errorf("releases %s and %s are of the same minor: name one release per minor", prev, v)
		}
		if floor, ok := upgradeFloor[v.MinorString()]; ok && v.Less(floor) {
			return nil, fmt.Errorf("release %s: etcd upgrades from %s to the next minor only from %s or later", v, v.MinorString(), floor)
		}
		seen[v.MinorString()] = v
		releases = append(releases, v.String())
	}
	return releases, nil
}
