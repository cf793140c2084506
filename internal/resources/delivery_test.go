package resources

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestResolveAgentDelivery(t *testing.T) {
	for _, tt := range []struct {
		delivery, server  string
		imageVolume, auto bool
		err               string
	}{
		{AgentDeliveryInitContainer, "v1.34.4", false, false, ""},
		{AgentDeliveryInitContainer, "", false, false, ""},
		{AgentDeliveryImageVolume, "v1.37.2", true, false, ""},
		{AgentDeliveryImageVolume, "v1.35.0", true, false, ""},
		{AgentDeliveryImageVolume, "v1.35.4-gke.1200", true, false, ""},
		{AgentDeliveryImageVolume, "v1.36.3+k3s1", true, false, ""},
		{AgentDeliveryImageVolume, "v2.0.0", true, false, ""},
		{AgentDeliveryImageVolume, "v1.34.4", false, false, "needs Kubernetes 1.35 or newer"},
		{AgentDeliveryImageVolume, "v1.29.15-eks-1234", false, false, "the API server is v1.29.15-eks-1234"},
		{AgentDeliveryImageVolume, "unknown", false, false, "read the API server's version"},
		// auto: the nodes decide on 1.35 and newer; before, init containers without an error.
		{AgentDeliveryAuto, "v1.37.2", false, true, ""},
		{AgentDeliveryAuto, "v1.35.0-eks-1", false, true, ""},
		{AgentDeliveryAuto, "v1.34.4", false, false, ""},
		{AgentDeliveryAuto, "v1.29.0", false, false, ""},
		{AgentDeliveryAuto, "", false, false, "read the API server's version"},
		{"", "v1.37.2", false, false, "not \"\""},
		{"imagevolume", "v1.37.2", false, false, "auto, init-container or image-volume"},
	} {
		got, err := ResolveAgentDelivery(tt.delivery, tt.server)
		if got.AgentImageVolume != tt.imageVolume || got.Auto != tt.auto || (err == nil) != (tt.err == "") ||
			(err != nil && !strings.Contains(err.Error(), tt.err)) || (err == nil && got.Why == "") {
			t.Errorf("ResolveAgentDelivery(%q, %q) = %+v, %v; want image volume %v, auto %v, error containing %q",
				tt.delivery, tt.server, got, err, tt.imageVolume, tt.auto, tt.err)
		}
	}
}

func TestRuntimeMountsImageVolumes(t *testing.T) {
	for rt, want := range map[string]bool{
		"containerd://2.4.2":                  true,
		"containerd://2.1.0":                  true,
		"containerd://v2.1.0-rc.1":            true,
		"containerd://3.0.0":                  true,
		"containerd://2.0.5":                  false,
		"containerd://1.7.27":                 false,
		"containerd://1.6.20~ds1":             false,
		"cri-o://1.31.2":                      true,
		"cri-o://1.34.0":                      true,
		"cri-o://1.30.9":                      false,
		"docker://28.0.1":                     false,
		"remote://1.0":                        false,
		"containerd://":                       false,
		"containerd://unknown":                false,
		"containerd://99999999999999999999.1": false,
		"2.4.2":                               false,
		"":                                    false,
	} {
		if got := RuntimeMountsImageVolumes(rt); got != want {
			t.Errorf("RuntimeMountsImageVolumes(%q) = %t, want %t", rt, got, want)
		}
	}
}

func TestImageVolumesOnNodes(t *testing.T) {
	node := func(name, runtime string) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{ContainerRuntimeVersion: runtime}}}
	}
	for name, tt := range map[string]struct {
		nodes []corev1.Node
		want  bool
		why   string
	}{
		"every node on containerd 2.4": {[]corev1.Node{node("a", "containerd://2.4.2"), node("b", "containerd://2.4.2")}, true, "every node (2)"},
		"containerd and CRI-O":         {[]corev1.Node{node("a", "containerd://2.1.1"), node("b", "cri-o://1.32.0")}, true, "every node (2)"},
		// One node is enough to refuse: a member Pod may be scheduled there and would never start.
		"one node on containerd 1.7": {[]corev1.Node{node("a", "containerd://2.4.2"), node("old", "containerd://1.7.27")}, false, `node old runs "containerd://1.7.27"`},
		"a node not reporting yet":   {[]corev1.Node{node("a", "containerd://2.4.2"), node("new", "")}, false, `node new runs ""`},
		"no nodes":                   {nil, false, "no Node"},
	} {
		got, why := ImageVolumesOnNodes(tt.nodes)
		if got != tt.want || !strings.Contains(why, tt.why) {
			t.Errorf("%s: ImageVolumesOnNodes = %t, %q; want %t, %q", name, got, why, tt.want, tt.why)
		}
	}
}
