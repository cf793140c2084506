package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
)

var now = time.Date(2026, 11, 23, 22, 0, 0, 0, time.UTC)

func at(d time.Duration) *metav1.Time { t := metav1.NewTime(now.Add(d)); return &t }

func pod(cluster, member string, mutate ...func(*corev1.Pod)) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: member, Namespace: "ns",
			Labels: map[string]string{resources.LabelCluster: cluster, resources.LabelMember: member}},
		Spec: corev1.PodSpec{NodeName: "node-1"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	for _, m := range mutate {
		m(&p)
	}
	return p
}

func cluster() *etcdv1alpha1.EtcdCluster {
	return &etcdv1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "ns", Generation: 4},
		Spec:       etcdv1alpha1.EtcdClusterSpec{Replicas: 3, Version: "3.6.16"},
		Status: etcdv1alpha1.EtcdClusterStatus{
			ObservedGeneration: 4, ReadyReplicas: 2, CurrentVersion: "3.6.16", ClusterVersion: "3.6.0",
			Leader: "db-aaaaa", ClusterID: "cdf818194e3a8c32", ClientEndpoint: "https://db.ns.svc.cluster.local:2379",
			Members: []etcdv1alpha1.MemberStatus{
				{Name: "db-ccccc", ID: "fd422379fda50e48", Role: etcdv1alpha1.RoleFollower, Version: "3.6.16", Healthy: false,
					DBSizeBytes: 20480, UnhealthySince: at(-3 * time.Minute)},
				{Name: "db-aaaaa", ID: "8e9e05c52164694d", Role: etcdv1alpha1.RoleLeader, Version: "3.6.16", Healthy: true, DBSizeBytes: 2 << 20, DBSizeInUseBytes: 1 << 20},
				{Name: "db-bbbbb", ID: "91bc3c398fb3c146", Role: etcdv1alpha1.RoleFollower, Version: "3.6.16", Healthy: true, DBSizeBytes: 2 << 20},
			},
			Alarms: []etcdv1alpha1.MemberAlarm{{Member: "db-aaaaa", MemberID: "8e9e05c52164694d", Alarm: "NOSPACE"}},
			TLS: &etcdv1alpha1.TLSStatus{CASecret: "db-ca", ClientSecret: "db-client", CANotAfter: at(3650 * 24 * time.Hour),
				NotAfter: at(89 * 24 * time.Hour)},
			LastBackup: &etcdv1alpha1.BackupRef{Name: "db-20261123t210000z", Time: at(-time.Hour)},
			Conditions: []metav1.Condition{
				{Type: etcdv1alpha1.ConditionDegraded, Status: metav1.ConditionTrue, Reason: "MembersUnhealthy", Message: "db-ccccc\nis unhealthy", LastTransitionTime: *at(-3 * time.Minute)},
				{Type: etcdv1alpha1.ConditionAvailable, Status: metav1.ConditionTrue, Reason: "QuorumAvailable", LastTransitionTime: *at(-48 * time.Hour)},
				{Type: etcdv1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "ReplacingMember", Message: "replacing db-ccccc", LastTransitionTime: *at(-90 * time.Second)},
			},
		},
	}
}

