package plan

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// at returns a healthy voter running version v (Pod, container and etcd agree), ID id.
func at(name string, id uint64, v string) Member {
	m := voter(name, id)
	m.PodVersion, m.RunningVersion = v, v
	m.PodImage, m.ContainerImage = "etcd:v"+v, "etcd:v"+v
	minor, _ := ParseVersion(v)
	if !minor.Less(Version{3, 6, 0}) {
		m.StorageVersion = minor.MinorString() + ".0"
	}
	m.AppliedIndex, m.CommitIndex = 5000, 5000
	return m
}

func specAt(v string) Spec { return Spec{Replicas: 3, Version: v, Image: "etcd:v" + v} }

// viaSpec is specAt with the operator's 3.6 release to pass through on a jump of more than one minor.
func viaSpec(v string) Spec {
	s := specAt(v)
	s.UpgradeVia = map[string]Release{"3.6": {Version: "3.6.16", Image: "etcd:v3.6.16"}}
	return s
}

func clusterAt(cv string, members ...Member) Observation {
	o := formed(members...)
	o.ClusterVersion = cv
	return o
}

func TestNextVersion(t *testing.T) {
	tests := map[string]struct {
		spec   Spec
		obs    Observation
		want   ActionKind
		reason string
		member string // Members[0]
		msg    string // a part of the message
	}{
		"members at the spec's version need nothing": {
			specAt("3.6.16"), clusterAt("3.6.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16")), None, etcdv1alpha1.ReasonReconciled, "", "",
		},
		"patch upgrade restarts a follower first, by name": {
			specAt("3.6.16"), clusterAt("3.6.0", at("c-a", 1, "3.6.15"), at("c-b", 2, "3.6.15"), at("c-c", 3, "3.6.15")), RollMember, etcdv1alpha1.ReasonUpgrading, "c-b", "3 of 3",
		},
		"a member whose Pod goes for its roll is waited for, not rolled again": {
			specAt("3.6.16"), clusterAt("3.5.0", at("c-a", 1, "3.5.35"), func() Member { m := at("c-b", 2, "3.5.35"); m.PodDeleting = true; return m }(), at("c-c", 3, "3.5.35")),
			Wait, etcdv1alpha1.ReasonPodDeleting, "", "waiting for the Pod of member c-b to go",
		},
		"minor upgrade from an allowed patch restarts a follower": {
			specAt("3.6.16"), clusterAt("3.5.0", at("c-a", 1, "3.5.35"), at("c-b", 2, "3.5.35"), at("c-c", 3, "3.5.35")), RollMember, etcdv1alpha1.ReasonUpgrading, "c-b", "",
		},
		"the leader is restarted last, after handing leadership to a member already upgraded": {
			specAt("3.6.16"), clusterAt("3.5.0", at("c-a", 1, "3.5.35"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16")), MoveLeader, etcdv1alpha1.ReasonMovingLeader, "c-a", "to c-b",
		},
		"a former leader that is now a follower is restarted": {
			specAt("3.6.16"), func() Observation {
				o := clusterAt("3.5.0", at("c-a", 1, "3.5.35"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16"))
				o.LeaderID = 2
				return o
			}(), RollMember, etcdv1alpha1.ReasonUpgrading, "c-a", "1 of 3",
		},
		"a single member is restarted in place (no one to hand leadership to)": {
			Spec{Replicas: 1, Version: "3.6.16", Image: "etcd:v3.6.16"}, clusterAt("3.6.0", at("c-a", 1, "3.6.15")), RollMember, etcdv1alpha1.ReasonUpgrading, "c-a", "",
		},
		"upgrade from a patch etcd's guide does not allow is refused, naming the floor": {
			specAt("3.6.16"), clusterAt("3.5.0", at("c-a", 1, "3.5.21"), at("c-b", 2, "3.5.21"), at("c-c", 3, "3.5.21")), Wait, etcdv1alpha1.ReasonVersionChangeRefused, "", "3.5.26",
		},
		"a jump of two minor versions over the cluster version is refused": {
			specAt("3.7.3"), clusterAt("3.5.0", at("c-a", 1, "3.5.35"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.5.35")), Wait, etcdv1alpha1.ReasonVersionChangeRefused, "", "one minor version at a time",
		},
		"a jump of two minor versions passes through the operator's release of the minor in between": {
			viaSpec("3.7.3"), clusterAt("3.5.0", at("c-a", 1, "3.5.35"), at("c-b", 2, "3.5.35"), at("c-c", 3, "3.5.35")), RollMember, etcdv1alpha1.ReasonUpgrading, "c-b", "upgrading from 3.5 to 3.7.3 through 3.6.16: restarting member c-b on 3.6.16",
		},
		"the first stage follows every rule of a single-minor upgrade (the leader last)": {
			viaSpec("3.7.3"), clusterAt("3.5.0", at("c-a", 1, "3.5.35"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16")), MoveLeader, etcdv1alpha1.ReasonMovingLeader, "c-a", "through 3.6.16: moving leadership from c-a to c-b",
		},
		"the first stage is refused from a patch etcd's guide does not allow": {
			viaSpec("3.7.3"), clusterAt("3.5.0", at("c-a", 1, "3.5.21"), at("c-b", 2, "3.5.21"), at("c-c", 3, "3.5.21")), Wait, etcdv1alpha1.ReasonVersionChangeRefused, "", "3.5.26",
		},
		"every member on the stage's release: the cluster version must rise before the next minor": {
			viaSpec("3.7.3"), clusterAt("3.5.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16")), Wait, etcdv1alpha1.ReasonWaitingForClusterVersion, "", "raise the cluster version from 3.5 to 3.6",
		},
		"once the cluster version rose, the last minor follows": {
			viaSpec("3.7.3"), clusterAt("3.6.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16")), RollMember, etcdv1alpha1.ReasonUpgrading, "c-b", "restarting member c-b on 3.7.3",
		},
		"no release to pass through for the minor in between: refused, saying so": {
			viaSpec("3.8.0"), clusterAt("3.6.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16")), Wait, etcdv1alpha1.ReasonVersionChangeRefused, "", "no 3.7 release to pass through",
		},
		"a downgrade of two minors is refused even with releases to pass through": {
			viaSpec("3.5.35"), clusterAt("3.7.0", at("c-a", 1, "3.7.3"), at("c-b", 2, "3.7.3"), at("c-c", 3, "3.7.3")), Wait, etcdv1alpha1.ReasonVersionChangeRefused, "", "2 minor versions behind",
		},
		"3.6 to 3.7 from 3.6.11 or later is allowed": {
			specAt("3.7.3"), clusterAt("3.6.0", at("c-a", 1, "3.6.15"), at("c-b", 2, "3.6.15"), at("c-c", 3, "3.6.15")), RollMember, etcdv1alpha1.ReasonUpgrading, "c-b", "",
		},
		"downgrade starts by enabling etcd's downgrade to the target minor": {
			specAt("3.5.35"), clusterAt("3.6.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16")), EnableDowngrade, etcdv1alpha1.ReasonDowngrading, "", "",
		},
		"downgrade enabled but the cluster version not yet lowered is waited for": {
			specAt("3.5.35"), func() Observation {
				o := clusterAt("3.6.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16"))
				o.DowngradeTarget = "3.5.0"
				return o
			}(), Wait, etcdv1alpha1.ReasonWaitingForClusterVersion, "", "",
		},
		"a member is moved down only once its storage version came down": {
			specAt("3.5.35"), func() Observation {
				o := clusterAt("3.5.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16"))
				o.DowngradeTarget = "3.5.0"
				return o
			}(), Wait, etcdv1alpha1.ReasonWaitingForStorageVersion, "", "c-b",
		},
		"a member whose storage version came down is restarted on the older release": {
			specAt("3.5.35"), func() Observation {
				b := at("c-b", 2, "3.6.16")
				b.StorageVersion = "3.5.0"
				o := clusterAt("3.5.0", at("c-a", 1, "3.6.16"), b, at("c-c", 3, "3.6.16"))
				o.DowngradeTarget = "3.5.0"
				return o
			}(), RollMember, etcdv1alpha1.ReasonDowngrading, "c-b", "",
		},
		"downgrade of a 3.5 cluster is refused: no downgrade API": {
			Spec{Replicas: 3, Version: "3.4.30"}, clusterAt("3.5.0", at("c-a", 1, "3.5.35"), at("c-b", 2, "3.5.35"), at("c-c", 3, "3.5.35")), Wait, etcdv1alpha1.ReasonVersionChangeRefused, "", "no downgrade API",
		},
		"a partial upgrade is rolled back without the downgrade API (cluster version never moved)": {
			specAt("3.5.35"), clusterAt("3.5.0", at("c-a", 1, "3.5.35"), func() Member { m := at("c-b", 2, "3.6.16"); m.StorageVersion = "3.5.0"; return m }(), at("c-c", 3, "3.5.35")), RollMember, etcdv1alpha1.ReasonDowngrading, "c-b", "",
		},
		"user changes their mind during a downgrade: the downgrade is cancelled first": {
			specAt("3.6.16"), func() Observation {
				o := clusterAt("3.5.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.5.35"), at("c-c", 3, "3.6.16"))
				o.DowngradeTarget = "3.5.0"
				return o
			}(), CancelDowngrade, etcdv1alpha1.ReasonDowngrading, "", "",
		},
		"a downgrade etcd still has enabled after every member is at the spec's version is cancelled": {
			specAt("3.6.16"), func() Observation {
				o := clusterAt("3.6.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16"))
				o.DowngradeTarget = "3.5.0"
				return o
			}(), CancelDowngrade, etcdv1alpha1.ReasonDowngrading, "", "",
		},
		"a restart the kubelet has not done yet is waited for": {
			specAt("3.6.16"), clusterAt("3.5.0", at("c-a", 1, "3.5.35"), func() Member {
				m := at("c-b", 2, "3.5.35")
				m.PodVersion, m.PodImage = "3.6.16", "etcd:v3.6.16"
				return m
			}(), at("c-c", 3, "3.5.35")), Wait, etcdv1alpha1.ReasonWaitingForRestart, "", "c-b",
		},
		"the last member switched is waited for until its container restarted": {
			specAt("3.6.16"), clusterAt("3.6.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), func() Member {
				m := at("c-c", 3, "3.6.15")
				m.PodVersion, m.PodImage = "3.6.16", "etcd:v3.6.16"
				return m
			}()), Wait, etcdv1alpha1.ReasonWaitingForRestart, "", "c-c",
		},
		"a member that restarted but lags behind the leader is waited for": {
			specAt("3.6.16"), clusterAt("3.5.0", at("c-a", 1, "3.5.35"), func() Member {
				m := at("c-b", 2, "3.6.16")
				m.AppliedIndex = 100
				return m
			}(), at("c-c", 3, "3.5.35")), Wait, etcdv1alpha1.ReasonWaitingForCatchUp, "", "c-b",
		},
		"a member down after its restart blocks the next one": {
			specAt("3.6.16"), clusterAt("3.5.0", at("c-a", 1, "3.5.35"), func() Member {
				m := at("c-b", 2, "3.6.16")
				m.Healthy, m.PodReady, m.RunningVersion = false, false, ""
				return m
			}(), at("c-c", 3, "3.5.35")), Wait, etcdv1alpha1.ReasonWaitingForMembers, "", "",
		},
		"a restarted member that answers but is not ready yet blocks the next one": {
			specAt("3.6.16"), clusterAt("3.5.0", at("c-a", 1, "3.5.35"), func() Member {
				m := at("c-b", 2, "3.6.16")
				m.PodReady = false
				return m
			}(), at("c-c", 3, "3.5.35")), Wait, etcdv1alpha1.ReasonWaitingForMembers, "", "Pods not yet Ready: [c-b]",
		},
		"a member down on a release the spec no longer asks for is restarted on the spec's": {
			specAt("3.5.35"), clusterAt("3.5.0", at("c-a", 1, "3.5.35"), func() Member {
				m := at("c-b", 2, "3.6.16")
				m.Healthy, m.PodReady, m.RunningVersion, m.StorageVersion = false, false, "", ""
				return m
			}(), at("c-c", 3, "3.5.35")), RollMember, etcdv1alpha1.ReasonRestartingForImage, "c-b", "down",
		},
		// Seen end to end: the last member was switched to 3.6.16 and restarting when spec.version went back to 3.5.35;
		// the cluster version Steward saw was still 3.5, but the leader raised it to 3.6 seconds later, and the
		// member sent straight back to 3.5 could no longer read its data.
		"the last member down on its way to the newer minor is not sent straight back while every other voter runs it": {
			specAt("3.5.35"), clusterAt("3.5.0", at("c-a", 1, "3.6.16"), func() Member {
				m := at("c-b", 2, "3.6.16")
				m.Healthy, m.PodReady, m.RunningVersion, m.StorageVersion, m.ContainerImage = false, false, "", "", ""
				m.PodStuck = PodStuckImageNotStarted
				return m
			}(), at("c-c", 3, "3.6.16")), Wait, etcdv1alpha1.ReasonWaitingForClusterVersion, "", "c-b is down on 3.6.16 and no other voter runs 3.5",
		},
		"a member down on the newer minor whose image cannot be pulled goes straight back: it never ran": {
			specAt("3.5.35"), clusterAt("3.5.0", at("c-a", 1, "3.6.16"), func() Member {
				m := at("c-b", 2, "3.6.16")
				m.Healthy, m.PodReady, m.RunningVersion, m.StorageVersion, m.ContainerImage = false, false, "", "", ""
				m.PodStuck = "ImagePullBackOff"
				return m
			}(), at("c-c", 3, "3.6.16")), RollMember, etcdv1alpha1.ReasonRestartingForImage, "c-b", "down",
		},
		"every voter on the newer minor and the cluster version not raised yet: wait for it, then downgrade": {
			specAt("3.5.35"), clusterAt("3.5.0", func() Member { m := at("c-a", 1, "3.6.16"); m.StorageVersion = "3.5.0"; return m }(),
				func() Member { m := at("c-b", 2, "3.6.16"); m.StorageVersion = "3.5.0"; return m }(),
				func() Member { m := at("c-c", 3, "3.6.16"); m.StorageVersion = "3.5.0"; return m }()), Wait, etcdv1alpha1.ReasonWaitingForClusterVersion, "", "may raise the cluster version to 3.6",
		},
		"a voter still on the older minor keeps the cluster version there: the others go straight back": {
			specAt("3.5.35"), clusterAt("3.5.0", at("c-a", 1, "3.5.35"), func() Member { m := at("c-b", 2, "3.6.16"); m.StorageVersion = "3.5.0"; return m }(),
				func() Member { m := at("c-c", 3, "3.6.16"); m.StorageVersion = "3.5.0"; return m }()), RollMember, etcdv1alpha1.ReasonDowngrading, "c-b", "",
		},
		"a voter on the older minor that is down does not keep the cluster version there": {
			Spec{Replicas: 5, Version: "3.5.35", Image: "etcd:v3.5.35"}, clusterAt("3.5.0", at("c-a", 1, "3.6.16"), func() Member {
				m := at("c-b", 2, "3.6.16")
				m.Healthy, m.PodReady, m.RunningVersion, m.StorageVersion, m.ContainerImage = false, false, "", "", ""
				return m
			}(), at("c-c", 3, "3.6.16"), at("c-d", 4, "3.6.16"), func() Member {
				m := at("c-e", 5, "3.5.35")
				m.Healthy, m.PodReady, m.RunningVersion = false, false, ""
				return m
			}()), Wait, etcdv1alpha1.ReasonWaitingForClusterVersion, "", "c-b is down on 3.6.16",
		},
		"a member down is not restarted when the others have no quorum": {
			specAt("3.5.35"), clusterAt("3.5.0", at("c-a", 1, "3.5.35"), func() Member {
				m := at("c-b", 2, "3.6.16")
				m.Healthy, m.PodReady, m.RunningVersion = false, false, ""
				return m
			}(), func() Member { m := at("c-c", 3, "3.5.35"); m.Healthy, m.PodReady = false, false; return m }()), Wait, etcdv1alpha1.ReasonWaitingForMembers, "", "",
		},
		"an image change at the same version restarts members too": {
			Spec{Replicas: 3, Version: "3.6.16", Image: "mirror/etcd:v3.6.16"}, clusterAt("3.6.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16")), RollMember, etcdv1alpha1.ReasonRestartingForImage, "c-b", "",
		},
		"scale-up comes before the version change": {
			Spec{Replicas: 5, Version: "3.6.16", Image: "etcd:v3.6.16"}, clusterAt("3.5.0", at("c-a", 1, "3.5.35"), at("c-b", 2, "3.5.35"), at("c-c", 3, "3.5.35")), AddLearner, etcdv1alpha1.ReasonScalingUp, "c-new", "",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := Next(tt.spec, tt.obs)
			if got.Kind != tt.want || got.Reason != tt.reason {
				t.Fatalf("Next = %s/%s (%s), want %s/%s", got.Kind, got.Reason, got.Message, tt.want, tt.reason)
			}
			if tt.member != "" && (len(got.Members) == 0 || got.Members[0] != tt.member) {
				t.Errorf("members = %v, want %s first", got.Members, tt.member)
			}
			if !strings.Contains(got.Message, tt.msg) {
				t.Errorf("message %q does not say %q", got.Message, tt.msg)
			}
			want := tt.spec
			if stage, _, ok := upgradeStage(tt.spec, tt.obs); ok {
				want = stage // the message names it too
			}
			if got.Kind == RollMember && (got.Version != want.Version || got.Image != want.Image) {
				t.Errorf("roll to %s/%s, want %s/%s", got.Version, got.Image, want.Version, want.Image)
			}
			if got.Kind == EnableDowngrade && got.Version != "3.5" {
				t.Errorf("downgrade enabled to %q, want 3.5", got.Version)
			}
		})
	}
}

