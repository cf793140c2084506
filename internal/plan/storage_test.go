package plan

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

const gi = int64(1) << 30

// onVolume is m on a bound volume of class and size.
func onVolume(m Member, class string, size int64, expandable bool) Member {
	m.Volume = Volume{Class: class, Request: size, Capacity: size, Expandable: expandable}
	return m
}

func storageSpec(replicas int, class string, size int64) Spec {
	return Spec{Replicas: replicas, Version: "3.6.16", Storage: StorageGoal{Size: size, Class: class}}
}

func TestNeedOf(t *testing.T) {
	tests := map[string]struct {
		goal StorageGoal
		v    Volume
		want volumeNeed
		why  string
	}{
		"as specified":                       {StorageGoal{Size: gi, Class: "fast"}, Volume{Class: "fast", Request: gi}, volumeAsSpecified, ""},
		"any class when the spec names none": {StorageGoal{Size: gi}, Volume{Class: "fast", Request: gi}, volumeAsSpecified, ""},
		"ephemeral: nothing to change":       {StorageGoal{}, Volume{Class: "fast", Request: gi}, volumeAsSpecified, ""},
		"no PVC size known":                  {StorageGoal{Size: gi}, Volume{}, volumeAsSpecified, ""},
		"grows in an expandable class":       {StorageGoal{Size: 2 * gi}, Volume{Class: "fast", Request: gi, Expandable: true}, volumeExpand, "grows in place to 2Gi"},
		"grows in a class without expansion": {StorageGoal{Size: 2 * gi}, Volume{Class: "fast", Request: gi}, volumeReplace, "does not allow volume expansion"},
		"shrinks even when expandable":       {StorageGoal{Size: gi}, Volume{Class: "fast", Request: 2 * gi, Expandable: true}, volumeReplace, "cannot shrink"},
		"another class":                      {StorageGoal{Size: gi, Class: "slow"}, Volume{Class: "fast", Request: gi, Expandable: true}, volumeReplace, `storage class "fast", the spec asks for "slow"`},
		"another class and larger":           {StorageGoal{Size: 2 * gi, Class: "slow"}, Volume{Class: "fast", Request: gi, Expandable: true}, volumeReplace, "the spec asks for"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, why := needOf(tt.goal, tt.v)
			if got != tt.want || !strings.Contains(why, tt.why) {
				t.Fatalf("needOf = %d (%q), want %d (%q)", got, why, tt.want, tt.why)
			}
		})
	}
}

