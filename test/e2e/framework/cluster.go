package framework

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/internal/version"
)

// The test bed every test runs on and clients of its API server, set up once by the suite's TestMain.
var (
	// Bed is the running test bed; nil without one (under -short or without root), when tests skip.
	Bed *testbed.Cluster
	// K8s is a client of the test bed's API server with the cluster administrator's credentials.
	K8s client.Client
	// Clientset is the same administrator's client-go Clientset.
	Clientset kubernetes.Interface
	// Scheme knows client-go's and Steward's kinds.
	Scheme = runtime.NewScheme()
	// OperatorOptions are the options the in-process operator runs with, also used to build expected objects.
	OperatorOptions = resources.Options{ImageRepository: testbed.EtcdRepository, ClusterDomain: testbed.ClusterDomain, AgentImage: testbed.AgentImage, AgentCurrent: version.IsRelease(testbed.AgentImage),
		UpgradeVia: func() []string {
			releases, err := plan.ParseUpgradeVia(resources.DefaultUpgradeVia) // the operator's default flag
			if err != nil {
				panic(err)
			}
			return releases
		}()}
)

// Poll calls check every half second until it returns nil, and fails t with what and check's last error if it
// has not by timeout.
func Poll(t *testing.T, what string, timeout time.Duration, check func() error) {
	t.Helper()
	if err := testbed.Eventually(context.Background(), timeout, 500*time.Millisecond, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// RequireBed skips t when no test bed runs (under -short, or without root).
func RequireBed(t *testing.T) {
	t.Helper()
	if Bed == nil {
		t.Skip("end-to-end test: needs the test bed (root, not -short)")
	}
}