// TestJoinVersion: members that join while a downgrade is pending or a change is refused start on the release
// the cluster runs, never on one it cannot take.
func TestJoinVersion(t *testing.T) {
	learner := Member{Name: "c-new", InEtcd: true, IsLearner: true, ID: 9}
	tests := map[string]struct {
		spec Spec
		obs  Observation
		want string
	}{
		"upgrade: the new release":                {specAt("3.6.16"), clusterAt("3.5.0", at("c-a", 1, "3.5.35"), at("c-b", 2, "3.5.35"), at("c-c", 3, "3.5.35"), learner), "3.6.16"},
		"downgrade not yet enabled: the leader's": {specAt("3.5.35"), clusterAt("3.6.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.15"), at("c-c", 3, "3.6.16"), learner), "3.6.16"},
		"refused upgrade: the leader's":           {specAt("3.6.16"), clusterAt("3.5.0", at("c-a", 1, "3.5.21"), at("c-b", 2, "3.5.21"), at("c-c", 3, "3.5.21"), learner), "3.5.21"},
		"two minors ahead: the stage's release":   {viaSpec("3.7.3"), clusterAt("3.5.0", at("c-a", 1, "3.5.35"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.5.35"), learner), "3.6.16"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			spec := tt.spec
			spec.Replicas = 5
			got := Next(spec, tt.obs)
			if got.Kind != CreateMemberPods || got.Version != tt.want {
				t.Fatalf("Next = %s %v on %q (%s), want the learner started on %s", got.Kind, got.Members, got.Version, got.Message, tt.want)
			}
		})
	}
	// A Pod re-created on its volume starts on the release its data was last run with.
	c := at("c-c", 3, "3.5.35")
	c.HasPod, c.VolumeVersion, c.VolumeImage = false, "3.5.35", "etcd:v3.5.35"
	got := Next(specAt("3.6.16"), clusterAt("3.5.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), c))
	if got.Kind != RecreateMemberPods || got.Pods[0].Version != "3.5.35" || got.Pods[0].Image != "etcd:v3.5.35" {
		t.Fatalf("re-created member %v (%s), want 3.5.35 from its volume", got.Pods, got.Message)
	}
}

// TestVersionStepsKeepQuorum checks, over random mid-roll observations, that a version step never restarts a
// member while another restart is unfinished or a voter is down and healthy, never restarts or moves the leader
// by restarting it while another voter exists, and never puts a member on an older minor than its storage.
func TestVersionStepsKeepQuorum(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	versions := []string{"3.5.21", "3.5.35", "3.6.15", "3.6.16", "3.7.3"}
	names := []string{"c-a", "c-b", "c-c", "c-d", "c-e"}
	for i := 0; i < 20000; i++ {
		n := []int{1, 3, 5}[rng.Intn(3)]
		var members []Member
		for j := 0; j < n; j++ {
			m := at(names[j], uint64(j+1), versions[rng.Intn(len(versions))])
			if rng.Intn(4) == 0 {
				m.Healthy, m.PodReady, m.RunningVersion = false, false, ""
			}
			if rng.Intn(5) == 0 {
				m.PodVersion = versions[rng.Intn(len(versions))]
				m.PodImage = "etcd:v" + m.PodVersion
			}
			if rng.Intn(6) == 0 {
				m.StorageVersion = []string{"", "3.5.0", "3.6.0", "3.7.0"}[rng.Intn(4)]
			}
			members = append(members, m)
		}
		obs := clusterAt([]string{"3.5.0", "3.6.0", "3.7.0", ""}[rng.Intn(4)], members...)
		obs.LeaderID = uint64(rng.Intn(n) + 1)
		if rng.Intn(4) == 0 {
			obs.DowngradeTarget = []string{"3.5.0", "3.6.0"}[rng.Intn(2)]
		}
		spec := specAt(versions[rng.Intn(len(versions))])
		if rng.Intn(2) == 0 {
			spec = viaSpec(spec.Version)
		}
		spec.Replicas = n
		got := Next(spec, obs)
		if got.Kind != RollMember && got.Kind != MoveLeader {
			continue
		}
		target, _ := find(members, got.Members[0])
		healthyOthers := 0
		for _, m := range members {
			if m.Name != target.Name && m.Healthy {
				healthyOthers++
			}
			if got.Kind == RollMember && target.Healthy && (restartPending(m) || !m.Healthy) {
				t.Fatalf("restarted %s while %s is down or restarting: %+v", target.Name, m.Name, members)
			}
		}
		if got.Kind == RollMember && n > 1 && healthyOthers < Quorum(n) && target.Healthy { // one member: downtime is inherent
			t.Fatalf("restarting %s leaves %d healthy of %d: %+v", target.Name, healthyOthers, n, members)
		}
		if got.Kind == RollMember && target.Healthy && target.ID == obs.LeaderID && n > 1 {
			t.Fatalf("restarted leader %s while another voter exists: %+v", target.Name, members)
		}
		tv, _ := ParseVersion(got.Version)
		if sv, err := ParseVersion(target.StorageVersion); got.Kind == RollMember && err == nil && tv.minorsApart(sv) > 0 {
			t.Fatalf("moved %s to %s below its storage version %s", target.Name, got.Version, target.StorageVersion)
		}
		if got.Kind == RollMember && obs.ClusterVersion != "" {
			cv, _ := ParseVersion(obs.ClusterVersion)
			if d := cv.minorsApart(tv); d > 1 || d < 0 && obs.DowngradeTarget != "" && target.StorageVersion == "" {
				t.Fatalf("restarted %s on %s with cluster version %s: %+v", target.Name, got.Version, obs.ClusterVersion, members)
			}
		}
	}
}

func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"3.6.16", "v3.5.0", "3.6", "3.6.0", "", "3..1", "03.1.1", "3.6.16-rc.0", "99999.1.1", "-1.2.3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseVersion(s)
		if err != nil {
			return
		}
		if v.Major < 0 || v.Minor < 0 || v.Patch < 0 {
			t.Fatalf("negative part in %q: %+v", s, v)
		}
		again, err := ParseVersion(v.String())
		if err != nil || again != v {
			t.Fatalf("%q -> %s does not round-trip: %+v, %v", s, v, again, err)
		}
	})
}

