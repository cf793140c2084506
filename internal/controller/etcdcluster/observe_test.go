package etcdcluster

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

var testOpts = resources.Options{ImageRepository: "steward.local/etcd", ClusterDomain: "cluster.local"}

func testCluster() *etcdv1alpha1.EtcdCluster {
	return &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", UID: "uid-db"},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16"},
	}
}

// fixture builds the objects Steward would have created for a bootstrap of names, with the given Pods running
// at 10.0.0.<index+1>.
func fixture(c *etcdv1alpha1.EtcdCluster, names []string, withPods int) ([]corev1.Pod, []corev1.PersistentVolumeClaim) {
	initial := map[string]string{}
	for _, n := range names {
		initial[n] = resources.PeerURL(c, n, testOpts)
	}
	var pods []corev1.Pod
	var pvcs []corev1.PersistentVolumeClaim
	for i, n := range names {
		m := resources.Member{Name: n, InitialCluster: initial, State: "new"}
		pvcs = append(pvcs, *resources.MemberPVC(c, m, testOpts))
		if i < withPods {
			p := resources.MemberPod(c, m, testOpts)
			p.Status.PodIP = "10.0.0." + string(rune('1'+i))
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			pods = append(pods, *p)
		}
	}
	return pods, pvcs
}

func noNames(map[string]bool) []string { return nil }

