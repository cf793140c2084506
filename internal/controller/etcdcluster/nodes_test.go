package etcdcluster

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

func TestVolumeNodeGone(t *testing.T) {
	onHost := func(hosts ...string) *corev1.NodeSelector {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: hosts}}}}}
	}
	inZone := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}}}}}
	node := func(name, zone string, cordoned bool) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}},
			Spec: corev1.NodeSpec{Unschedulable: cordoned}}
	}
	nodes := []corev1.Node{node("n1", "z1", false), node("n2", "z1", true), node("n3", "z2", true), node("n4", "z2", true)}
	tests := map[string]struct {
		required *corev1.NodeSelector
		want     string
	}{
		"its node takes Pods":                       {onHost("n1"), ""},
		"its node is cordoned":                      {onHost("n2"), "its node n2 is cordoned"},
		"its node is gone":                          {onHost("n9"), "its node no longer exists"},
		"all its nodes cordoned":                    {onHost("n4", "n3"), "its nodes n3, n4 are cordoned"},
		"one of its nodes takes Pods":               {onHost("n2", "n1"), ""},
		"a zonal volume, a node of the zone is up":  {inZone, ""},
		"a zonal volume, every node of it cordoned": {&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"z2"}}}}}}, "its nodes n3, n4 are cordoned"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := volumeNodeGone(tt.required, nodes)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("volumeNodeGone = %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := volumeNodeGone(&corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
		{Key: "a", Operator: "Bogus"}}}}}, nodes); err == nil {
		t.Error("an invalid selector gave no error")
	}
}

func TestPlacementOf(t *testing.T) {
	type nodeOpt func(*corev1.Node)
	node := func(name, zone string, opts ...nodeOpt) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		if zone != "" {
			n.Labels["topology.kubernetes.io/zone"] = zone
		}
		for _, o := range opts {
			o(&n)
		}
		return n
	}
	cordoned := func(n *corev1.Node) { n.Spec.Unschedulable = true }
	notReady := func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionUnknown }
	noHostname := func(n *corev1.Node) { delete(n.Labels, "kubernetes.io/hostname") }
	tainted := func(key string, effect corev1.TaintEffect) nodeOpt {
		return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect}) }
	}
	labelled := func(k, v string) nodeOpt { return func(n *corev1.Node) { n.Labels[k] = v } }
	nodes := []corev1.Node{
		node("n1", "a"), node("n2", "b"), node("n3", ""), node("n4", "a", cordoned), node("n5", "b", notReady),
		node("n6", "c", noHostname), node("n7", "c", tainted("dedicated", corev1.TaintEffectNoSchedule), labelled("dedicated", "true")),
		node("n8", "c", tainted("node.kubernetes.io/unreachable", corev1.TaintEffectNoExecute)),
		node("n9", "c", tainted("soft", corev1.TaintEffectPreferNoSchedule)),
	}
	tests := map[string]struct {
		pod  etcdv1alpha1.PodTemplate
		want map[string]string
	}{
		"ready, schedulable, labelled, untainted nodes": {etcdv1alpha1.PodTemplate{}, map[string]string{"n1": "a", "n2": "b", "n3": "", "n9": "c"}},
		"a toleration lets the tainted node in": {etcdv1alpha1.PodTemplate{Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}},
			map[string]string{"n1": "a", "n2": "b", "n3": "", "n7": "c", "n9": "c"}},
		"a node selector keeps only its nodes": {etcdv1alpha1.PodTemplate{NodeSelector: map[string]string{"dedicated": "true"},
			Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}}, map[string]string{"n7": "c"}},
		"a required node affinity keeps only its nodes": {etcdv1alpha1.PodTemplate{Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "topology.kubernetes.io/zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a", "b"}}}}}}}}},
			map[string]string{"n1": "a", "n2": "b"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			cluster := &etcdv1alpha1.EtcdCluster{Spec: etcdv1alpha1.EtcdClusterSpec{Pod: tt.pod}}
			got := placementOf(cluster, nodes)
			if !reflect.DeepEqual(got.Zones, tt.want) {
				t.Errorf("placementOf = %v, want %v", got.Zones, tt.want)
			}
		})
	}
}