// entriesPerPass is how many raft entries the simulated cluster applies between two passes (client writes).
const entriesPerPass = 500

// simulatedCluster plays etcd and the kubelet for a sequence test: it applies the planner's version steps the
// way they take effect (a Pod switched restarts on the next pass, etcd moves the cluster version and the storage
// versions on the pass after), so that many passes replay a whole roll.
type simulatedCluster struct {
	members []Member // as Steward observes them
	obs     Observation
	pending map[string]bool   // switched Pods whose container has not restarted yet
	unseen  map[string]bool   // restarted members whose new process runs but does not answer Steward yet
	real    map[string]string // the release each member's process runs: what etcd's leader sees
	// downgrade is the downgrade etcd has enabled, "" when none.
	downgrade string
	// cvLag: etcd's leader raises the cluster version from the releases members ran before this pass's restarts
	// (it checks every few seconds), so Steward may see every member on the newer minor and the cluster version
	// not yet raised.
	cvLag bool
	// downWhileRestarting: a member is down to Steward from the moment its Pod is switched until the pass after
	// its new process started (the kubelet's status and etcd's answers lag behind the process).
	downWhileRestarting bool
	// refused lists members restarted on a minor below the cluster version without a downgrade enabled: their
	// release refuses the data, as etcd 3.5 does ("cluster cannot be downgraded").
	refused []string
}

