// Package e2e runs Steward's end-to-end scenarios on the local test bed: a real Kubernetes node, real etcd
// members in Pods, the operator's manager running in the test process (so tests can stop and restart it).
// The tests skip under -short and without root.
//
// The tests share the one test bed and run in parallel (go test -parallel N; `make test` picks N, see
// docs/development/testing.md). Each test keeps to namespaces of its own (NewNamespace: a unique name, deleted with
// everything in it when the test ends) and runs its own operator watching only those namespaces
// (StartOperator), so a test that stops or restarts its operator disturbs no other. A test calls parallel(t)
// first; a test that changes what every test sees (CRDs, the node, the S3 server, cert-manager, cluster-scoped
// objects) or that depends on timings other tests' load would shift calls serial(t, why) instead, and runs
// alone before the parallel ones start. STEWARD_E2E_KEEP=1 keeps a failed test's namespaces (and the test bed
// running, after a failed run) for diagnosis.
package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/manager"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
)

func TestMain(m *testing.M) {
	// -parallel N is for the gate, which admits the longest tests first; go test's own limit would admit them
	// in random order, so it is lifted.
	flag.Parse()
	if f := flag.Lookup("test.parallel"); f != nil {
		if n, ok := f.Value.(flag.Getter).Get().(int); ok {
			gate.setSlots(n)
			utilruntime.Must(f.Value.Set("1000"))
		}
	}
	framework.BeforeNamespaceDeletion = gate.leave
	utilruntime.Must(clientgoscheme.AddToScheme(framework.Scheme))
	utilruntime.Must(etcdv1alpha1.AddToScheme(framework.Scheme))
	if !shouldRun() {
		os.Exit(m.Run())
	}
	os.Exit(runWithTestbed(m))
}

// shouldRun is whether the run needs the test bed: not under -short, not to list the tests (go test -list, which
// would otherwise stop the test bed another run holds the lock for), and only as root.
func shouldRun() bool {
	for _, a := range os.Args {
		if a == "-test.short=true" || a == "-test.short" {
			return false
		}
	}
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return false
	}
	return os.Geteuid() == 0
}

func runWithTestbed(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	var err error
	if framework.Bed, err = testbed.Start(ctx, bedOptions); err != nil {
		fmt.Fprintf(os.Stderr, "start test bed: %v\n", err)
		return 1
	}
	defer func() {
		if err := framework.Bed.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop test bed: %v\n", err)
		}
	}()
	// The operators deliver the agent as Steward's default (--agent-delivery=auto) does: by image volume where the
	// nodes' runtime mounts them (containerd 2), so that the suite there tests that Pod, and on the machine's
	// containerd by the init container. Operators that may not read Nodes use the init container.
	delivery, err := resources.ResolveAgentDelivery(resources.AgentDeliveryAuto, framework.Bed.KubernetesVersion())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	framework.OperatorOptions.AgentImageVolume, framework.OperatorOptions.AgentDeliveryAuto = delivery.AgentImageVolume, delivery.Auto
	fmt.Fprintf(os.Stderr, "test bed: Kubernetes %s, containerd %s, agent delivery: %s\n", framework.Bed.KubernetesVersion(),
		framework.Bed.Containerd(), delivery.Why)
	if framework.K8s, err = client.New(framework.Bed.RESTConfig, client.Options{Scheme: framework.Scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	framework.Clientset = kubernetes.NewForConfigOrDie(framework.Bed.RESTConfig)
	if err := installCRDs(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "install CRDs: %v\n", err)
		return 1
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(logFile()), func(o *zap.Options) { o.TimeEncoder = manager.LogTimeEncoder }))
	cpu := startCPUProfile(filepath.Join(framework.Bed.StateDir(), "logs", "e2e-cpu.tsv"))
	code := m.Run()
	cpu.stop(os.Stdout)
	if code != 0 && framework.KeepForDiagnosis() {
		// The deferred Stop would take the kept namespaces with it.
		fmt.Fprintf(os.Stderr, "STEWARD_E2E_KEEP=1: the test bed keeps running with the failed tests' namespaces: "+
			"KUBECONFIG=%s; stop it with `go run ./cmd/steward-testbed down`\n", framework.Bed.Kubeconfig)
		os.Exit(code)
	}
	return code
}

// logFile collects the in-process operator's logs next to the test bed's component logs.
func logFile() *os.File {
	f, err := os.Create(filepath.Join(framework.Bed.StateDir(), "logs", "steward-e2e.log"))
	if err != nil {
		return os.Stderr
	}
	return f
}

func installCRDs(ctx context.Context) error {
	cs := apiextensionsclient.NewForConfigOrDie(framework.Bed.RESTConfig)
	files, err := filepath.Glob("../../config/crd/bases/*.yaml")
	if err != nil {
		return fmt.Errorf("find CRDs: %w", err)
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs in ../../config/crd/bases")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create CRD %s: %w", crd.Name, err)
		}
		if err := testbed.Eventually(ctx, time.Minute, 500*time.Millisecond, func() error {
			got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("CRD %s not established", crd.Name)
		}); err != nil {
			return err
		}
	}
	return nil
}