func TestNewStatus(t *testing.T) {
	terminating := func(p *corev1.Pod) { p.DeletionTimestamp = at(-time.Second) }
	crashing := func(p *corev1.Pod) {
		p.Status.Conditions = nil
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}
	}
	pending := func(p *corev1.Pod) { p.Status = corev1.PodStatus{}; p.Spec.NodeName = "" }
	otherNS := func(p *corev1.Pod) { p.Namespace = "elsewhere" }
	tests := map[string]struct {
		pods  []corev1.Pod
		check func(t *testing.T, s Status)
	}{
		"members sorted, with their Pods and nodes": {
			pods: []corev1.Pod{pod("db", "db-aaaaa"), pod("db", "db-bbbbb"), pod("db", "db-ccccc", crashing)},
			check: func(t *testing.T, s Status) {
				want := []Member{
					{Name: "db-aaaaa", ID: "8e9e05c52164694d", Role: "Leader", Version: "3.6.16", Healthy: true, DBSizeBytes: 2 << 20, DBSizeInUseBytes: 1 << 20, Pod: "Ready", Node: "node-1", InStatus: true},
					{Name: "db-bbbbb", ID: "91bc3c398fb3c146", Role: "Follower", Version: "3.6.16", Healthy: true, DBSizeBytes: 2 << 20, Pod: "Ready", Node: "node-1", InStatus: true},
					{Name: "db-ccccc", ID: "fd422379fda50e48", Role: "Follower", Version: "3.6.16", DBSizeBytes: 20480, Pod: "CrashLoopBackOff", Node: "node-1", UnhealthySince: at(-3 * time.Minute), InStatus: true},
				}
				if len(s.Members) != len(want) {
					t.Fatalf("members %+v", s.Members)
				}
				for i := range want {
					if got := s.Members[i]; got.Name != want[i].Name || got.ID != want[i].ID || got.Role != want[i].Role || got.Pod != want[i].Pod ||
						got.Node != want[i].Node || got.Healthy != want[i].Healthy || got.DBSizeBytes != want[i].DBSizeBytes || got.DBSizeInUseBytes != want[i].DBSizeInUseBytes || got.InStatus != want[i].InStatus {
						t.Errorf("member %d = %+v, want %+v", i, got, want[i])
					}
				}
			},
		},
		"a member without Pod, a joining Pod, Pods of other clusters and namespaces ignored": {
			pods: []corev1.Pod{pod("db", "db-aaaaa", terminating), pod("db", "db-ddddd", pending), pod("other", "other-x"), pod("db", "db-bbbbb", otherNS)},
			check: func(t *testing.T, s Status) {
				got := map[string]string{}
				for _, m := range s.Members {
					got[m.Name] = m.Pod
				}
				want := map[string]string{"db-aaaaa": "Terminating", "db-bbbbb": "Missing", "db-ccccc": "Missing", "db-ddddd": "Pending"}
				if len(got) != len(want) {
					t.Fatalf("pods %v, want %v", got, want)
				}
				for k, v := range want {
					if got[k] != v {
						t.Errorf("%s: Pod %q, want %q", k, got[k], v)
					}
				}
				if s.Members[3].InStatus || s.Members[3].Name != "db-ddddd" {
					t.Errorf("the joining Pod should be listed last and not as a member Steward reported: %+v", s.Members[3])
				}
			},
		},
		"conditions in documented order, step from Progressing": {
			check: func(t *testing.T, s Status) {
				var types []string
				for _, c := range s.Conditions {
					types = append(types, c.Type)
				}
				if strings.Join(types, ",") != "Available,Progressing,Degraded" {
					t.Errorf("conditions order %v", types)
				}
				if s.Step == nil || s.Step.Reason != "ReplacingMember" || s.Step.Message != "replacing db-ccccc" {
					t.Errorf("step %+v", s.Step)
				}
				if s.TLS.Provider != "Steward" || s.TLS.ClientSecret != "db-client" || s.LastBackup.Name != "db-20261123t210000z" {
					t.Errorf("tls %+v last backup %+v", s.TLS, s.LastBackup)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) { tc.check(t, NewStatus(cluster(), tc.pods)) })
	}
}

func TestNewStatusNoStepWhenNotProgressing(t *testing.T) {
	c := cluster()
	c.Status.Conditions[2].Status = metav1.ConditionFalse
	if s := NewStatus(c, nil); s.Step != nil {
		t.Errorf("step %+v while Progressing is False", s.Step)
	}
	empty := &etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "ns"},
		Spec: etcdv1alpha1.EtcdClusterSpec{Version: "3.6.16", TLS: &etcdv1alpha1.TLSSpec{Provider: "None"}}}
	s := NewStatus(empty, nil)
	if s.Members == nil || s.Conditions == nil {
		t.Error("empty lists must encode as [] in JSON, not null")
	}
	var b bytes.Buffer
	if err := WriteStatus(&b, s, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"No members yet.", "Certificates:    none (plaintext", "Last backup:     none", "Conditions:      none yet", "leader none"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}
}