func newSimulatedCluster(cv string, members ...Member) *simulatedCluster {
	s := &simulatedCluster{members: members, pending: map[string]bool{}, unseen: map[string]bool{}, real: map[string]string{}}
	for _, m := range members {
		s.real[m.Name] = m.RunningVersion
	}
	s.obs = clusterAt(cv, s.members...)
	return s
}

func (s *simulatedCluster) apply(a Action) {
	switch a.Kind {
	case RollMember:
		for i := range s.members {
			m := &s.members[i]
			if m.Name != a.Members[0] {
				continue
			}
			m.PodVersion, m.PodImage = a.Version, a.Image
			s.pending[m.Name] = true
			if s.downWhileRestarting {
				m.Healthy, m.PodReady, m.RunningVersion, m.StorageVersion, m.ContainerImage = false, false, "", "", ""
				m.PodStuck = PodStuckImageNotStarted
			}
		}
	case MoveLeader:
		s.obs.LeaderID = a.TargetID
	case EnableDowngrade:
		s.downgrade = a.Version + ".0"
	}
}

// tick is what happens between two passes: restarts finish, etcd settles versions.
func (s *simulatedCluster) tick() {
	if s.cvLag {
		s.settleClusterVersion()
	}
	for i := range s.members {
		m := &s.members[i]
		if s.unseen[m.Name] {
			m.RunningVersion, m.ContainerImage = s.real[m.Name], m.PodImage
			m.Healthy, m.PodReady, m.PodStuck = true, true, ""
			delete(s.unseen, m.Name)
		}
		if !s.pending[m.Name] {
			continue
		}
		delete(s.pending, m.Name)
		if v := mustParse(m.PodVersion); s.downgrade == "" && v.minorsApart(mustParse(s.obs.ClusterVersion)) > 0 {
			s.refused = append(s.refused, m.Name+" on "+m.PodVersion+" at cluster version "+s.obs.ClusterVersion)
		}
		s.real[m.Name] = m.PodVersion
		if s.downWhileRestarting {
			s.unseen[m.Name] = true
			continue
		}
		m.RunningVersion, m.ContainerImage = m.PodVersion, m.PodImage
		m.Healthy, m.PodReady, m.PodStuck = true, true, ""
	}
	if !s.cvLag {
		s.settleClusterVersion()
	}
	s.obs.DowngradeTarget = s.downgrade
	for i := range s.members {
		s.members[i].AppliedIndex += entriesPerPass
		s.members[i].CommitIndex += entriesPerPass
		if v, err := ParseVersion(s.members[i].RunningVersion); err == nil && !v.Less(Version{3, 6, 0}) {
			s.members[i].StorageVersion = s.obs.ClusterVersion
		} else {
			s.members[i].StorageVersion = ""
		}
	}
	s.obs.Members = s.members
}

