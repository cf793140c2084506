// Command steward is the Steward operator: a controller-runtime manager that serves metrics and health probes,
// optionally elects a leader, and runs the controllers that manage etcd clusters.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
	// Maintenance windows name IANA time zones; the image carries no zoneinfo of its own.
	_ "time/tzdata"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/controller/etcdbackup"
	"steward.dev/steward/internal/controller/etcdbackupschedule"
	"steward.dev/steward/internal/controller/etcdcluster"
	"steward.dev/steward/internal/controller/etcdrestore"
	"steward.dev/steward/internal/controller/etcduser"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/manager"
	"steward.dev/steward/internal/metrics"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/version"
)

// Leader election and Events are what the manager itself needs; each controller declares its own permissions,
// the least its code uses (docs/operations/security.md explains each). Leader election reads, creates and renews one Lease
// (client-go's LeaseLock: get, create, update); the event recorder writes core/v1 Events (create, and patch to
// count repeats).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "steward: %v\n", err)
		os.Exit(1)
	}
}

// metricsOptions serve the metrics endpoint as controller-runtime and kubebuilder do by default: over HTTPS, each
// scrape authenticated and authorized by the API server, because the steward_* series name every cluster and
// member Steward manages, and anyone on the pod network could read them in plain HTTP.
func metricsOptions(addr string, secure bool) metricsserver.Options {
	o := metricsserver.Options{BindAddress: addr, SecureServing: secure}
	if secure {
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}

// options are the command line of the operator.
type options struct {
	metricsAddr      string
	metricsSecure    bool
	probeAddr        string
	leaderElect      bool
	leaderElectionNS string
	resourceOpts     resources.Options
	agentImage       string
	agentDelivery    string
	upgradeVia       string
	namespaces       manager.Namespaces
	printVersion     bool
	leaseDuration    time.Duration
	renewDeadline    time.Duration
	retryPeriod      time.Duration
	concurrency      int
	pprofAddr        string
	zap              zap.Options
}

// parseFlags reads the command line into options and checks what flags alone can say is wrong.
func parseFlags() (*options, error) {
	o := &options{}
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", `address of the Prometheus metrics endpoint; "0" disables it`)
	flag.BoolVar(&o.metricsSecure, "metrics-secure", true,
		"serve metrics over HTTPS (a self-signed certificate) to clients the API server authenticates (TokenReview) and "+
			"authorizes for GET /metrics (SubjectAccessReview, e.g. the ClusterRole steward-metrics-reader); false: plain HTTP to anyone")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz probes")
	// Off unless asked for: the profiles show the process' memory and goroutines to whoever reaches the port.
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "",
		`address of Go's profiling endpoints (/debug/pprof/), for example 127.0.0.1:8082 (reached with kubectl port-forward); empty or "0" disables them`)
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader, so that only one of several replicas acts")
	// controller-runtime's defaults: a standby takes over at most leaseDuration+retryPeriod after a leader dies
	// without stepping down (a crash or a lost node); a leader that shuts down hands over at once.
	flag.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", 15*time.Second,
		"how long standbys wait after the leader's last renewal before taking over")
	flag.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", 10*time.Second,
		"how long the leader retries renewing before it gives up leading (and exits); less than the lease duration")
	flag.DurationVar(&o.retryPeriod, "leader-elect-retry-period", 2*time.Second, "how often candidates try to acquire or renew the lease")
	flag.IntVar(&o.concurrency, "max-concurrent-reconciles", manager.DefaultMaxConcurrentReconciles,
		"objects of one kind reconciled at the same time (never one object twice at once)")
	flag.BoolVar(&o.printVersion, "version", false, "print the version and exit")
	flag.StringVar(&o.leaderElectionNS, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	flag.StringVar(&o.resourceOpts.ImageRepository, "etcd-image-repository", "quay.io/coreos/etcd",
		"repository of etcd images; members run <repository>:v<version> unless the EtcdCluster names an image")
	flag.StringVar(&o.upgradeVia, "upgrade-via", resources.DefaultUpgradeVia,
		"etcd releases (comma-separated, one per minor) a cluster passes through when spec.version is more than one minor ahead of it, "+
			"e.g. 3.5 -> 3.7 through 3.6.16; empty: such jumps are refused")
	flag.StringVar(&o.resourceOpts.ClusterDomain, "cluster-domain", "cluster.local", "the Kubernetes cluster's DNS domain, for member addresses")
	flag.StringVar(&o.agentImage, "agent-image", version.Image,
		"image of backup and restore Jobs and of restore init containers: contains /usr/local/bin/steward-agent (built from cmd/steward-agent)")
	flag.StringVar(&o.agentDelivery, "agent-delivery", resources.AgentDeliveryAuto,
		"how member Pods get steward-agent: image-volume (the agent image mounted as a volume, one init container fewer per member start; Kubernetes 1.35+ with containerd 2.1+ or CRI-O 1.31+ on every node), init-container (copied by an init container; every release), "+
			"or auto: image-volume where the API server and every node's runtime (read when each member Pod is created) can, else init-container")
	flag.Var(&o.namespaces, "watch-namespace",
		"namespace to manage (repeatable or comma-separated); unset: every namespace. Set, Steward's cache and "+
			"watches are limited to these namespaces and it needs only Roles in them (config/namespaced)")
	// Log times to the millisecond (manager.LogTimeEncoder); --zap-time-encoding still overrides it.
	o.zap = zap.Options{TimeEncoder: manager.LogTimeEncoder}
	o.zap.BindFlags(flag.CommandLine)
	flag.Parse()
	if o.printVersion {
		return o, nil
	}
	if o.concurrency < 1 {
		return nil, fmt.Errorf("--max-concurrent-reconciles must be at least 1, not %d", o.concurrency)
	}
	if o.leaderElect && (o.renewDeadline >= o.leaseDuration || o.retryPeriod >= o.renewDeadline) {
		return nil, fmt.Errorf("leader election needs --leader-elect-retry-period (%s) < --leader-elect-renew-deadline (%s) < --leader-elect-lease-duration (%s)",
			o.retryPeriod, o.renewDeadline, o.leaseDuration)
	}
	releases, err := plan.ParseUpgradeVia(o.upgradeVia)
	if err != nil {
		return nil, fmt.Errorf("--upgrade-via: %w", err)
	}
	o.resourceOpts.UpgradeVia = releases
	o.resourceOpts.AgentImage = o.agentImage
	o.resourceOpts.AgentCurrent = version.IsRelease(o.agentImage)
	return o, nil
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	if o.printVersion {
		fmt.Println("steward " + version.Describe())
		return nil
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	log := ctrl.Log.WithName("setup")

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(etcdv1alpha1.AddToScheme(scheme))

	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	// The namespaces to manage (all when unset), and only Steward's own Secrets (its certificates) in them.
	cacheOptions := o.namespaces.CacheOptions()
	cacheOptions.ByObject = etcdcluster.CacheByObject()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsOptions(o.metricsAddr, o.metricsSecure),
		HealthProbeBindAddress:  o.probeAddr,
		PprofBindAddress:        o.pprofAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "steward.etcd.steward.dev",
		LeaderElectionNamespace: o.leaderElectionNS,
		// Stepping down on shutdown hands over in seconds instead of a lease duration; safe because the
		// process exits right after.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.leaseDuration,
		RenewDeadline:                 &o.renewDeadline,
		RetryPeriod:                   &o.retryPeriod,
		Cache:                         cacheOptions,
		Controller:                    config.Controller{MaxConcurrentReconciles: o.concurrency},
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	if err := o.resolveAgentDelivery(cfg); err != nil {
		return err
	}
	recorder, stopEvents, err := manager.NewEventRecorder(cfg, scheme, ctrl.Log.WithName("events"))
	if err != nil {
		return err
	}
	defer stopEvents()
	if err := setupControllers(mgr, recorder, o); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return fmt.Errorf("add health check: %w", err)
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return fmt.Errorf("add ready check: %w", err)
	}
	log.Info("Starting manager", "version", version.Describe(), "metricsAddr", o.metricsAddr, "probeAddr", o.probeAddr, "leaderElect", o.leaderElect,
		"watchNamespaces", o.namespaces.Sorted())
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		return fmt.Errorf("run manager: %w", err)
	}
	return nil
}

