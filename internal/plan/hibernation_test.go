package plan

import (
	"reflect"
	"strings"
	"testing"
	"time"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// TestHibernateAndResume walks a 3-member cluster through hibernation step by step, each step's Pod stopped as
// the controller would, and back: followers stop first, the leader last, one at a time; then nothing runs, and
// with hibernation off every member comes back on its volume without a member list.
func TestHibernateAndResume(t *testing.T) {
	spec := Spec{Replicas: 3, Version: "3.6.16", Hibernate: true}
	members := healthy3()
	for i := range members {
		members[i].ID, members[i].VolumeVersion, members[i].VolumeImage, members[i].VolumeHasRun = uint64(i+1), "3.6.16", "etcd:v3.6.16", true
	}
	obs := formed(members...)
	obs.LeaderID = 1 // c-a leads
	var stopped []string
	for range 3 {
		a := Next(spec, obs)
		if a.Kind != StopMember || a.Reason != etcdv1alpha1.ReasonHibernating || len(a.Members) != 1 {
			t.Fatalf("after stopping %v: got %s/%s %v (%s), want one StopMember", stopped, a.Kind, a.Reason, a.Members, a.Message)
		}
		stopped = append(stopped, a.Members[0])
		// The Pod is deleting first: the next member waits for it.
		obs.Members = with(obs.Members, a.Members[0], func(m *Member) { m.PodDeleting = true })
		if w := Next(spec, obs); w.Kind != Wait || w.Reason != etcdv1alpha1.ReasonHibernating {
			t.Fatalf("while %s stops: got %s/%s, want a Wait", a.Members[0], w.Kind, w.Reason)
		}
		obs.Members = with(obs.Members, a.Members[0], func(m *Member) { *m = podGone(*m) })
	}
	if want := []string{"c-b", "c-c", "c-a"}; !reflect.DeepEqual(stopped, want) {
		t.Errorf("stop order = %v, want %v (followers by name, the leader last)", stopped, want)
	}
	// Nothing runs and etcd answers nothing: hibernated, and it stays so.
	obs = noList(obs.Members...)
	a := Next(spec, obs)
	if a.Kind != Wait || a.Reason != etcdv1alpha1.ReasonHibernated || !strings.Contains(a.Message, "c-a, c-b, c-c") {
		t.Fatalf("hibernated: got %s/%s (%s)", a.Kind, a.Reason, a.Message)
	}
	// Resume: the members come back together, each on its volume as it records.
	spec.Hibernate = false
	a = Next(spec, obs)
	if a.Kind != RecreateMemberPods || !reflect.DeepEqual(a.Members, []string{"c-a", "c-b", "c-c"}) {
		t.Fatalf("resume: got %s %v (%s), want RecreateMemberPods of all three", a.Kind, a.Members, a.Message)
	}
	for _, p := range a.Pods {
		if !p.HasRun || p.Version != "3.6.16" {
			t.Errorf("resume: pod %+v, want HasRun (no start on an empty data dir) at its volume's version", p)
		}
	}
}

func TestHibernate(t *testing.T) {
	base := func() []Member {
		ms := healthy3()
		for i := range ms {
			ms[i].ID, ms[i].VolumeVersion = uint64(i+1), "3.6.16"
		}
		return ms
	}
	spec := Spec{Replicas: 3, Version: "3.6.16", Hibernate: true}
	blocked := Action{Kind: Wait, Reason: etcdv1alpha1.ReasonWaitingForCertificates}
	tests := map[string]struct {
		spec    Spec
		obs     Observation
		want    ActionKind
		reason  string
		members []string
		message string
	}{
		"a learner stops before the voters": {
			spec: spec, obs: formed(append(base(), Member{Name: "c-d", HasPod: true, HasPVC: true, InEtcd: true, IsLearner: true, ID: 9})...),
			want: StopMember, reason: etcdv1alpha1.ReasonHibernating, members: []string{"c-d"},
		},
		"without a member list, the leader is not known: by name": {
			spec: spec, obs: noList(base()...),
			want: StopMember, reason: etcdv1alpha1.ReasonHibernating, members: []string{"c-a"},
		},
		"a Pod held past its grace period by a lost node holds up no other stop": {
			spec: spec, obs: formed(with(base(), "c-b", func(m *Member) { m.PodDeleting, m.PodOverdue = true, 3*time.Minute })...),
			want: StopMember, reason: etcdv1alpha1.ReasonHibernating, members: []string{"c-c"},
		},
		"a cluster that has not formed waits for its bootstrap": {
			spec: spec, obs: func() Observation { o := formed(base()...); o.Bootstrapped = false; return o }(),
			want: Wait, reason: etcdv1alpha1.ReasonHibernating, message: "waiting for the cluster to form",
		},
		"a re-seed under way finishes first": {
			spec: spec, obs: func() Observation { o := formed(base()...); o.Restore = &Restore{Name: "r1", Reseed: true}; return o }(),
			want: Wait, reason: etcdv1alpha1.ReasonHibernating, message: "restore r1",
		},
		"a failed re-seed holds nothing up": {
			spec: spec, obs: func() Observation {
				o := formed(base()...)
				o.Restore = &Restore{Name: "r1", Reseed: true, Failed: true}
				return o
			}(),
			want: StopMember, reason: etcdv1alpha1.ReasonHibernating, members: []string{"c-b"},
		},
		"paused wins: nothing changes": {
			spec: Spec{Replicas: 3, Version: "3.6.16", Hibernate: true, Paused: true}, obs: formed(base()...),
			want: Wait, reason: etcdv1alpha1.ReasonPaused,
		},
		"a TLS step waiting for certificates does not hold up stopping": {
			spec: spec, obs: func() Observation { o := formed(base()...); o.TLSBlocked = &blocked; return o }(),
			want: StopMember, reason: etcdv1alpha1.ReasonHibernating, members: []string{"c-b"},
		},
		"spec changes made while hibernated are listed, to apply after resuming": {
			spec: Spec{Replicas: 5, Version: "3.6.17", Hibernate: true},
			obs: noList(func() []Member {
				ms := base()
				for i := range ms {
					ms[i] = podGone(ms[i])
				}
				return ms
			}()...),
			want: Wait, reason: etcdv1alpha1.ReasonHibernated, message: "applied after resuming: replicas 3 -> 5, version 3.6.16 -> 3.6.17",
		},
		"volumes of removed members are not counted as kept": {
			spec: spec,
			obs: noList(func() []Member {
				ms := base()
				for i := range ms {
					ms[i] = podGone(ms[i])
				}
				ms[2].Removed = true
				return ms
			}()...),
			want: Wait, reason: etcdv1alpha1.ReasonHibernated, message: "the volumes of 2 members are kept (c-a, c-b)",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			a := Next(tt.spec, tt.obs)
			if a.Kind != tt.want || a.Reason != tt.reason {
				t.Fatalf("got %s/%s (%s), want %s/%s", a.Kind, a.Reason, a.Message, tt.want, tt.reason)
			}
			if tt.members != nil && !reflect.DeepEqual(a.Members, tt.members) {
				t.Errorf("members = %v, want %v", a.Members, tt.members)
			}
			if !strings.Contains(a.Message, tt.message) {
				t.Errorf("message %q does not say %q", a.Message, tt.message)
			}
		})
	}
}