func TestNextStorage(t *testing.T) {
	old := func(m Member) Member { return onVolume(m, "fast", gi, true) }
	a, b, c := old(voter("c-a", 1)), old(voter("c-b", 2)), old(voter("c-c", 3))
	successor := onVolume(Member{Name: "c-new", InEtcd: true, IsLearner: true, ID: 9, HasPod: true, HasPVC: true, Healthy: true, Started: true,
		PodVersion: "3.6.16"}, "slow", gi, false)
	promoted := successor
	promoted.IsLearner, promoted.PodReady = false, true
	expanding := func(m Member, resize string) Member {
		m.Volume.Request, m.Volume.Resize = 2*gi, resize
		return m
	}
	pendingFor := func(m Member, d time.Duration) Member { m.Volume.ResizePendingFor = d; return m }
	grown := func(m Member) Member { m.Volume.Request, m.Volume.Capacity = 2*gi, 2*gi; return m }
	leaderIs := func(o Observation, id uint64) Observation { o.LeaderID = id; return o }
	tests := map[string]struct {
		spec   Spec
		obs    Observation
		want   ActionKind
		reason string
		member string
		msg    string
	}{
		"as specified: nothing to do":          {storageSpec(3, "fast", gi), formed(a, b, c), None, etcdv1alpha1.ReasonReconciled, "", ""},
		"spec names no class: nothing to do":   {storageSpec(3, "", gi), formed(a, b, c), None, etcdv1alpha1.ReasonReconciled, "", ""},
		"ephemeral cluster: nothing to do":     {storageSpec(3, "slow", 0), formed(a, b, c), None, etcdv1alpha1.ReasonReconciled, "", ""},
		"size grows, expandable: first volume": {storageSpec(3, "fast", 2*gi), formed(a, b, c), ExpandVolume, etcdv1alpha1.ReasonExpandingVolume, "c-a", "3 of 3 volumes left"},
		"expansion under way is waited for": {storageSpec(3, "fast", 2*gi), formed(expanding(a, ""), b, c), Wait, etcdv1alpha1.ReasonExpandingVolume, "c-a",
			"grow from 1Gi to 2Gi"},
		"file system resize pending is reported": {storageSpec(3, "fast", 2*gi), formed(expanding(a, "FileSystemResizePending"), b, c), Wait, etcdv1alpha1.ReasonExpandingVolume, "c-a",
			"FileSystemResizePending"},
		"file system resize pending too long: the member restarts": {storageSpec(3, "fast", 2*gi),
			leaderIs(formed(a, pendingFor(expanding(b, "FileSystemResizePending"), FileSystemResizeGrace), c), 1), RestartMember, etcdv1alpha1.ReasonExpandingVolume, "c-b", "FileSystemResizePending"},
		"file system resize pending too long on the leader: it hands over first": {storageSpec(3, "fast", 2*gi),
			formed(pendingFor(expanding(a, "FileSystemResizePending"), FileSystemResizeGrace), b, c), MoveLeader, etcdv1alpha1.ReasonMovingLeader, "c-a", "file system resize"},
		"a resize error is reported": {storageSpec(3, "fast", 2*gi), formed(expanding(func() Member { m := a; m.Volume.ResizeMessage = "quota"; return m }(), "ControllerResizeError"), b, c),
			Wait, etcdv1alpha1.ReasonVolumeResizeFailed, "c-a", "ControllerResizeError: quota"},
		"next volume once the first has grown": {storageSpec(3, "fast", 2*gi), formed(grown(a), b, c), ExpandVolume, etcdv1alpha1.ReasonExpandingVolume, "c-b", "2 of 3 volumes left"},
		"all grown: nothing to do":             {storageSpec(3, "fast", 2*gi), formed(grown(a), grown(b), grown(c)), None, etcdv1alpha1.ReasonReconciled, "", ""},
		"no expansion while a member is down": {storageSpec(3, "fast", 2*gi), formed(a, b, func() Member { m := c; m.Healthy = false; return m }()),
			Wait, etcdv1alpha1.ReasonWaitingForMembers, "", ""},
		"class change: a learner on the new storage joins": {storageSpec(3, "slow", gi), formed(a, b, c), AddLearner, etcdv1alpha1.ReasonMigratingStorage, "c-new",
			`to replace member c-b (3 of 3 members on the old storage left)`},
		"class without expansion: replaced": {storageSpec(3, "", 2*gi), formed(onVolume(a, "slow", gi, false), b, c), AddLearner, etcdv1alpha1.ReasonMigratingStorage, "c-new",
			"does not allow volume expansion"},
		"shrink: replaced":                       {storageSpec(3, "fast", gi/2), formed(a, b, c), AddLearner, etcdv1alpha1.ReasonMigratingStorage, "c-new", "cannot shrink"},
		"the new learner is promoted":            {storageSpec(3, "slow", gi), formed(a, b, c, successor), PromoteLearner, etcdv1alpha1.ReasonScalingUp, "c-new", ""},
		"then an old follower is removed":        {storageSpec(3, "slow", gi), formed(a, b, c, promoted), RemoveMember, etcdv1alpha1.ReasonMigratingStorage, "c-b", "3 of 4 members on the old storage left"},
		"no removal while a member is down":      {storageSpec(3, "slow", gi), formed(a, b, func() Member { m := c; m.Healthy = false; return m }(), promoted), Wait, etcdv1alpha1.ReasonWaitingForMembers, "", ""},
		"the leader last, after handing over":    {storageSpec(3, "slow", gi), leaderIs(formed(a, onVolume(b, "slow", gi, false), onVolume(c, "slow", gi, false), promoted), 1), MoveLeader, etcdv1alpha1.ReasonMovingLeader, "c-a", ""},
		"the old leader, now a follower, goes":   {storageSpec(3, "slow", gi), leaderIs(formed(a, onVolume(b, "slow", gi, false), onVolume(c, "slow", gi, false), promoted), 2), RemoveMember, etcdv1alpha1.ReasonMigratingStorage, "c-a", ""},
		"removed member's Pod goes":              {storageSpec(3, "slow", gi), formed(a, b, func() Member { m := c; m.InEtcd = false; return m }(), promoted), DeleteMemberPod, etcdv1alpha1.ReasonRemovingLeftoverMember, "c-c", ""},
		"1 member: the successor joins first":    {storageSpec(1, "slow", gi), formed(a), AddLearner, etcdv1alpha1.ReasonMigratingStorage, "c-new", "replace member c-a"},
		"1 member: leader hands over, then goes": {storageSpec(1, "slow", gi), formed(a, promoted), MoveLeader, etcdv1alpha1.ReasonMovingLeader, "c-a", ""},
		"a volume being deleted is replaced first": {storageSpec(3, "slow", gi), formed(a, b, func() Member { m := c; m.HasPVC, m.VolumeDeleting = false, true; return m }()),
			AddLearner, etcdv1alpha1.ReasonReplacingMember, "c-new", "volume is being deleted"},
		"replacement before expansion": {storageSpec(3, "fast", 2*gi), formed(onVolume(a, "fast", gi, false), b, c), AddLearner, etcdv1alpha1.ReasonMigratingStorage, "c-new", "replace member c-a"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := Next(tt.spec, tt.obs)
			if got.Kind != tt.want || got.Reason != tt.reason || (tt.member != "" && (len(got.Members) == 0 || got.Members[0] != tt.member)) ||
				!strings.Contains(got.Message, tt.msg) {
				t.Fatalf("Next = %s/%s %v (%s), want %s/%s %s (%q)", got.Kind, got.Reason, got.Members, got.Message, tt.want, tt.reason, tt.member, tt.msg)
			}
		})
	}
}