// settleClusterVersion is etcd's leader: the cluster version follows the lowest release members run, upward
// only, or the downgrade target while a downgrade is enabled (which ends once every member runs it).
func (s *simulatedCluster) settleClusterVersion() {
	lowest := Version{9, 9, 9}
	for _, v := range s.real {
		if parsed, err := ParseVersion(v); err == nil && parsed.Less(lowest) {
			lowest = parsed
		}
	}
	cv, _ := ParseVersion(s.obs.ClusterVersion)
	defer func() {
		if s.obs.ClusterVersion != cv.MinorString()+".0" && len(s.members) > 0 {
			s.obs.ClusterVersionSince = s.members[0].CommitIndex // the controller's memory of where it moved
		}
	}()
	switch {
	case s.downgrade != "":
		s.obs.ClusterVersion = s.downgrade
		if dt, _ := ParseVersion(s.downgrade); dt.sameMinor(lowest) {
			s.downgrade = "" // etcd ends the downgrade once every member runs the target
		}
	case cv.Less(Version{lowest.Major, lowest.Minor, 0}):
		s.obs.ClusterVersion = lowest.MinorString() + ".0"
	}
}

func TestRollSequences(t *testing.T) {
	tests := map[string]struct {
		from, to string
		want     []string
		// cvLag: etcd raises the cluster version a pass late (see simulatedCluster).
		cvLag bool
	}{
		"upgrade 3.5 -> 3.7: through 3.6.16, each minor followers first and the leader last": {
			"3.5.35", "3.7.3", []string{
				"roll c-b 3.6.16", "roll c-c 3.6.16", "move c-a->c-b", "roll c-a 3.6.16",
				"wait WaitingForClusterVersion", "wait WaitingForSnapshot",
				"roll c-a", "roll c-c", "move c-b->c-a", "roll c-b"}, true,
		},
		"upgrade 3.5 -> 3.6: followers by name, leadership handed over, then the old leader": {
			"3.5.35", "3.6.16", []string{"roll c-b", "roll c-c", "move c-a->c-b", "roll c-a"}, false,
		},
		"downgrade 3.6 -> 3.5: enable etcd's downgrade, then the same order": {
			"3.6.16", "3.5.35", []string{"enable 3.5", "roll c-b", "roll c-c", "move c-a->c-b", "roll c-a"}, false,
		},
		"patch 3.6.15 -> 3.6.16": {
			"3.6.15", "3.6.16", []string{"roll c-b", "roll c-c", "move c-a->c-b", "roll c-a"}, false,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			from, _ := ParseVersion(tt.from)
			s := newSimulatedCluster(from.MinorString()+".0", at("c-a", 1, tt.from), at("c-b", 2, tt.from), at("c-c", 3, tt.from))
			s.cvLag = tt.cvLag
			var steps []string
			for pass := 0; pass < 200; pass++ {
				s.tick()
				a := Next(viaSpec(tt.to), s.obs)
				switch a.Kind {
				case None:
					pass = 200
				case RollMember:
					step := "roll " + a.Members[0]
					if a.Version != tt.to {
						step += " " + a.Version
					}
					steps = append(steps, step)
				case MoveLeader:
					steps = append(steps, "move "+a.Members[0]+"->"+a.Members[1])
				case EnableDowngrade:
					steps = append(steps, "enable "+a.Version)
				case Wait:
					// Waits for restarts and catch-up come and go; the waits between two minors are the steps
					// that matter, each recorded once.
					if w := "wait " + a.Reason; (a.Reason == etcdv1alpha1.ReasonWaitingForClusterVersion || a.Reason == etcdv1alpha1.ReasonWaitingForSnapshot) && (len(steps) == 0 || steps[len(steps)-1] != w) {
						steps = append(steps, w)
					}
				default:
					t.Fatalf("pass %d: unexpected step %s (%s)", pass, a.Kind, a.Message)
				}
				s.apply(a)
			}
			if strings.Join(steps, ", ") != strings.Join(tt.want, ", ") {
				t.Fatalf("steps %v, want %v", steps, tt.want)
			}
			s.tick() // etcd's leader settles the cluster version after the last restart, by itself
			want, _ := ParseVersion(tt.to)
			if s.obs.ClusterVersion != want.MinorString()+".0" || s.downgrade != "" {
				t.Errorf("ended at cluster version %s, downgrade %q", s.obs.ClusterVersion, s.downgrade)
			}
		})
	}
}

