package framework

import (
	"context"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"steward.dev/steward/internal/controller/etcdbackup"
	"steward.dev/steward/internal/controller/etcdbackupschedule"
	"steward.dev/steward/internal/controller/etcdcluster"
	"steward.dev/steward/internal/controller/etcdrestore"
	"steward.dev/steward/internal/controller/etcduser"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/manager"
	stewardmetrics "steward.dev/steward/internal/metrics"
	"steward.dev/steward/internal/testbed"
)

// StartOperator runs Steward's manager in the test process, watching only namespaces (as `steward
// --watch-namespace` does), until the returned stop function is called or the test ends. Tests run in parallel
// on one API server: an operator watching every namespace would reconcile other tests' clusters too.
func StartOperator(t *testing.T, namespaces ...string) (stop func()) {
	t.Helper()
	if len(namespaces) == 0 {
		t.Fatal("startOperator: name the test's namespaces")
	}
	return StartOperatorAs(t, Bed.RESTConfig, namespaces)
}

// StartOperatorAs runs the manager with cfg's credentials, watching only namespaces, as `steward
// --watch-namespace` does, electing a leader with a Lease in the first of them.
func StartOperatorAs(t *testing.T, cfg *rest.Config, namespaces manager.Namespaces) (stop func()) {
	t.Helper()
	if len(namespaces) == 0 {
		t.Fatal("startOperatorAs: an operator of one test watches that test's namespaces only")
	}
	cacheOptions := namespaces.CacheOptions()
	cacheOptions.ByObject = etcdcluster.CacheByObject()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        Scheme,
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
	recorder, stopEvents, err := manager.NewEventRecorder(cfg, Scheme, ctrl.Log.WithValues("test", t.Name()).WithName("events"))
	if err != nil {
		t.Fatal(err)
	}
	clusters := &etcdcluster.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: recorder,
		Etcd: etcd.NewPool(), Options: OperatorOptions}
	if cfg == Bed.RESTConfig {
		// An operator with the admin's credentials reads Nodes, as a cluster-wide install does (it watches only
		// its test's namespaces so that tests stay apart); one with a namespace's Roles, as a namespace-scoped
		// install, does not.
		clusters.Nodes = mgr.GetClient()
	}
	if err := clusters.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&etcdbackup.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: recorder, AgentImage: testbed.AgentImage, Options: OperatorOptions}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&etcdrestore.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: recorder, AgentImage: testbed.AgentImage}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&etcdbackupschedule.Reconciler{Client: mgr.GetClient(), Recorder: recorder, Options: OperatorOptions}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	if err := (&etcduser.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: recorder, Etcd: etcd.NewPool(), Options: OperatorOptions}).SetupWithManager(mgr); err != nil {
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

// RunOperator starts an operator for t watching namespaces (StartOperator) that the test can stop and start again.
func RunOperator(t *testing.T, namespaces ...string) *Operator {
	t.Helper()
	return &Operator{t: t, namespaces: namespaces, stop: StartOperator(t, namespaces...)}
}

// Operator is a test's in-process operator, which some rounds stop before they delete Pods and start again after.
// It is started for t, the test itself and not a subtest, so that it runs until the test ends.
type Operator struct {
	t          *testing.T
	namespaces []string
	stop       func()
	stopped    bool
}

// Halt stops the operator until Start.
func (o *Operator) Halt() {
	o.stop()
	o.stopped = true
}

// Start starts the operator again if it is stopped.
func (o *Operator) Start() {
	o.t.Helper()
	if o.stopped {
		o.stop, o.stopped = StartOperator(o.t, o.namespaces...), false
	}
}