// setupControllers registers Steward's controllers and its metrics with mgr.
func setupControllers(mgr ctrl.Manager, recorder record.EventRecorder, o *options) error {
	clusters := &etcdcluster.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  recorder,
		Etcd:      etcd.NewPool(),
		Options:   o.resourceOpts,
	}
	if len(o.namespaces) == 0 {
		// A namespace-scoped install has no ClusterRole, so no permission to list and watch Nodes.
		clusters.Nodes = mgr.GetClient()
	}
	if err := clusters.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up EtcdCluster controller: %w", err)
	}
	if err := (&etcdbackup.Reconciler{
		Client:     mgr.GetClient(),
		APIReader:  mgr.GetAPIReader(),
		Recorder:   recorder,
		AgentImage: o.agentImage,
		Options:    o.resourceOpts,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up EtcdBackup controller: %w", err)
	}
	if err := (&etcdrestore.Reconciler{
		Client:     mgr.GetClient(),
		APIReader:  mgr.GetAPIReader(),
		Recorder:   recorder,
		AgentImage: o.agentImage,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up EtcdRestore controller: %w", err)
	}
	if err := (&etcdbackupschedule.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  recorder,
		Options:   o.resourceOpts,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up EtcdBackupSchedule controller: %w", err)
	}
	if err := (&etcduser.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  recorder,
		Etcd:      etcd.NewPool(),
		Options:   o.resourceOpts,
	}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up EtcdUser controller: %w", err)
	}
	// Steward's own metrics, next to controller-runtime's on --metrics-bind-address: gauges read from this
	// manager's cache at scrape time (while it leads), counters the controllers increment.
	if err := metrics.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("set up metrics: %w", err)
	}
	return nil
}

// resolveAgentDelivery sets how member Pods get the agent from --agent-delivery, asking the API server its
// version unless the flag fixes init containers. A namespace-scoped install may not read Nodes, so there auto is
// the init container.
func (o *options) resolveAgentDelivery(cfg *rest.Config) error {
	server := ""
	if o.agentDelivery != resources.AgentDeliveryInitContainer {
		dc, err := discovery.NewDiscoveryClientForConfig(cfg)
		if err != nil {
			return fmt.Errorf("--agent-delivery: %w", err)
		}
		info, err := dc.ServerVersion()
		if err != nil {
			return fmt.Errorf("--agent-delivery: ask the API server its version: %w", err)
		}
		server = info.GitVersion
	}
	d, err := resources.ResolveAgentDelivery(o.agentDelivery, server)
	if err != nil {
		return err
	}
	if d.Auto && len(o.namespaces) > 0 {
		d = resources.AgentDelivery{Why: "init containers: a namespace-scoped install cannot read the nodes' runtimes (--agent-delivery=image-volume if every node mounts image volumes)"}
	}
	o.resourceOpts.AgentImageVolume, o.resourceOpts.AgentDeliveryAuto = d.AgentImageVolume, d.Auto
	ctrl.Log.WithName("setup").Info("Agent delivery", "flag", o.agentDelivery, "decided", d.Why)
	return nil
}