func mustParse(v string) Version {
	parsed, err := ParseVersion(v)
	if err != nil {
		panic(err)
	}
	return parsed
}

// TestChangeOfMindMidUpgrade: spec.version goes from 3.5.35 to 3.6.16 and back to 3.5.35 at every point of the
// roll, with etcd raising the cluster version a pass after the last member runs 3.6 (the race an e2e run found).
// No member is ever restarted on 3.5 once its data may be at cluster version 3.6 without etcd's downgrade, and
// every sequence ends with all members on 3.5.35.
func TestChangeOfMindMidUpgrade(t *testing.T) {
	for back := 0; back < 24; back++ {
		s := newSimulatedCluster("3.5.0", at("c-a", 1, "3.5.35"), at("c-b", 2, "3.5.35"), at("c-c", 3, "3.5.35"))
		s.cvLag, s.downWhileRestarting = true, back%2 == 1
		var steps []string
		done := false
		for pass := 0; pass < 80 && !done; pass++ {
			s.tick()
			spec := specAt("3.6.16")
			if pass >= back/2 {
				spec = specAt("3.5.35")
			}
			a := Next(spec, s.obs)
			switch a.Kind {
			case None:
				done = pass >= back/2
			case RollMember:
				steps = append(steps, fmt.Sprintf("%d: roll %s to %s", pass, a.Members[0], a.Version))
			case MoveLeader:
				steps = append(steps, fmt.Sprintf("%d: move %s->%s", pass, a.Members[0], a.Members[1]))
			case EnableDowngrade, CancelDowngrade:
				steps = append(steps, fmt.Sprintf("%d: %s %s", pass, a.Kind, a.Version))
			case Wait:
			default:
				t.Fatalf("back at pass %d: pass %d: unexpected step %s (%s)", back, pass, a.Kind, a.Message)
			}
			s.apply(a)
		}
		if len(s.refused) > 0 {
			t.Errorf("back at pass %d: restarted on a release that refuses its data: %v (steps %v)", back, s.refused, steps)
		}
		if !done || s.obs.ClusterVersion != "3.5.0" || s.downgrade != "" {
			t.Errorf("back at pass %d: not settled on 3.5.35: cluster version %s, downgrade %q, steps %v", back, s.obs.ClusterVersion, s.downgrade, steps)
		}
		for _, m := range s.members {
			if m.RunningVersion != "3.5.35" {
				t.Errorf("back at pass %d: %s runs %s (steps %v)", back, m.Name, m.RunningVersion, steps)
			}
		}
	}
}

