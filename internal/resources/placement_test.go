package resources

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

func TestMemberPlacement(t *testing.T) {
	userSpread := []corev1.TopologySpreadConstraint{{MaxSkew: 2, TopologyKey: "rack", WhenUnsatisfiable: corev1.ScheduleAnyway}}
	nodeAffinity := &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
		NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "role", Operator: corev1.NodeSelectorOpIn, Values: []string{"etcd"}}}}}}}}
	antiAffinity := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
		TopologyKey: TopologyKeyHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelCluster: "db"}}}}}}
	tests := map[string]struct {
		pod         etcdv1alpha1.PodTemplate
		wantDefault bool
		wantSpread  []corev1.TopologySpreadConstraint
	}{
		"nothing set: the default spread":                    {wantDefault: true},
		"a node selector narrows the nodes, spread stays":    {pod: etcdv1alpha1.PodTemplate{NodeSelector: map[string]string{"role": "etcd"}}, wantDefault: true},
		"a node affinity narrows the nodes, spread stays":    {pod: etcdv1alpha1.PodTemplate{Affinity: nodeAffinity}, wantDefault: true},
		"tolerations leave the spread":                       {pod: etcdv1alpha1.PodTemplate{Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}}, wantDefault: true},
		"the user's spread replaces the default":             {pod: etcdv1alpha1.PodTemplate{TopologySpreadConstraints: userSpread}, wantSpread: userSpread},
		"a pod anti-affinity replaces the default":           {pod: etcdv1alpha1.PodTemplate{Affinity: antiAffinity}},
		"spread and anti-affinity together: the user's only": {pod: etcdv1alpha1.PodTemplate{Affinity: antiAffinity, TopologySpreadConstraints: userSpread}, wantSpread: userSpread},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := testCluster(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Pod = tt.pod })
			p := MemberPod(c, boot, opts)
			if !reflect.DeepEqual(p.Spec.Affinity, tt.pod.Affinity) || !reflect.DeepEqual(p.Spec.NodeSelector, tt.pod.NodeSelector) ||
				!reflect.DeepEqual(p.Spec.Tolerations, tt.pod.Tolerations) {
				t.Errorf("the spec's affinity, node selector and tolerations are not the Pod's: %+v", p.Spec)
			}
			got := p.Spec.TopologySpreadConstraints
			if !tt.wantDefault {
				if !reflect.DeepEqual(got, tt.wantSpread) {
					t.Fatalf("spread %+v, want the user's %+v", got, tt.wantSpread)
				}
				return
			}
			if len(got) != 2 {
				t.Fatalf("default spread has %d constraints, want 2: %+v", len(got), got)
			}
			byKey := map[string]corev1.TopologySpreadConstraint{}
			for _, s := range got {
				byKey[s.TopologyKey] = s
				if s.MaxSkew != 1 || s.NodeTaintsPolicy == nil || *s.NodeTaintsPolicy != corev1.NodeInclusionPolicyHonor ||
					s.NodeAffinityPolicy == nil || *s.NodeAffinityPolicy != corev1.NodeInclusionPolicyHonor {
					t.Errorf("%s: want skew 1 over the nodes the Pod may use (taints and affinity honoured): %+v", s.TopologyKey, s)
				}
				if s.LabelSelector == nil || !reflect.DeepEqual(s.LabelSelector.MatchLabels, map[string]string{LabelCluster: "db"}) {
					t.Errorf("%s: selector %v does not count this cluster's members alone", s.TopologyKey, s.LabelSelector)
				}
				// The selector must match the Pod it is set on, or the Pod counts for nothing.
				for k, v := range s.LabelSelector.MatchLabels {
					if p.Labels[k] != v {
						t.Errorf("%s: selector %s=%s does not match the member's own labels %v", s.TopologyKey, k, v, p.Labels)
					}
				}
			}
			if byKey[TopologyKeyHostname].WhenUnsatisfiable != corev1.DoNotSchedule {
				t.Errorf("across nodes: %s, want required (DoNotSchedule)", byKey[TopologyKeyHostname].WhenUnsatisfiable)
			}
			if byKey[TopologyKeyZone].WhenUnsatisfiable != corev1.ScheduleAnyway {
				t.Errorf("across zones: %s, want preferred (ScheduleAnyway): a node without a zone label must not be refused",
					byKey[TopologyKeyZone].WhenUnsatisfiable)
			}
		})
	}
}

