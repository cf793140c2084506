// Package e2e runs Steward's end-to-end scenarios on the local test bed: a real Kubernetes node, real etcd
// members in Pods, the operator's manager running in the test process (so tests can stop and restart it).
// The tests skip under -short and without root.
//
// The tests share the one test bed and run in parallel (go test -parallel N; `make test` picks N, see
// docs/development/testing.md). Each test keeps to namespaces of its own (newNamespace: a unique name, deleted with
// everything in it when the test ends) and runs its own operator watching only those namespaces
// (startOperator), so a test that stops or restarts its operator disturbs no other. A test calls parallel(t)
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
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/controller/etcdbackup"
	"steward.dev/steward/internal/controller/etcdbackupschedule"
	"steward.dev/steward/internal/controller/etcdcluster"
	"steward.dev/steward/internal/controller/etcdrestore"
	"steward.dev/steward/internal/controller/etcduser"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/manager"
	stewardmetrics "steward.dev/steward/internal/metrics"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/internal/version"
)

var (
	bed       *testbed.Cluster
	k8s       client.Client
	clientset kubernetes.Interface
	scheme    = runtime.NewScheme()
	// operatorOptions are the options the in-process operator runs with, also used to build expected objects.
	operatorOptions = resources.Options{ImageRepository: testbed.EtcdRepository, ClusterDomain: testbed.ClusterDomain, AgentImage: testbed.AgentImage, AgentCurrent: version.IsRelease(testbed.AgentImage),
		UpgradeVia: func() []string {
			releases, err := plan.ParseUpgradeVia(resources.DefaultUpgradeVia) // the operator's default flag
			if err != nil {
				panic(err)
			}
			return releases
		}()}
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
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(etcdv1alpha1.AddToScheme(scheme))
	if !shouldRun() {
		os.Exit(m.Run())
	}
	os.Exit(runWithTestbed(m))
}

func shouldRun() bool {
	for _, a := range os.Args {
		if a == "-test.short=true" || a == "-test.short" {
			return false
		}
	}
	return os.Geteuid() == 0
}

func runWithTestbed(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	var err error
	if bed, err = testbed.Start(ctx, bedOptions); err != nil {
		fmt.Fprintf(os.Stderr, "start test bed: %v\n", err)
		return 1
	}
	defer func() {
		if err := bed.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop test bed: %v\n", err)
		}
	}()
	// On a runtime that mounts image volumes the operators run the agent from one (--agent-delivery=image-volume),
	// so that the suite on containerd 2 tests that Pod, and on the default runtime the init container's.
	operatorOptions.AgentImageVolume = bed.Containerd() != testbed.SystemContainerd
	fmt.Fprintf(os.Stderr, "test bed: Kubernetes %s, containerd %s, agent image volume %v\n", bed.KubernetesVersion(), bed.Containerd(), operatorOptions.AgentImageVolume)
	if k8s, err = client.New(bed.RESTConfig, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	clientset = kubernetes.NewForConfigOrDie(bed.RESTConfig)
	if err := installCRDs(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "install CRDs: %v\n", err)
		return 1
	}
	ctrl.SetLogger(zap.New(zap.UseDevMode(true), zap.WriteTo(logFile()), func(o *zap.Options) { o.TimeEncoder = manager.LogTimeEncoder }))
	cpu := startCPUProfile(filepath.Join(bed.StateDir(), "logs", "e2e-cpu.tsv"))
	code := m.Run()
	cpu.stop(os.Stdout)
	if code != 0 && keepForDiagnosis() {
		// The deferred Stop would take the kept namespaces with it.
		fmt.Fprintf(os.Stderr, "STEWARD_E2E_KEEP=1: the test bed keeps running with the failed tests' namespaces: "+
			"KUBECONFIG=%s; stop it with `go run ./cmd/steward-testbed down`\n", bed.Kubeconfig)
		os.Exit(code)
	}
	return code
}