// TestUpgradeWaitsForSnapshotPastOlderLog: a cluster that reached 3.6 by an upgrade at raft index 10000 moves on
// to 3.7 only once every member applied a snapshot interval past it (etcd 3.7 cannot replay entries 3.5 wrote).
func TestUpgradeWaitsForSnapshotPastOlderLog(t *testing.T) {
	members := func(applied uint64) []Member {
		ms := []Member{at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16")}
		for i := range ms {
			ms[i].AppliedIndex, ms[i].CommitIndex = applied, applied
		}
		return ms
	}
	tests := map[string]struct {
		since, applied uint64
		snapshotCount  int64
		want           ActionKind
		reason         string
	}{
		"created at 3.6: no older log":                     {0, 100, 0, RollMember, etcdv1alpha1.ReasonUpgrading},
		"reached 3.6 by upgrade, too few entries since":    {10000, 15000, 0, Wait, etcdv1alpha1.ReasonWaitingForSnapshot},
		"reached 3.6 by upgrade, a default interval later": {10000, 21001, 0, RollMember, etcdv1alpha1.ReasonUpgrading},
		"a smaller snapshot count shortens the wait":       {10000, 12001, 1000, RollMember, etcdv1alpha1.ReasonUpgrading},
		"a smaller snapshot count, still too early":        {10000, 11500, 1000, Wait, etcdv1alpha1.ReasonWaitingForSnapshot},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			spec := specAt("3.7.3")
			spec.SnapshotCount = tt.snapshotCount
			obs := clusterAt("3.6.0", members(tt.applied)...)
			obs.ClusterVersionSince = tt.since
			got := Next(spec, obs)
			if got.Kind != tt.want || got.Reason != tt.reason {
				t.Fatalf("Next = %s/%s (%s), want %s/%s", got.Kind, got.Reason, got.Message, tt.want, tt.reason)
			}
		})
	}
}