func TestAssemble(t *testing.T) {
	c := testCluster()
	names := []string{"db-aaaaa", "db-bbbbb", "db-ccccc"}

	t.Run("joins Pods, PVCs and etcd by name, and by peer URL before a member starts", func(t *testing.T) {
		pods, pvcs := fixture(c, names, 2)
		view := etcd.ClusterView{
			ClusterID: 7,
			Members: []etcd.Member{
				{ID: 1, Name: "db-aaaaa"},
				{ID: 2, Name: "db-bbbbb"},
				{ID: 3, PeerURLs: []string{resources.PeerURL(c, "db-ccccc", testOpts)}}, // not started
			},
			Statuses: map[string]etcd.Status{
				"https://10.0.0.1:2379": {MemberID: 1, LeaderID: 1, Version: "3.6.16"},
				"https://10.0.0.2:2379": {MemberID: 2, LeaderID: 1, Version: "3.6.16", Errors: []string{"memberID:2 alarm:CORRUPT "}},
			},
		}
		obs := assemble(c, pods, pvcs, view, testOpts, time.Unix(1000, 0), noNames)
		want := map[string]plan.Member{
			"db-aaaaa": {HasPod: true, HasPVC: true, PodReady: true, InEtcd: true, Started: true, ID: 1, Healthy: true},
			"db-bbbbb": {HasPod: true, HasPVC: true, PodReady: true, InEtcd: true, Started: true, ID: 2, Healthy: false},
			"db-ccccc": {HasPVC: true, InEtcd: true, Started: false, ID: 3},
		}
		if len(obs.plan.Members) != 3 {
			t.Fatalf("members %+v", obs.plan.Members)
		}
		for _, m := range obs.plan.Members {
			w := want[m.Name]
			if m.HasPod != w.HasPod || m.HasPVC != w.HasPVC || m.PodReady != w.PodReady || m.InEtcd != w.InEtcd ||
				m.Started != w.Started || m.ID != w.ID || m.Healthy != w.Healthy {
				t.Errorf("%s = %+v, want %+v", m.Name, m, w)
			}
			if m.InitialState != "new" || len(m.InitialCluster) != 3 {
				t.Errorf("%s: initial cluster not read back from its Pod or PVC: %v %q", m.Name, m.InitialCluster, m.InitialState)
			}
		}
		if !obs.plan.EtcdReachable || obs.plan.Bootstrapped {
			t.Errorf("reachable %v bootstrapped %v, want true/false (db-ccccc has not started)", obs.plan.EtcdReachable, obs.plan.Bootstrapped)
		}
	})

	t.Run("bootstrapped once every bootstrap member started", func(t *testing.T) {
		pods, pvcs := fixture(c, names, 3)
		view := etcd.ClusterView{Members: []etcd.Member{{ID: 1, Name: names[0]}, {ID: 2, Name: names[1]}, {ID: 3, Name: names[2]}}}
		if obs := assemble(c, pods, pvcs, view, testOpts, time.Unix(1000, 0), noNames); !obs.plan.Bootstrapped {
			t.Error("not bootstrapped")
		}
	})

	t.Run("bootstrapped is remembered from status when etcd is unreachable", func(t *testing.T) {
		cc := c.DeepCopy()
		cc.Status.Bootstrapped = true
		pods, pvcs := fixture(cc, names, 3)
		obs := assemble(cc, pods, pvcs, etcd.ClusterView{ListErr: errors.New("no quorum")}, testOpts, time.Unix(1000, 0), noNames)
		if !obs.plan.Bootstrapped || obs.plan.EtcdReachable {
			t.Errorf("bootstrapped %v reachable %v", obs.plan.Bootstrapped, obs.plan.EtcdReachable)
		}
	})

	t.Run("that a member has run is read from its volume, and from status for a volume from before the record", func(t *testing.T) {
		cc := c.DeepCopy()
		cc.Status.Members = []etcdv1alpha1.MemberStatus{
			{Name: names[1], ID: "2", Version: "3.6.16"},  // answered its status endpoint: it ran
			{Name: names[2], ID: "3"},                     // listed, never answered: not known to have run
			{Name: "db-gone", ID: "4", Version: "3.6.16"}, // neither Pod nor volume left: remembered
		}
		_, pvcs := fixture(cc, names, 0)
		pvcs[0].Annotations[resources.AnnotationHasRun] = "1"
		obs := assemble(cc, nil, pvcs, etcd.ClusterView{ListErr: errors.New("no quorum")}, testOpts, time.Unix(1000, 0), noNames)
		for _, m := range obs.plan.Members {
			if m.PVC != resources.PVCName(m.Name) && m.Name != "db-gone" {
				t.Errorf("%s: PVC %q", m.Name, m.PVC)
			}
			want := map[string][2]bool{names[0]: {true, false}, names[1]: {false, true}, names[2]: {false, false}, "db-gone": {false, true}}[m.Name]
			if m.VolumeHasRun != want[0] || m.ServedBefore != want[1] {
				t.Errorf("%s: VolumeHasRun %v ServedBefore %v, want %v", m.Name, m.VolumeHasRun, m.ServedBefore, want)
			}
		}
	})

	t.Run("objects the cluster does not control are ignored", func(t *testing.T) {
		pods, pvcs := fixture(c, names, 1)
		other := testCluster()
		other.UID = "uid-other"
		pods[0].OwnerReferences = resources.MemberPod(other, resources.Member{Name: names[0]}, testOpts).OwnerReferences
		pvcs = pvcs[1:]
		obs := assemble(c, pods, pvcs, etcd.ClusterView{ListErr: errors.New("x")}, testOpts, time.Unix(1000, 0), noNames)
		for _, m := range obs.plan.Members {
			if m.Name == names[0] {
				t.Errorf("foreign Pod/PVC of %s observed as ours: %+v", m.Name, m)
			}
		}
	})

	t.Run("in a cluster named unknown, a stray whose ID spells a member's name hides no member", func(t *testing.T) {
		u := testCluster()
		u.Name = "unknown"
		pods, pvcs := fixture(u, []string{"unknown-bcd24"}, 1)
		view := etcd.ClusterView{Members: []etcd.Member{{ID: 1, Name: "unknown-bcd24"}, {ID: 0xbcd24, PeerURLs: []string{"http://stranger:2380"}}}}
		obs := assemble(u, pods, pvcs, view, testOpts, time.Unix(1000, 0), noNames)
		got := map[string]uint64{}
		for _, m := range obs.plan.Members {
			got[m.Name] = m.ID
			if plan.IsStray(m.Name) != (m.ID == 0xbcd24) {
				t.Errorf("member %s (%x): stray %v", m.Name, m.ID, plan.IsStray(m.Name))
			}
		}
		if want := map[string]uint64{"unknown-bcd24": 1, plan.StrayMemberName(0xbcd24): 0xbcd24}; !reflect.DeepEqual(got, want) {
			t.Errorf("members %v, want %v", got, want)
		}
	})

	t.Run("etcd members Steward does not know are reported, not dropped", func(t *testing.T) {
		pods, pvcs := fixture(c, names[:1], 1)
		view := etcd.ClusterView{Members: []etcd.Member{{ID: 1, Name: names[0]}, {ID: 0xbeef, PeerURLs: []string{"http://stranger:2380"}}}}
		obs := assemble(c, pods, pvcs, view, testOpts, time.Unix(1000, 0), noNames)
		found := false
		for _, m := range obs.plan.Members {
			found = found || (m.Name == plan.StrayMemberName(0xbeef) && m.InEtcd)
		}
		if !found {
			t.Errorf("stray member missing from %+v", obs.plan.Members)
		}
	})

	t.Run("two etcd members claiming one name are both observed, the Pod's own keeps it", func(t *testing.T) {
		pods, pvcs := fixture(c, names[:1], 1)
		view := etcd.ClusterView{
			Members:  []etcd.Member{{ID: 1, Name: names[0]}, {ID: 2, Name: names[0]}, {ID: 3, Name: "stranger"}, {ID: 4, Name: "stranger"}},
			Statuses: map[string]etcd.Status{"https://10.0.0.1:2379": {MemberID: 2, LeaderID: 2}},
		}
		obs := assemble(c, pods, pvcs, view, testOpts, time.Unix(1000, 0), noNames)
		want := map[string]uint64{names[0]: 2, plan.StrayMemberName(1): 1, "stranger": 3, plan.StrayMemberName(4): 4}
		got := map[string]uint64{}
		for _, m := range obs.plan.Members {
			if m.InEtcd {
				got[m.Name] = m.ID
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("members by name %v, want %v", got, want)
		}
	})

	t.Run("an answer from another member ID does not make a member healthy", func(t *testing.T) {
		pods, pvcs := fixture(c, names[:2], 2)
		view := etcd.ClusterView{
			Members: []etcd.Member{{ID: 1, Name: names[0]}, {ID: 2, Name: names[1]}},
			// db-aaaaa's Pod IP answers as member 2 (an IP reused while the cache lags).
			Statuses: map[string]etcd.Status{"https://10.0.0.1:2379": {MemberID: 2, LeaderID: 2}, "https://10.0.0.2:2379": {MemberID: 2, LeaderID: 2}},
		}
		obs := assemble(c, pods, pvcs, view, testOpts, time.Unix(1000, 0), noNames)
		for _, m := range obs.plan.Members {
			if healthy := m.Name == names[1]; m.Healthy != healthy {
				t.Errorf("%s healthy %v, want %v", m.Name, m.Healthy, healthy)
			}
		}
		if obs.nameOf[2] != names[1] {
			t.Errorf("member 2 named %q", obs.nameOf[2])
		}
	})

	t.Run("unhealthy time counts from the start remembered in status", func(t *testing.T) {
		cc := c.DeepCopy()
		start := metav1.NewTime(time.Unix(400, 0))
		cc.Status.Members = []etcdv1alpha1.MemberStatus{{Name: names[1], UnhealthySince: &start}}
		pods, pvcs := fixture(cc, names, 3)
		view := etcd.ClusterView{Statuses: map[string]etcd.Status{"https://10.0.0.1:2379": {MemberID: 1, LeaderID: 1}}}
		obs := assemble(cc, pods, pvcs, view, testOpts, time.Unix(1000, 0), noNames)
		for _, m := range obs.plan.Members {
			want := map[string]time.Duration{names[0]: 0, names[1]: 600 * time.Second, names[2]: 0}[m.Name]
			if m.UnhealthyFor != want {
				t.Errorf("%s unhealthy for %s, want %s", m.Name, m.UnhealthyFor, want)
			}
		}
		if got := obs.unhealthySince[names[2]]; !got.Equal(time.Unix(1000, 0)) {
			t.Errorf("newly unhealthy member remembered since %s, want now", got)
		}
	})

	t.Run("a member whose etcd started again gets the whole grace from that start", func(t *testing.T) {
		cc := c.DeepCopy()
		start := metav1.NewTime(time.Unix(400, 0))
		cc.Status.Members = []etcdv1alpha1.MemberStatus{{Name: names[1], UnhealthySince: &start}, {Name: names[2], UnhealthySince: &start}}
		pods, pvcs := fixture(cc, names, 3)
		// names[1]: its node came back, etcd runs again since 990 and has not answered yet. names[2]: crash-looping,
		// waiting to restart after a run that began at 990: the clock from 400 applies.
		pods[1].Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.EtcdContainer,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Unix(990, 0))}}}}
		pods[2].Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.EtcdContainer,
			State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{StartedAt: metav1.NewTime(time.Unix(990, 0))}}}}
		view := etcd.ClusterView{Statuses: map[string]etcd.Status{"https://10.0.0.1:2379": {MemberID: 1, LeaderID: 1}}}
		obs := assemble(cc, pods, pvcs, view, testOpts, time.Unix(1000, 0), noNames)
		for _, m := range obs.plan.Members {
			want := map[string]time.Duration{names[0]: 0, names[1]: 10 * time.Second, names[2]: 600 * time.Second}[m.Name]
			if m.UnhealthyFor != want {
				t.Errorf("%s unhealthy for %s, want %s", m.Name, m.UnhealthyFor, want)
			}
		}
		if got := obs.unhealthySince[names[1]]; !got.Equal(start.Time) {
			t.Errorf("restarted member remembered unhealthy since %s, want the first start %s kept", got, start.Time)
		}
	})

	t.Run("a voter the scheduler cannot place is stuck while its volume does not exist yet", func(t *testing.T) {
		for _, tt := range []struct {
			name          string
			bound, joined bool
			want          string
		}{
			{"a bootstrap voter on no volume yet", false, false, corev1.PodReasonUnschedulable},
			{"its volume is bound, maybe to a node that is down", true, false, ""},
			{"a learner holds no vote and is replaced as before", false, true, ""},
		} {
			pods, pvcs := fixture(c, names, 3)
			pods[2].Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
				Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/4 nodes are available"}}}
			if tt.bound {
				pvcs[2].Spec.VolumeName = "pv-2"
			}
			view := etcd.ClusterView{Members: []etcd.Member{{ID: 1, Name: names[0]}, {ID: 2, Name: names[1]},
				{ID: 3, PeerURLs: []string{resources.PeerURL(c, names[2], testOpts)}, IsLearner: tt.joined}},
				Statuses: map[string]etcd.Status{"https://10.0.0.1:2379": {MemberID: 1, LeaderID: 1}}}
			obs := assemble(c, pods, pvcs, view, testOpts, time.Unix(1000, 0), noNames)
			for _, m := range obs.plan.Members {
				if m.Name == names[2] && m.PodStuck != tt.want {
					t.Errorf("%s: PodStuck %q, want %q", tt.name, m.PodStuck, tt.want)
				}
			}
		}
	})

	t.Run("a member whose kubelet came back gets the whole replaceUnhealthyAfter from then", func(t *testing.T) {
		cc := c.DeepCopy()
		start := metav1.NewTime(time.Unix(400, 0))
		cc.Status.Members = []etcdv1alpha1.MemberStatus{{Name: names[1], UnhealthySince: &start}, {Name: names[2], UnhealthySince: &start}}
		pods, pvcs := fixture(cc, names, 3)
		// names[1]: its node's kubelet returned at 990 and reported its containers gone. names[2]: its node stopped
		// answering; the node controller marked the Pod not Ready at 440, and the containers as the kubelet last
		// reported them: the clock from 400 applies.
		pods[1].Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(time.Unix(990, 0))},
			{Type: corev1.ContainersReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(time.Unix(990, 0))}}
		pods[2].Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.NewTime(time.Unix(440, 0))},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Unix(100, 0))}}
		view := etcd.ClusterView{Statuses: map[string]etcd.Status{"https://10.0.0.1:2379": {MemberID: 1, LeaderID: 1}}}
		obs := assemble(cc, pods, pvcs, view, testOpts, time.Unix(1000, 0), noNames)
		for _, m := range obs.plan.Members {
			want := map[string]time.Duration{names[0]: 0, names[1]: 10 * time.Second, names[2]: 600 * time.Second}[m.Name]
			if m.UnhealthyFor != want {
				t.Errorf("%s unhealthy for %s, want %s", m.Name, m.UnhealthyFor, want)
			}
		}
		if got := obs.unhealthySince[names[1]]; !got.Equal(start.Time) {
			t.Errorf("member remembered unhealthy since %s, want the first start %s kept", got, start.Time)
		}
	})

	t.Run("a member whose Pod was placed and has not run etcd yet gets PodStartGrace before its clock runs", func(t *testing.T) {
		cc := c.DeepCopy()
		start := metav1.NewTime(time.Unix(400, 0))
		cc.Status.Members = []etcdv1alpha1.MemberStatus{{Name: names[1], UnhealthySince: &start}, {Name: names[2], UnhealthySince: &start}}
		for _, tt := range []struct {
			name   string
			placed int64
			etcd   corev1.ContainerStatus
			want   time.Duration
		}{
			{"placed 13 s ago, mounting its volume", 987, corev1.ContainerStatus{}, 0},
			{"placed 13 s ago, its init container running", 987, corev1.ContainerStatus{Name: resources.EtcdContainer,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}, 0},
			{"placed 70 s ago, still not started: the clock runs from the grace's end", 930, corev1.ContainerStatus{}, 10 * time.Second},
			{"placed long ago: the clock from 400 applies", 100, corev1.ContainerStatus{}, 600 * time.Second},
			{"placed 13 s ago but etcd ran and crashed: no grace", 987, corev1.ContainerStatus{Name: resources.EtcdContainer, RestartCount: 1,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}, 600 * time.Second},
		} {
			pods, pvcs := fixture(cc, names, 3)
			pods[1].Status.Phase = corev1.PodPending
			pods[1].Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue,
				LastTransitionTime: metav1.NewTime(time.Unix(tt.placed, 0))}}
			pods[1].Status.ContainerStatuses = nil
			if tt.etcd.Name != "" {
				pods[1].Status.ContainerStatuses = []corev1.ContainerStatus{tt.etcd}
			}
			view := etcd.ClusterView{Statuses: map[string]etcd.Status{"https://10.0.0.1:2379": {MemberID: 1, LeaderID: 1}}}
			obs := assemble(cc, pods, pvcs, view, testOpts, time.Unix(1000, 0), noNames)
			for _, m := range obs.plan.Members {
				want := map[string]time.Duration{names[0]: 0, names[1]: tt.want, names[2]: 600 * time.Second}[m.Name]
				if m.UnhealthyFor != want {
					t.Errorf("%s: %s unhealthy for %s, want %s", tt.name, m.Name, m.UnhealthyFor, want)
				}
			}
			if got := obs.unhealthySince[names[1]]; !got.Equal(start.Time) {
				t.Errorf("%s: remembered unhealthy since %s, want the first start %s kept", tt.name, got, start.Time)
			}
		}
	})

	t.Run("a member stuck on its spec keeps no unhealthy clock, so its fix is not met by a replacement", func(t *testing.T) {
		cc := c.DeepCopy()
		start := metav1.NewTime(time.Unix(400, 0))
		cc.Status.Members = []etcdv1alpha1.MemberStatus{{Name: names[1], UnhealthySince: &start}}
		pods, pvcs := fixture(cc, names, 3)
		pods[1].Status.ContainerStatuses = []corev1.ContainerStatus{{Name: resources.EtcdContainer, Image: pods[1].Spec.Containers[0].Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}}
		view := etcd.ClusterView{Statuses: map[string]etcd.Status{"https://10.0.0.1:2379": {MemberID: 1, LeaderID: 1}}}
		obs := assemble(cc, pods, pvcs, view, testOpts, time.Unix(1000, 0), noNames)
		for _, m := range obs.plan.Members {
			if m.Name == names[1] && (m.PodStuck != "ImagePullBackOff" || m.UnhealthyFor != 0) {
				t.Errorf("stuck member: PodStuck %q, unhealthy for %s; want stuck, no clock", m.PodStuck, m.UnhealthyFor)
			}
		}
		if got, ok := obs.unhealthySince[names[1]]; ok {
			t.Errorf("stuck member remembered unhealthy since %s, want no clock in status", got)
		}
		// Unstuck (the spec was fixed): the clock starts at the first pass that sees it so, not at 400.
		pods[1].Status.ContainerStatuses[0].State.Waiting.Reason = "ContainerCreating"
		cc.Status.Members = nil
		obs = assemble(cc, pods, pvcs, view, testOpts, time.Unix(1000, 0), noNames)
		if got := obs.unhealthySince[names[1]]; !got.Equal(time.Unix(1000, 0)) {
			t.Errorf("member no longer stuck remembered since %s, want now", got)
		}
	})

	t.Run("a learner's Pod age counts from its creation, its time to catch up from its etcd container's start", func(t *testing.T) {
		pods, pvcs := fixture(c, names, 3)
		pods[2].CreationTimestamp = metav1.NewTime(time.Unix(700, 0))
		// Its etcd container started at 990 (the kubelet took its time: a Secret mount retried); another
		// container's start, and the etcd container's previous run, say nothing of it.
		pods[2].Status.ContainerStatuses = []corev1.ContainerStatus{
			{Name: "sidecar", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Unix(710, 0))}}},
			{Name: resources.EtcdContainer, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Unix(990, 0))}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{StartedAt: metav1.NewTime(time.Unix(720, 0))}}}}
		view := etcd.ClusterView{Members: []etcd.Member{{ID: 1, Name: names[0]}, {ID: 2, Name: names[1]}, {ID: 3, Name: names[2], IsLearner: true}}}
		obs := assemble(c, pods, pvcs, view, testOpts, time.Unix(1000, 0), noNames)
		for _, m := range obs.plan.Members {
			want := map[string]time.Duration{names[2]: 300 * time.Second}[m.Name]
			if m.LearnerFor != want {
				t.Errorf("%s a learner for %s, want %s", m.Name, m.LearnerFor, want)
			}
			want = map[string]time.Duration{names[2]: 10 * time.Second}[m.Name]
			if m.RunningFor != want {
				t.Errorf("%s running for %s, want %s", m.Name, m.RunningFor, want)
			}
		}
	})

	t.Run("data loss is read from the etcd container's last crash", func(t *testing.T) {
		pods, pvcs := fixture(c, names, 3)
		crashed := func(msg string) corev1.ContainerStatus {
			return corev1.ContainerStatus{Name: resources.EtcdContainer, RestartCount: 2,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 2, Message: msg}}}
		}
		pods[0].Status.ContainerStatuses = []corev1.ContainerStatus{crashed(string(plan.EncodeExitReport(plan.ExitReport{Reason: plan.ExitRaftLogLost, ExitCode: 2})))}
		// A log tail (a Pod an older Steward created), even one that says what a report says, is no evidence.
		pods[1].Status.ContainerStatuses = []corev1.ContainerStatus{crashed("panic: tocommit(611) is out of range [lastIndex(0)]. Was the raft log corrupted, truncated, or lost?")}
		sidecar := crashed(string(plan.EncodeExitReport(plan.ExitReport{Reason: plan.ExitDataDirEmptied, ExitCode: 1})))
		sidecar.Name = "sidecar"
		pods[2].Status.ContainerStatuses = []corev1.ContainerStatus{sidecar}
		obs := assemble(c, pods, pvcs, etcd.ClusterView{}, testOpts, time.Unix(1000, 0), noNames)
		for _, m := range obs.plan.Members {
			if lost := m.DataLoss != ""; lost != (m.Name == names[0]) {
				t.Errorf("%s: data loss %q", m.Name, m.DataLoss)
			}
		}
	})

	t.Run("new names exclude every name in use", func(t *testing.T) {
		pods, pvcs := fixture(c, names, 1)
		var used map[string]bool
		assemble(c, pods, pvcs, etcd.ClusterView{}, testOpts, time.Unix(1000, 0), func(u map[string]bool) []string { used = u; return nil })
		for _, n := range names {
			if !used[n] {
				t.Errorf("%s not reported as used", n)
			}
		}
	})
}