// logFile collects the in-process operator's logs next to the test bed's component logs.
func logFile() *os.File {
	f, err := os.Create(filepath.Join(bed.StateDir(), "logs", "steward-e2e.log"))
	if err != nil {
		return os.Stderr
	}
	return f
}

func installCRDs(ctx context.Context) error {
	cs := apiextensionsclient.NewForConfigOrDie(bed.RESTConfig)
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

// startOperator runs Steward's manager in the test process, watching only namespaces (as `steward
// --watch-namespace` does), until the returned stop function is called or the test ends. Tests run in parallel
// on one API server: an operator watching every namespace would reconcile other tests' clusters too.
func startOperator(t *testing.T, namespaces ...string) (stop func()) {
	t.Helper()
	if len(namespaces) == 0 {
		t.Fatal("startOperator: name the test's namespaces")
	}
	return startOperatorAs(t, bed.RESTConfig, namespaces)
}

// startOperatorAs runs the manager with cfg's credentials, watching only namespaces, as `steward
// --watch-namespace` does, electing a leader with a Lease in the first of them.
func startOperatorAs(t *testing.T, cfg *rest.Config, namespaces manager.Namespaces) (stop func()) {
	t.Helper()
	if len(namespaces) == 0 {
		t.Fatal("startOperatorAs: an operator of one test watches that test's namespaces only")
	}
	cacheOptions := namespaces.CacheOptions()
	cacheOptions.ByObject = etcdcluster.CacheByObject()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         cacheOptions,
		LeaderElection:                true,
		LeaderElectionID:              "steward-e2e.etcd.steward.dev",
		LeaderElectionNamespace:       namespaces[0],
		LeaderElectionReleaseOnCancel: true,
		// Each test's operator is alone in its namespace, and a stopped one releases its Lease, so these only
		// decide how long an API server that does not answer (stalled by the load of the other tests: 10 s seen
		// once, docs/development/flakes.md) is outlasted before the operator stops leading, which fails its test.
		// controller-runtime's defaults (15 s, 10 s) are what TestInClusterOperatorHA exercises.
		LeaseDuration:          ptr.To(60 * time.Second),
		RenewDeadline:          ptr.To(45 * time.Second),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Tests start the manager more than once in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: manager.DefaultMaxConcurrentReconciles},
		// Operators of parallel tests log to one file: each line names its test.
		Logger: ctrl.Log.WithValues("test", t.Name()),
	})
	if err != nil {
		t.Fatal(err)
	}
	recorder, stopEvents, err := manager.NewEventRecorder(cfg, scheme, ctrl.Log.WithValues("test", t.Name()).WithName("events"))
	if err != nil {
		t.Fatal(err)
	}
	clusters := &etcdcluster.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: recorder,
		Etcd: etcd.NewPool(), Options: operatorOptions}
	if cfg == bed.RESTConfig {
		// An operator with the admin's credentials reads Nodes, as a cluster-wide install does (it watches only
		// its test's namespaces so that tests stay apart); one with a namespace's Roles, as a namespace-scoped
		// install, does not.
		clusters.Nodes = mgr.GetClient()
	}
	if err := clusters.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&etcdbackup.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: recorder, AgentImage: testbed.AgentImage, Options: operatorOptions}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&etcdrestore.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: recorder, AgentImage: testbed.AgentImage}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&etcdbackupschedule.Reconciler{Client: mgr.GetClient(), Recorder: recorder, Options: operatorOptions}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&etcduser.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: recorder, Etcd: etcd.NewPool(), Options: operatorOptions}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	// As cmd/steward does: registered once per process, each manager's cache a source while it leads.
	if err := stewardmetrics.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("operator: %v", err)
		}
		stopEvents()
	}
	t.Cleanup(stop)
	return stop
}

func poll(t *testing.T, what string, timeout time.Duration, check func() error) {
	t.Helper()
	if err := testbed.Eventually(context.Background(), timeout, 500*time.Millisecond, check); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