func TestMemberResources(t *testing.T) {
	q := resource.MustParse
	list := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = q(kv[i+1])
		}
		return l
	}
	custom := corev1.ResourceRequirements{Requests: list("cpu", "2", "memory", "8Gi")}
	limitsOnly := corev1.ResourceRequirements{Limits: list("memory", "4Gi")}
	tests := map[string]struct {
		mutate func(*etcdv1alpha1.EtcdCluster)
		want   corev1.ResourceRequirements
	}{
		// Storage 2Gi: a quota of 800Mi, all of which a member may hold as raft log (3.6's 10000 + 5000 entries
		// of up to 1.5Mi), at 2.5 times its size, and 128Mi.
		"none set: CPU's default, memory from the quota": {want: corev1.ResourceRequirements{Requests: list("cpu", "50m", "memory", "2128Mi")}},
		"the user's memory request":                      {mutate: func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Resources = custom }, want: custom},
		"a memory limit only is the user's choice too":   {mutate: func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Resources = limitsOnly }, want: limitsOnly},
		"CPU only: memory from the quota": {mutate: func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Resources = corev1.ResourceRequirements{Requests: list("cpu", "1"), Limits: list("cpu", "2")}
		}, want: corev1.ResourceRequirements{Requests: list("cpu", "1", "memory", "2128Mi"), Limits: list("cpu", "2")}},
		"small values lower it": {mutate: func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.MaxRequestBytes = ptr.To(q("16Ki")) },
			want: corev1.ResourceRequirements{Requests: list("cpu", "50m", "memory", "714Mi")}},
		"never below the floor": {mutate: func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Etcd.SnapshotCount, c.Spec.Etcd.MaxRequestBytes = ptr.To[int64](100), ptr.To(q("4Ki"))
		}, want: corev1.ResourceRequirements{Requests: list("cpu", "50m", "memory", "256Mi")}},
		"a raised quota counts": {mutate: func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Maintenance = &etcdv1alpha1.Maintenance{RecoverFromNoSpace: &etcdv1alpha1.NoSpaceRecovery{MaxQuotaBackendBytes: ptr.To(q("1Gi"))}}
			c.Status.RaisedQuotaBackendBytes = 1 << 30
		}, want: corev1.ResourceRequirements{Requests: list("cpu", "50m", "memory", "2688Mi")}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			c := testCluster()
			if tt.mutate != nil {
				tt.mutate(c)
			}
			got := MemberPod(c, boot, opts).Spec.Containers[0].Resources
			if !equality.Semantic.DeepEqual(got, tt.want) {
				t.Fatalf("resources %+v, want %+v", got, tt.want)
			}
		})
	}
	// The spec and the default are copied: a Pod's requests changed in place must not change the next Pod's.
	for _, c := range []*etcdv1alpha1.EtcdCluster{testCluster(), testCluster(func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Resources = corev1.ResourceRequirements{Requests: list("cpu", "50m")}
	})} {
		p := MemberPod(c, boot, opts)
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = q("9")
		if got := MemberPod(c, boot, opts).Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.String() != "50m" {
			t.Fatalf("CPU request became %s", got.String())
		}
	}
}

// TestMemberProbes: readiness is probed every second, since every member step waits on it, and each probe's
// window (period x failures) is what it was at a 2 s period: 6 s before a member is taken out of the client
// Service, 30 s of a wedged process before a restart, 5 minutes to start. With an agent of this release as etcd's
// entrypoint, the probes ask it and it keeps the 5 minutes to start (StartGrace, a flag of run-etcd): no startup
// probe, whose next tick delayed Ready. Without one, a startup probe does that. A member killed by its liveness
// probe gets LivenessKillGrace, not the Pod's 30 s.
func TestMemberProbes(t *testing.T) {
	withAgent := opts
	withAgent.AgentImage, withAgent.AgentCurrent = "steward.local/steward:dev", true
	olderAgent := withAgent
	olderAgent.AgentCurrent = false
	type want struct {
		path           string
		port           int
		period, window int32
	}
	for _, o := range []struct {
		name                         string
		options                      Options
		startup, readiness, liveness *want
	}{
		{"agent of this release", withAgent, nil, &want{"/readyz", ProbePort, 1, 6}, &want{"/livez", ProbePort, 2, 30}},
		{"older agent", olderAgent, &want{"/livez", MetricsPort, 1, 300}, &want{"/readyz", MetricsPort, 1, 6}, &want{"/livez", MetricsPort, 2, 30}},
		{"no agent", opts, &want{"/livez", MetricsPort, 1, 300}, &want{"/readyz", MetricsPort, 1, 6}, &want{"/livez", MetricsPort, 2, 30}},
	} {
		c := MemberPod(testCluster(), boot, o.options).Spec.Containers[0]
		for _, tc := range []struct {
			name  string
			probe *corev1.Probe
			want  *want
		}{
			{"startup", c.StartupProbe, o.startup},
			{"readiness", c.ReadinessProbe, o.readiness},
			{"liveness", c.LivenessProbe, o.liveness},
		} {
			p, w := tc.probe, tc.want
			if w == nil {
				if p != nil {
					t.Errorf("%s: %s probe %+v, want none", o.name, tc.name, p)
				}
				continue
			}
			if p == nil || p.HTTPGet == nil {
				t.Fatalf("%s: %s probe %+v, want an HTTP GET", o.name, tc.name, p)
			}
			if p.HTTPGet.Path != w.path || p.HTTPGet.Port.IntValue() != w.port {
				t.Errorf("%s: %s probe GET %s on %s, want %s on %d", o.name, tc.name, p.HTTPGet.Path, p.HTTPGet.Port.String(), w.path, w.port)
			}
			if p.PeriodSeconds != w.period || p.PeriodSeconds*p.FailureThreshold != w.window {
				t.Errorf("%s: %s probe every %ds, window %ds, want every %ds, window %ds", o.name, tc.name, p.PeriodSeconds, p.PeriodSeconds*p.FailureThreshold, w.period, w.window)
			}
			// Only a liveness kill shortens the grace: the others restart nothing.
			wantGrace := tc.name == "liveness"
			if got := p.TerminationGracePeriodSeconds; (got != nil) != wantGrace || wantGrace && *got != LivenessKillGrace {
				t.Errorf("%s: %s probe's termination grace %v, want %v", o.name, tc.name, got, wantGrace)
			}
		}
		guarded := slices.Contains(c.Command, "run-etcd")
		listens := slices.Contains(c.Command, fmt.Sprintf("--probe-listen=0.0.0.0:%d", ProbePort)) &&
			slices.Contains(c.Command, "--probe-start-grace=5m0s")
		if guarded != (o.startup == nil) || listens != guarded {
			t.Errorf("%s: command %v: run-etcd %v, answering probes %v", o.name, c.Command, guarded, listens)
		}
	}
}