func TestClusterVersionMark(t *testing.T) {
	mark := func(v string, i int64) *etcdv1alpha1.ClusterVersionMark {
		return &etcdv1alpha1.ClusterVersionMark{Version: v, RaftIndex: i}
	}
	tests := map[string]struct {
		prev *etcdv1alpha1.ClusterVersionMark
		cv   string
		want *etcdv1alpha1.ClusterVersionMark
	}{
		"first version seen: from the start":             {nil, "3.6.0", mark("3.6.0", 0)},
		"3.5 not decided yet: nothing to remember":       {nil, "not_decided", nil},
		"3.6 placeholder first, then the real version":   {mark("3.0.0", 0), "3.6.0", mark("3.6.0", 0)},
		"a placeholder after a real version is ignored":  {mark("3.6.0", 0), "3.0.0", mark("3.6.0", 0)},
		"upgrade seen: marked at the leader's commit":    {mark("3.5.0", 0), "3.6.0", mark("3.6.0", 500)},
		"downgrade seen: nothing to wait for going back": {mark("3.6.0", 42), "3.5.0", mark("3.5.0", 0)},
		"unchanged: kept": {mark("3.6.0", 42), "3.6.0", mark("3.6.0", 42)},
		"no answer: kept": {mark("3.6.0", 42), "", mark("3.6.0", 42)},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := clusterVersionMark(tt.prev, tt.cv, 500)
			if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
				t.Fatalf("mark = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestStuckOf(t *testing.T) {
	pod := func(spec string, cs corev1.ContainerStatus) *corev1.Pod {
		cs.Name = resources.EtcdContainer
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: resources.EtcdContainer, Image: spec}}},
			Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{cs}}}
	}
	waiting := func(reason string) corev1.ContainerState {
		return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}
	}
	tests := map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"image cannot be pulled":                               {pod("bad", corev1.ContainerStatus{Image: "bad", State: waiting("ImagePullBackOff")}), "ImagePullBackOff"},
		"container cannot be created":                          {pod("x", corev1.ContainerStatus{Image: "x", State: waiting("CreateContainerConfigError")}), "CreateContainerConfigError"},
		"switched, still pulling":                              {pod("new", corev1.ContainerStatus{Image: "old", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 143}}}), "ImageNotStartedYet"},
		"running the new image":                                {pod("new", corev1.ContainerStatus{Image: "new", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}), ""},
		"running, switch not yet picked":                       {pod("new", corev1.ContainerStatus{Image: "old", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}), ""},
		"crash loop is not the spec's":                         {pod("x", corev1.ContainerStatus{Image: "x", State: waiting("CrashLoopBackOff")}), ""},
		"crashed on the new image, reported with the registry": {pod("etcd:v1", corev1.ContainerStatus{Image: "docker.io/library/etcd:v1", State: waiting("CrashLoopBackOff")}), ""},
		"never started, no status":                             {pod("x", corev1.ContainerStatus{State: waiting("ContainerCreating")}), ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := stuckOf(tt.pod); got != tt.want {
				t.Errorf("stuckOf = %q, want %q", got, tt.want)
			}
		})
	}
}