// storageBed applies the planner's steps to a simulated cluster, the way the controller and etcd would.
type storageBed struct {
	t       *testing.T
	spec    Spec
	members []Member
	leader  uint64
	nextID  uint64
	names   int
	// expandable: the classes that allow expansion.
	expandable map[string]bool
	// maxVoters is the most voters the cluster had at once, replaced the members that left.
	maxVoters int
	replaced  []string
	steps     []string
}

func (s *storageBed) observe() Observation {
	o := formed(s.members...)
	o.LeaderID = s.leader
	o.NewMemberNames = []string{fmt.Sprintf("c-n%02d", s.names)}
	return o
}

func (s *storageBed) member(name string) *Member {
	for i := range s.members {
		if s.members[i].Name == name {
			return &s.members[i]
		}
	}
	s.t.Fatalf("no member %s", name)
	return nil
}

// run plans and applies steps until the planner has nothing left to do, checking after each that the voters keep
// a healthy quorum and are never fewer than specified.
func (s *storageBed) run() {
	for i := 0; i < 200; i++ {
		a := Next(s.spec, s.observe())
		s.steps = append(s.steps, string(a.Kind))
		switch a.Kind {
		case None:
			return
		case AddLearner:
			s.nextID++
			s.names++
			s.members = append(s.members, Member{Name: a.Members[0], InEtcd: true, IsLearner: true, ID: s.nextID, PeerURL: a.PeerURL})
		case CreateMemberPods:
			m := s.member(a.Members[0])
			m.HasPod, m.HasPVC, m.Healthy, m.PodReady, m.Started, m.PodVersion = true, true, true, true, true, "3.6.16"
			m.Volume = Volume{Class: s.spec.Storage.Class, Request: s.spec.Storage.Size, Capacity: s.spec.Storage.Size,
				Expandable: s.expandable[s.spec.Storage.Class]}
		case PromoteLearner:
			s.member(a.Members[0]).IsLearner = false
		case MoveLeader:
			if a.MemberID != s.leader {
				s.t.Fatalf("MoveLeader from %d, the leader is %d", a.MemberID, s.leader)
			}
			s.leader = a.TargetID
		case RemoveMember:
			m := s.member(a.Members[0])
			if m.ID == s.leader {
				s.t.Fatalf("removed the leader %s while it leads", m.Name)
			}
			m.InEtcd = false
			s.replaced = append(s.replaced, m.Name)
		case DeleteMemberPod:
			s.member(a.Members[0]).HasPod = false
		case DeleteMemberPVC:
			var keep []Member
			for _, m := range s.members {
				if m.Name != a.Members[0] {
					keep = append(keep, m)
				}
			}
			s.members = keep
		case ExpandVolume:
			s.member(a.Members[0]).Volume.Request = s.spec.Storage.Size
		case Wait:
			if a.Reason != etcdv1alpha1.ReasonExpandingVolume {
				s.t.Fatalf("unexpected wait: %s: %s", a.Reason, a.Message)
			}
			// The provisioner grows the volume: the next observation shows its capacity.
			m := s.member(a.Members[0])
			m.Volume.Capacity = m.Volume.Request
		default:
			s.t.Fatalf("unexpected step %s: %s", a.Kind, a.Message)
		}
		voters, healthy := HealthyVoters(s.members)
		if voters < s.spec.Replicas || healthy < Quorum(voters) {
			s.t.Fatalf("after %s: %d voters, %d healthy (replicas %d)", a.Kind, voters, healthy, s.spec.Replicas)
		}
		if voters > s.maxVoters {
			s.maxVoters = voters
		}
	}
	s.t.Fatalf("no end after 200 steps: %v", s.steps)
}

func newStorageBed(t *testing.T, n int, class string, size int64, expandable map[string]bool) *storageBed {
	s := &storageBed{t: t, expandable: expandable, leader: 1, nextID: uint64(n)}
	for i := 0; i < n; i++ {
		s.members = append(s.members, onVolume(voter(fmt.Sprintf("c-%c", 'a'+i), uint64(i+1)), class, size, expandable[class]))
	}
	return s
}