func TestWriteStatus(t *testing.T) {
	c := cluster()
	c.Spec.Paused = true
	c.Generation = 5
	var b bytes.Buffer
	if err := WriteStatus(&b, NewStatus(c, []corev1.Pod{pod("db", "db-aaaaa"), pod("db", "db-bbbbb")}), now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"Cluster:         ns/db (paused: Steward changes nothing)",
		"Version:         3.6.16, cluster version 3.6.0",
		"Members:         3 desired, 2 ready, leader db-aaaaa",
		"Spec:            generation 5, Steward has acted on 4",
		"NAME      ID                ROLE      VERSION  HEALTHY     DB SIZE  IN USE   POD      NODE",
		"db-aaaaa  8e9e05c52164694d  Leader    3.6.16   true        2.0 MiB  1.0 MiB  Ready    node-1",
		"db-ccccc  fd422379fda50e48  Follower  3.6.16   false (3m)  20 KiB   -        Missing  -",
		"Alarms:          NOSPACE on db-aaaaa",
		"  CA           db-ca         2036-11-20T22:00:00Z (in 10y)",
		"  client       db-client     2027-02-20T22:00:00Z (in 89d)",
		"Last backup:     db-20261123t210000z, 2026-11-23T21:00:00Z (60m ago)",
		"Degraded     True    MembersUnhealthy  3m     db-ccccc is unhealthy",
		"Step in progress: ReplacingMember for 90s: replacing db-ccccc",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestSince(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-30 * time.Second:             "30s ago",
		-150 * time.Minute:            "150m ago",
		-72 * time.Hour:               "3d ago",
		89 * 24 * time.Hour:           "in 89d",
		-(24*time.Hour + 3*time.Hour): "27h ago",
	} {
		if got := Since(now, now.Add(d)); got != want {
			t.Errorf("Since(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestServerName(t *testing.T) {
	c := cluster()
	if got := ServerName(c); got != "db.ns.svc.cluster.local" {
		t.Errorf("ServerName = %q", got)
	}
	c.Status.ClientEndpoint = ""
	if got := ServerName(c); got != "db.ns.svc" {
		t.Errorf("ServerName without endpoint = %q", got)
	}
}

func cond(typ string, status metav1.ConditionStatus, reason, msg string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
}

func TestProgress(t *testing.T) {
	steps := []struct {
		conds []metav1.Condition
		want  []string
	}{
		{nil, []string{"phase Pending"}},
		{nil, nil},
		{[]metav1.Condition{cond("Complete", "False", "Running", "backup Job db-x-backup is running"), cond("Failed", "False", "Running", "")},
			[]string{"phase Running", "Complete=False (Running): backup Job db-x-backup is running", "Failed=False (Running)"}},
		{[]metav1.Condition{cond("Complete", "False", "Running", "backup Job db-x-backup is running"), cond("Failed", "False", "Running", "")}, nil},
		{[]metav1.Condition{cond("Complete", "False", "Running", "streaming from db-aaaaa"), cond("Failed", "False", "Running", "")},
			[]string{"Complete=False (Running): streaming from db-aaaaa"}},
		{[]metav1.Condition{cond("Complete", "True", "Succeeded", "stored"), cond("Failed", "False", "Succeeded", "")},
			[]string{"phase Complete", "Complete=True (Succeeded): stored", "Failed=False (Succeeded)"}},
	}
	var p Progress
	for i, s := range steps {
		got := p.Observe(s.conds)
		if strings.Join(got, "|") != strings.Join(s.want, "|") {
			t.Errorf("step %d: %q, want %q", i, got, s.want)
		}
	}
}

func TestPhaseAndFailure(t *testing.T) {
	tests := map[string]struct {
		conds       []metav1.Condition
		phase, fail string
	}{
		"nothing yet":    {nil, "Pending", ""},
		"verifying":      {[]metav1.Condition{cond("Verified", "False", "Verifying", ""), cond("Complete", "False", "Verifying", "")}, "Verifying", ""},
		"confirmation":   {[]metav1.Condition{cond("Complete", "False", "ConfirmationRequired", "set spec.confirm")}, "ConfirmationRequired", ""},
		"complete":       {[]metav1.Condition{cond("Complete", "True", "Succeeded", "")}, "Complete", ""},
		"failed":         {[]metav1.Condition{cond("Complete", "False", "WrongCluster", ""), cond("Failed", "True", "WrongCluster", "backup of\ncluster x")}, "Failed", "WrongCluster: backup of cluster x"},
		"failed, no msg": {[]metav1.Condition{cond("Failed", "True", "JobFailed", "")}, "Failed", "JobFailed"},
	}
	for name, tc := range tests {
		if got := Phase(tc.conds); got != tc.phase {
			t.Errorf("%s: Phase = %q, want %q", name, got, tc.phase)
		}
		if got := Failure(tc.conds); got != tc.fail {
			t.Errorf("%s: Failure = %q, want %q", name, got, tc.fail)
		}
	}
}

func TestSummaries(t *testing.T) {
	b := &etcdv1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "db-1"}, Status: etcdv1alpha1.EtcdBackupStatus{
		Location: "pvc://backups/db-1.db", SizeBytes: 3 << 20, Revision: 42, EtcdVersion: "3.6.16", Member: "db-aaaaa",
		StartTime: at(-12 * time.Second), CompletionTime: at(0), SHA256: "ab12"}}
	if got, want := BackupSummary(b), "etcdbackup/db-1 complete, at pvc://backups/db-1.db, 3.0 MiB, revision 42, etcd 3.6.16, from member db-aaaaa, took 12s, sha256 ab12"; got != want {
		t.Errorf("BackupSummary = %q\nwant %q", got, want)
	}
	r := &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Name: "r"}, Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: "db", BackupName: "db-1"},
		Status: etcdv1alpha1.EtcdRestoreStatus{Mode: "Reseed", Revision: 1000000042, Members: []string{"db-x", "db-y"}, ClusterID: "abc", RetiredVolumes: []string{"db-a-data"}}}
	if got, want := RestoreSummary(r), "etcdrestore/r complete: cluster db restored from backup db-1, mode Reseed, revision 1000000042, members db-x db-y, cluster ID abc, old volumes kept: db-a-data"; got != want {
		t.Errorf("RestoreSummary = %q\nwant %q", got, want)
	}
}

