package etcdcluster

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// forbiddenReader refuses every read, as the API server does where Steward's role lacks Nodes.
type forbiddenReader struct{ client.Reader }

func (forbiddenReader) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New(`nodes is forbidden: User "system:serviceaccount:steward:steward" cannot list resource "nodes"`)
}

// TestMemberPodOptions: under --agent-delivery=auto a member Pod mounts the agent image only while every node's
// runtime can, read at its creation; a fixed choice is kept whatever the nodes run.
func TestMemberPodOptions(t *testing.T) {
	// Nodes as the manager's cache holds them (NodeCacheTransform): the runtime must survive it.
	node := func(name, runtime string) *corev1.Node {
		n, err := NodeCacheTransform(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{ContainerRuntimeVersion: runtime, KernelVersion: "6.1.0"}}})
		if err != nil {
			t.Fatal(err)
		}
		return n.(*corev1.Node)
	}
	nodes := func(ns ...client.Object) client.Reader {
		return fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(ns...).Build()
	}
	auto := testOpts
	auto.AgentDeliveryAuto = true
	fixed := testOpts
	fixed.AgentImageVolume = true
	for name, tt := range map[string]struct {
		opts  bool // AgentDeliveryAuto, else the fixed image volume
		nodes client.Reader
		want  bool
	}{
		"auto, every node on containerd 2":            {true, nodes(node("a", "containerd://2.4.2"), node("b", "containerd://2.4.2")), true},
		"auto, one node on containerd 1.6":            {true, nodes(node("a", "containerd://2.4.2"), node("b", "containerd://1.6.20~ds1")), false},
		"auto, no right to read Nodes":                {true, forbiddenReader{}, false},
		"auto, a namespace-scoped install":            {true, nil, false},
		"image-volume fixed, nodes on containerd 1.6": {false, nodes(node("b", "containerd://1.6.20~ds1")), true},
	} {
		t.Run(name, func(t *testing.T) {
			r := &Reconciler{Options: fixed, Nodes: tt.nodes}
			if tt.opts {
				r.Options = auto
			}
			if got := r.memberPodOptions(context.Background()); got.AgentImageVolume != tt.want {
				t.Errorf("AgentImageVolume = %t, want %t", got.AgentImageVolume, tt.want)
			}
		})
	}
}