func TestStorageChangesEndAsSpecified(t *testing.T) {
	classes := map[string]bool{"fast": true, "fixed": false}
	tests := map[string]struct {
		n           int
		class       string
		size        int64
		to          StorageGoal
		replacement bool
	}{
		"3 members grow in place":             {3, "fast", gi, StorageGoal{Class: "fast", Size: 3 * gi}, false},
		"5 members grow in place":             {5, "fast", gi, StorageGoal{Size: 2 * gi}, false},
		"3 members move to another class":     {3, "fast", gi, StorageGoal{Class: "fixed", Size: gi}, true},
		"3 members shrink":                    {3, "fast", 2 * gi, StorageGoal{Class: "fast", Size: gi}, true},
		"3 members grow in a fixed class":     {3, "fixed", gi, StorageGoal{Class: "fixed", Size: 2 * gi}, true},
		"1 member moves to another class":     {1, "fixed", gi, StorageGoal{Class: "fast", Size: gi}, true},
		"5 members move class and grow":       {5, "fixed", gi, StorageGoal{Class: "fast", Size: 2 * gi}, true},
		"7 members move to an expandable one": {7, "fixed", gi, StorageGoal{Class: "fast", Size: gi}, true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := newStorageBed(t, tt.n, tt.class, tt.size, classes)
			s.spec = storageSpec(tt.n, tt.to.Class, tt.to.Size)
			s.run()
			for _, m := range s.members {
				if need, why := needOf(s.spec.Storage, m.Volume); need != volumeAsSpecified || m.Volume.Capacity != tt.to.Size {
					t.Fatalf("member %s ends with %+v: %s", m.Name, m.Volume, why)
				}
			}
			if !tt.replacement {
				if len(s.replaced) > 0 || s.maxVoters != tt.n {
					t.Fatalf("expansion replaced members %v (at most %d voters)", s.replaced, s.maxVoters)
				}
				return
			}
			// Every member replaced, one at a time: never more than one voter above the spec.
			if len(s.replaced) != tt.n || s.maxVoters != tt.n+1 {
				t.Fatalf("replaced %v with at most %d voters; want all %d replaced with at most %d voters", s.replaced, s.maxVoters, tt.n, tt.n+1)
			}
		})
	}
}

// TestStorageStepsNeverBreakQuorum: whatever the volumes and health, a storage step never removes a member that
// leaves fewer healthy voters than quorum, never removes the leader while it leads, and never acts while a member
// is unhealthy.
func TestStorageStepsNeverBreakQuorum(t *testing.T) {
	rng := rand.New(rand.NewSource(18))
	classes := []string{"fast", "fixed", ""}
	for i := 0; i < 20000; i++ {
		var members []Member
		n := 1 + rng.Intn(7)
		for j := 0; j < n; j++ {
			m := voter(fmt.Sprintf("c-%c", 'a'+j), uint64(j+1))
			m.PodVersion = "3.6.16"
			m.Healthy, m.PodReady = rng.Intn(6) > 0, rng.Intn(6) > 0
			m.IsLearner = rng.Intn(8) == 0
			size := int64(1+rng.Intn(3)) * gi
			m = onVolume(m, classes[rng.Intn(2)], size, rng.Intn(2) == 0)
			if rng.Intn(6) == 0 {
				m.Volume.Capacity = size / 2
				if rng.Intn(2) == 0 {
					m.Volume.Resize, m.Volume.ResizePendingFor = "FileSystemResizePending", time.Duration(rng.Intn(300))*time.Second
				}
			}
			members = append(members, m)
		}
		obs := formed(members...)
		obs.LeaderID = uint64(1 + rng.Intn(n))
		spec := storageSpec(1+2*rng.Intn(3), classes[rng.Intn(3)], int64(1+rng.Intn(3))*gi)
		got := Next(spec, obs)
		if got.Reason != etcdv1alpha1.ReasonMigratingStorage && got.Reason != etcdv1alpha1.ReasonExpandingVolume {
			continue
		}
		if got.Kind == Wait {
			continue
		}
		for _, m := range members {
			if !m.Healthy || (!m.PodReady && !m.IsLearner) {
				t.Fatalf("%s while %s is unhealthy: %+v", got.Kind, m.Name, members)
			}
		}
		if got.Kind == RestartMember && got.MemberID == obs.LeaderID && n > 1 {
			t.Fatalf("restarted the leader while it leads: %+v", members)
		}
		if got.Kind == RemoveMember {
			if got.MemberID == obs.LeaderID {
				t.Fatalf("removed the leader: %+v", members)
			}
			voters, healthy := votersAfterRemoval(members, got.MemberID)
			if voters <= spec.Replicas || healthy < Quorum(voters-1) {
				t.Fatalf("removal leaves %d healthy of %d voters (replicas %d): %+v", healthy, voters-1, spec.Replicas, members)
			}
		}
	}
}