func TestHibernation(t *testing.T) {
	hibernating := func(phase etcdv1alpha1.HibernationPhase) *etcdv1alpha1.HibernationStatus {
		return &etcdv1alpha1.HibernationStatus{Phase: phase, Since: *at(-2 * time.Hour), Members: []string{"db-aaaaa", "db-bbbbb", "db-ccccc"},
			DataSizeBytes: 3 << 20, Revision: 1234}
	}
	tests := map[string]struct {
		requested bool
		status    *etcdv1alpha1.HibernationStatus
		// header is the Hibernation line of WriteStatus, empty for none.
		header, progress string
	}{
		"running": {progress: "Available=True (QuorumAvailable)"},
		"asked, not begun": {requested: true,
			progress: "no phase yet: Steward has not begun to hibernate the cluster"},
		"hibernating": {requested: true, status: hibernating(etcdv1alpha1.HibernationHibernating),
			header:   "Hibernation:     Hibernating since 2026-11-23T20:00:00Z (120m ago); volumes kept: db-aaaaa db-bbbbb db-ccccc, data 3.0 MiB, revision 1234",
			progress: "phase Hibernating: replacing db-ccccc"},
		"hibernated, nothing read": {requested: true, status: &etcdv1alpha1.HibernationStatus{Phase: etcdv1alpha1.HibernationHibernated, Since: *at(-time.Minute)},
			header: "Hibernation:     Hibernated since 2026-11-23T21:59:00Z (60s ago)\n", progress: "phase Hibernated: replacing db-ccccc"},
		"resuming": {status: hibernating(etcdv1alpha1.HibernationResuming),
			header: "Hibernation:     Resuming since", progress: "phase Resuming: replacing db-ccccc"},
	}
	for name, tc := range tests {
		c := cluster()
		if tc.requested {
			c.Spec.Hibernation = &etcdv1alpha1.Hibernation{Enabled: true}
		}
		c.Status.Hibernation = tc.status
		s := NewStatus(c, nil)
		if (s.Hibernation != nil) != (tc.status != nil) {
			t.Errorf("%s: Status.Hibernation %+v", name, s.Hibernation)
		}
		var b bytes.Buffer
		if err := WriteStatus(&b, s, now); err != nil {
			t.Fatal(err)
		}
		if tc.header == "" && strings.Contains(b.String(), "Hibernation:") {
			t.Errorf("%s: a Hibernation line without status.hibernation:\n%s", name, b.String())
		}
		if !strings.Contains(b.String(), tc.header) {
			t.Errorf("%s: status lacks %q:\n%s", name, tc.header, b.String())
		}
		if got := HibernationProgress(c); got != tc.progress {
			t.Errorf("%s: HibernationProgress = %q, want %q", name, got, tc.progress)
		}
	}

	c := cluster()
	c.Status.Hibernation = hibernating(etcdv1alpha1.HibernationHibernated)
	if got, want := HibernatedSummary(c), "etcdcluster/db hibernated, volumes kept: db-aaaaa db-bbbbb db-ccccc, data 3.0 MiB, revision 1234"; got != want {
		t.Errorf("HibernatedSummary = %q\nwant %q", got, want)
	}
	c.Status.Hibernation = nil
	c.Status.Conditions[1].Message = "3 of 3\nvoting members healthy"
	if got, want := ResumedSummary(c), "etcdcluster/db resumed and Available: 3 of 3 voting members healthy"; got != want {
		t.Errorf("ResumedSummary = %q\nwant %q", got, want)
	}
}

