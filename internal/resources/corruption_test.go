package resources

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// TestCorruptionCheckFlags: each release gets the names it knows, and only those: etcd refuses a flag it does
// not know (3.7 the --experimental-* ones), and 3.6 refuses both forms together.
func TestCorruptionCheckFlags(t *testing.T) {
	checksOff := func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Maintenance = &etcdv1alpha1.Maintenance{CorruptionCheck: &etcdv1alpha1.CorruptionCheck{EtcdChecks: ptr.To(false)}}
	}
	tests := map[string]struct {
		cluster *etcdv1alpha1.EtcdCluster
		version string
		want    []string
	}{
		"3.5 before the compaction hash check": {testCluster(), "3.5.4", []string{"--experimental-initial-corrupt-check=true"}},
		"3.5 with it": {testCluster(), "3.5.35",
			[]string{"--experimental-initial-corrupt-check=true", "--experimental-compact-hash-check-enabled=true"}},
		"3.6: feature gates only":             {testCluster(), "3.6.16", []string{"--feature-gates=InitialCorruptCheck=true,CompactHashCheck=true"}},
		"3.7: feature gates only":             {testCluster(), "3.7.3", []string{"--feature-gates=InitialCorruptCheck=true,CompactHashCheck=true"}},
		"turned off":                          {testCluster(checksOff), "3.6.16", nil},
		"ephemeral members start empty: none": {testCluster(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Ephemeral = true }), "3.6.16", nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := boot
			m.Version = tc.version
			var got []string
			for _, a := range etcdArgs(tc.cluster, m, opts) {
				if isCorruptionCheckArg(a) || strings.Contains(a, "corrupt") {
					got = append(got, a)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRollNeedsNewPod(t *testing.T) {
	podAt := func(c *etcdv1alpha1.EtcdCluster, version string) *corev1.Pod {
		m := boot
		m.Version = version
		return MemberPod(c, m, opts)
	}
	on := testCluster()
	off := testCluster(func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.Maintenance = &etcdv1alpha1.Maintenance{CorruptionCheck: &etcdv1alpha1.CorruptionCheck{EtcdChecks: ptr.To(false)}}
	})
	ephemeral := testCluster(func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Ephemeral = true })
	rolledTo := func(pod *corev1.Pod, images ...string) *corev1.Pod {
		for _, image := range images {
			pod.Annotations[AnnotationRolledTo] = RolledTo(pod, image)
		}
		return pod
	}
	if env := etcdEnv(podAt(off, "3.6.16")); len(env) != 1 || env[0].Name != "ETCD_PEER_SKIP_CLIENT_SAN_VERIFICATION" {
		t.Fatalf("the cases on the peer SAN variable need a TLS member Pod; its etcd environment is %v", env)
	}
	tests := map[string]struct {
		cluster *etcdv1alpha1.EtcdCluster
		pod     *corev1.Pod
		to      string
		want    bool
	}{
		"3.6 to 3.7: the same flags, a new image will do": {on, podAt(on, "3.6.16"), "3.7.3", false},
		"3.6.15 to 3.6.16": {on, podAt(on, "3.6.15"), "3.6.16", false},
		"3.5 to 3.6: 3.6 knows 3.5's flags and variable, a new image will do":                {on, podAt(on, "3.5.35"), "3.6.16", false},
		"back to 3.5 from a Pod started on 3.5 and rolled in place to 3.6":                   {on, podAt(on, "3.5.35"), "3.5.35", false},
		"3.6 to 3.5 (downgrade) of a Pod started on 3.6: 3.5 knows no feature gates":         {on, podAt(on, "3.6.16"), "3.5.35", true},
		"a Pod started on 3.5, rolled in place to 3.6, to 3.7: 3.7 refuses --experimental-*": {on, podAt(on, "3.5.35"), "3.7.3", true},
		"3.5.4 to 3.6: the compaction hash check is to be turned on, a new Pod":              {on, podAt(on, "3.5.4"), "3.6.16", true},
		"3.5.35 to 3.5.4, which has no compaction hash check flag":                           {on, podAt(on, "3.5.35"), "3.5.4", true},
		"a Pod started with the checks, now turned off":                                      {off, podAt(on, "3.6.15"), "3.6.16", true},
		"a Pod started on 3.5 with the checks, to 3.6 with them off":                         {off, podAt(on, "3.5.35"), "3.6.16", true},
		"a Pod from before the checks, now on":                                               {on, podAt(off, "3.6.15"), "3.6.16", true},
		"off and off, 3.5 to 3.6: 3.6 knows the experimental variable":                       {off, podAt(off, "3.5.35"), "3.6.16", false},
		"off and off, 3.6 to 3.5: 3.5 does not know the variable's new name":                 {off, podAt(off, "3.6.16"), "3.5.35", true},
		"off and off, a Pod started on 3.5 to 3.7: 3.7 does not know the experimental name":  {off, podAt(off, "3.5.35"), "3.7.3", true},
		"a release Steward cannot read":                                                      {on, podAt(on, "3.6.16"), "3.6.x", true},
		"3.6 to 3.7 again, after an in-place switch away from it: the kubelet's back-off":    {on, rolledTo(podAt(on, "3.6.16"), "etcd:v3.7.3"), "3.7.3", true},
		"3.6 to 3.7, the Pod switched in place to another image before":                      {on, rolledTo(podAt(on, "3.6.16"), "etcd:v3.6.15"), "3.7.3", false},
		"ephemeral, back to an image it ran: in place all the same":                          {ephemeral, rolledTo(podAt(ephemeral, "3.6.16"), "etcd:v3.7.3"), "3.7.3", false},
		"ephemeral: never, a new Pod would be an empty member":                               {ephemeral, podAt(ephemeral, "3.5.35"), "3.6.16", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := RollNeedsNewPod(tc.cluster, tc.pod, tc.to, "etcd:v"+tc.to); (got != "") != tc.want {
				t.Errorf("got %q, want a reason: %v", got, tc.want)
			}
		})
	}
}

