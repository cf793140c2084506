package etcdcluster

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