// TestExternalAccess: the External line says how clients outside the cluster reach it, and is absent for a
// ClusterIP Service.
func TestExternalAccess(t *testing.T) {
	tests := map[string]struct {
		access *etcdv1alpha1.ExternalAccess
		want   string
	}{
		"ClusterIP": {},
		"NodePort":  {&etcdv1alpha1.ExternalAccess{Type: corev1.ServiceTypeNodePort, NodePort: 31379}, "External:        NodePort, port 31379 on every node\n"},
		"LoadBalancer waiting": {&etcdv1alpha1.ExternalAccess{Type: corev1.ServiceTypeLoadBalancer, NodePort: 31379},
			"External:        LoadBalancer, no address yet (node port 31379)\n"},
		"LoadBalancer": {&etcdv1alpha1.ExternalAccess{Type: corev1.ServiceTypeLoadBalancer, NodePort: 31379, LoadBalancer: []string{"https://192.0.2.7:2379"}},
			"External:        LoadBalancer https://192.0.2.7:2379 (node port 31379)\n"},
	}
	for name, tc := range tests {
		c := cluster()
		c.Status.ExternalAccess = tc.access
		var b bytes.Buffer
		if err := WriteStatus(&b, NewStatus(c, nil), now); err != nil {
			t.Fatal(err)
		}
		if tc.want == "" && strings.Contains(b.String(), "External:") || !strings.Contains(b.String(), tc.want) {
			t.Errorf("%s: status lacks %q:\n%s", name, tc.want, b.String())
		}
	}
}