func TestPodQuota(t *testing.T) {
	c := testCluster()
	if got, want := PodQuota(MemberPod(c, boot, opts)), QuotaBackendBytes(c); got != want || got == 0 {
		t.Errorf("PodQuota of a member Pod %d, want %d", got, want)
	}
	for _, tc := range []struct {
		arg  string
		want int64
	}{{"--quota-backend-bytes=abc", 0}, {"--quota-backend-bytes=-5", 0}, {"--snapshot-count=5", 0}, {"--quota-backend-bytes=42", 42}} {
		pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: EtcdContainer, Command: []string{"etcd", tc.arg}}}}}
		if got := PodQuota(pod); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.arg, got, tc.want)
		}
	}
}

func TestChecksTurnedOn(t *testing.T) {
	for _, tc := range []struct {
		flags []string
		want  []string
	}{
		{nil, nil},
		{[]string{"--experimental-initial-corrupt-check=true", "--experimental-compact-hash-check-enabled=true"}, []string{"CompactHashCheck", "InitialCorruptCheck"}},
		{[]string{"--feature-gates=InitialCorruptCheck=true,CompactHashCheck=true"}, []string{"CompactHashCheck", "InitialCorruptCheck"}},
		{[]string{"--feature-gates=CompactHashCheck=true, InitialCorruptCheck=false"}, []string{"CompactHashCheck"}},
		{[]string{"--experimental-initial-corrupt-check=false"}, nil},
		{[]string{"--experimental-initial-corrupt-check"}, []string{"InitialCorruptCheck"}},
	} {
		if got := checksTurnedOn(tc.flags); !slices.Equal(got, tc.want) {
			t.Errorf("checksTurnedOn(%q) = %q, want %q", tc.flags, got, tc.want)
		}
	}
}

func TestRolledTo(t *testing.T) {
	pod := &corev1.Pod{}
	pod.Annotations = map[string]string{}
	for _, image := range []string{"etcd:v3.6.16", "etcd:v3.7.3", "etcd:v3.6.16"} {
		pod.Annotations[AnnotationRolledTo] = RolledTo(pod, image)
	}
	if got, want := pod.Annotations[AnnotationRolledTo], "etcd:v3.6.16,etcd:v3.7.3"; got != want {
		t.Errorf("rolled to %q, want %q", got, want)
	}
}