func TestParseUpgradeVia(t *testing.T) {
	tests := map[string]struct {
		in      string
		want    string // the releases, comma-separated
		refused string // a part of the error
	}{
		"the default":                         {in: "3.6.16", want: "3.6.16"},
		"several minors, spaces and a v":      {in: " v3.6.16, 3.7.3 ,", want: "3.6.16,3.7.3"},
		"empty: no release to pass through":   {in: "", want: ""},
		"a minor without a patch":             {in: "3.6", refused: "full release"},
		"two releases of one minor":           {in: "3.6.16,3.6.15", refused: "one release per minor"},
		"a release etcd cannot leave for 3.7": {in: "3.6.10", refused: "only from 3.6.11 or later"},
		"a 3.5 release below the 3.6 floor":   {in: "3.5.25", refused: "3.5.26"},
		"not a version":                       {in: "latest", refused: "not major.minor.patch"},
		"a pre-release":                       {in: "3.6.0-rc.1", refused: "not major.minor.patch"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseUpgradeVia(tt.in)
			if tt.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tt.refused) {
					t.Fatalf("ParseUpgradeVia(%q) = %v, %v; want an error saying %q", tt.in, got, err, tt.refused)
				}
				return
			}
			if err != nil || strings.Join(got, ",") != tt.want {
				t.Fatalf("ParseUpgradeVia(%q) = %v, %v; want %s", tt.in, got, err, tt.want)
			}
		})
	}
}

// FuzzParseUpgradeVia: whatever it accepts is one valid full release per minor, each at or above its floor, and
// reads back the same.
func FuzzParseUpgradeVia(f *testing.F) {
	for _, s := range []string{"3.6.16", "3.6.16,3.7.3", "", "3.6", "3.6.10", ",,", "v3.6.16, 3.6.16", "3.5.26"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseUpgradeVia(s)
		if err != nil {
			return
		}
		minors := map[string]bool{}
		for _, r := range got {
			v, err := ParseVersion(r)
			if err != nil || v.String() != r {
				t.Fatalf("%q: accepted %q, which is not a full release", s, r)
			}
			if minors[v.MinorString()] {
				t.Fatalf("%q: two releases of %s", s, v.MinorString())
			}
			minors[v.MinorString()] = true
			if floor, ok := upgradeFloor[v.MinorString()]; ok && v.Less(floor) {
				t.Fatalf("%q: accepted %s below the floor %s", s, v, floor)
			}
		}
		again, err := ParseUpgradeVia(strings.Join(got, ","))
		if err != nil || strings.Join(again, ",") != strings.Join(got, ",") {
			t.Fatalf("%q -> %v does not read back: %v, %v", s, got, again, err)
		}
	})
}

// TestClusterVersionRising: the tail of an upgrade (every listed member on a later minor than the cluster
// version, no downgrade) and nothing else.
func TestClusterVersionRising(t *testing.T) {
	downgrading := clusterAt("3.6.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16"))
	downgrading.DowngradeTarget = "3.5.0"
	notListed := at("c-d", 4, "3.5.35")
	notListed.InEtcd = false
	for name, tc := range map[string]struct {
		obs  Observation
		want bool
	}{
		"every member upgraded, cluster version behind": {clusterAt("3.5.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16")), true},
		"a member etcd does not list is not counted":    {clusterAt("3.5.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), notListed), true},
		"one member still on the old minor":             {clusterAt("3.5.0", at("c-a", 1, "3.5.35"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16")), false},
		"a member's version unknown":                    {clusterAt("3.5.0", at("c-a", 1, ""), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16")), false},
		"settled":                                       {clusterAt("3.6.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.16")), false},
		"a patch upgrade":                               {clusterAt("3.6.0", at("c-a", 1, "3.6.16"), at("c-b", 2, "3.6.16"), at("c-c", 3, "3.6.15")), false},
		"a downgrade enabled":                           {downgrading, false},
		"cluster version unknown":                       {clusterAt("", at("c-a", 1, "3.6.16")), false},
		"no member listed":                              {clusterAt("3.5.0", notListed), false},
	} {
		if got := ClusterVersionRising(tc.obs); got != tc.want {
			t.Errorf("%s: %v, want %v", name, got, tc.want)
		}
	}
}