func TestNodeCacheTransformKeepsWhatStewardReads(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"kubernetes.io/hostname": "n1"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Images:      []corev1.ContainerImage{{Names: []string{"quay.io/coreos/etcd:v3.6.16"}, SizeBytes: 1 << 24}},
			Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("15Gi"), corev1.ResourceCPU: resource.MustParse("4")},
			NodeInfo:    corev1.NodeSystemInfo{ContainerRuntimeVersion: "containerd://2.4.2", KernelVersion: "6.1.0", OSImage: "Debian"}}}
	want := n.DeepCopy()
	want.ManagedFields = nil
	want.Status.Images = nil
	want.Status.Allocatable = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("15Gi")}
	want.Status.NodeInfo = corev1.NodeSystemInfo{ContainerRuntimeVersion: "containerd://2.4.2"}
	got, err := NodeCacheTransform(n)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NodeCacheTransform = %+v, want %+v", got, want)
	}
	if _, err := NodeCacheTransform(&corev1.Pod{}); err != nil {
		t.Errorf("a Pod: %v", err)
	}
}

func TestBackupNotMountable(t *testing.T) {
	ready := []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	node := func(name string, dedicated, cordoned bool) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
			Spec: corev1.NodeSpec{Unschedulable: cordoned}, Status: corev1.NodeStatus{Conditions: ready}}
		if dedicated {
			n.Labels["dedicated"] = "true"
			n.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		}
		return n
	}
	onNode := func(names ...string) *corev1.PersistentVolume {
		return &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-1"}, Spec: corev1.PersistentVolumeSpec{NodeAffinity: &corev1.VolumeNodeAffinity{
			Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: names}}}}}}}}
	}
	nodes := []corev1.Node{node("main", false, false), node("d1", true, false), node("d2", true, false), node("spare", false, true)}
	dedicatedOnly := etcdv1alpha1.PodTemplate{NodeSelector: map[string]string{"dedicated": "true"},
		Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "true", Effect: corev1.TaintEffectNoSchedule}}}
	tolerating := etcdv1alpha1.PodTemplate{Tolerations: dedicatedOnly.Tolerations}
	tests := map[string]struct {
		pod  etcdv1alpha1.PodTemplate
		pv   *corev1.PersistentVolume
		want string // a part of the reason; empty: readable
	}{
		"on a node the cluster uses":                      {etcdv1alpha1.PodTemplate{}, onNode("main"), ""},
		"on a tainted node the cluster tolerates":         {tolerating, onNode("d1"), ""},
		"on one of several nodes, one the cluster uses":   {dedicatedOnly, onNode("main", "d2"), ""},
		"on a node outside the cluster's node selector":   {dedicatedOnly, onNode("main"), "only node(s) main can mount"},
		"on a tainted node the cluster does not tolerate": {etcdv1alpha1.PodTemplate{}, onNode("d1"), "only node(s) d1 can mount"},
		"on a cordoned node":                              {etcdv1alpha1.PodTemplate{}, onNode("spare"), "only node(s) spare can mount"},
		"on a node that is gone":                          {etcdv1alpha1.PodTemplate{}, onNode("gone"), "which no existing node can mount"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			cluster := &etcdv1alpha1.EtcdCluster{Spec: etcdv1alpha1.EtcdClusterSpec{Pod: tt.pod}}
			got, err := backupNotMountable(cluster, "backups", tt.pv, nodes)
			if err != nil {
				t.Fatal(err)
			}
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("backupNotMountable = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMountableOnManyNodes(t *testing.T) {
	claim := func(spec, status []corev1.PersistentVolumeAccessMode) *corev1.PersistentVolumeClaim {
		return &corev1.PersistentVolumeClaim{Spec: corev1.PersistentVolumeClaimSpec{AccessModes: spec},
			Status: corev1.PersistentVolumeClaimStatus{AccessModes: status}}
	}
	rwo, rwx, rox, rwop := corev1.ReadWriteOnce, corev1.ReadWriteMany, corev1.ReadOnlyMany, corev1.ReadWriteOncePod
	tests := map[string]struct {
		claim *corev1.PersistentVolumeClaim
		want  bool
	}{
		"ReadWriteOnce":                        {claim([]corev1.PersistentVolumeAccessMode{rwo}, nil), false},
		"ReadWriteOncePod":                     {claim([]corev1.PersistentVolumeAccessMode{rwop}, nil), false},
		"ReadWriteMany":                        {claim([]corev1.PersistentVolumeAccessMode{rwx}, nil), true},
		"ReadOnlyMany beside ReadWriteOnce":    {claim([]corev1.PersistentVolumeAccessMode{rwo, rox}, nil), true},
		"the bound volume's modes decide":      {claim([]corev1.PersistentVolumeAccessMode{rwo}, []corev1.PersistentVolumeAccessMode{rwo, rwx}), true},
		"bound to a volume of one node's mode": {claim([]corev1.PersistentVolumeAccessMode{rwx}, []corev1.PersistentVolumeAccessMode{rwo}), false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := mountableOnManyNodes(tt.claim); got != tt.want {
				t.Errorf("mountableOnManyNodes = %v, want %v", got, tt.want)
			}
		})
	}
}
