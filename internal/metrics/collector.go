package metrics

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// scrapeTimeout bounds the lists of one scrape. Lists from a started cache answer from memory; the bound only
// matters for a cache that is still syncing, which must not hold a scrape (and Prometheus) up.
const scrapeTimeout = 5 * time.Second

// Collector computes the gauges at scrape time from the objects its sources (the caches of the managers that
// run in this process and lead) hold. Objects several sources hold (two managers watching one namespace) are
// counted once, so no series is exported twice.
type Collector struct {
	// Now is the clock step durations are measured with.
	Now func() time.Time
	Log logr.Logger

	mu      sync.Mutex
	sources map[*source]bool
}

// NewCollector returns a collector without sources.
func NewCollector() *Collector {
	return &Collector{Now: time.Now, Log: ctrl.Log.WithName("metrics"), sources: map[*source]bool{}}
}

// source is one manager's cache, exported while the manager leads.
type source struct {
	reader    client.Reader
	collector *Collector
}

// Start adds the source to the collector until the manager stops (or stops leading: the manager then exits).
func (s *source) Start(ctx context.Context) error {
	remove := s.collector.add(s)
	<-ctx.Done()
	remove()
	return nil
}

func (c *Collector) add(s *source) (remove func()) {
	c.mu.Lock()
	c.sources[s] = true
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.sources, s)
		c.mu.Unlock()
	}
}

// NeedLeaderElection: only the leader exports the gauges. Standbys would export the same values, and an HA
// pair would double every sum over them; after a failover the new leader exports them from the same status.
func (s *source) NeedLeaderElection() bool { return true }

// AddReader makes reader a source of the collector until remove is called (for tests, and callers without a
// manager).
func (c *Collector) AddReader(reader client.Reader) (remove func()) {
	return c.add(&source{reader: reader, collector: c})
}

// Describe sends every gauge's Desc.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, f := range families {
		ch <- f.desc
	}
}

// Collect lists EtcdClusters, EtcdBackups and EtcdBackupSchedules once per source and sends their gauges.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	for _, s := range c.samples(ctx) {
		m, err := prometheus.NewConstMetric(s.f.desc, prometheus.GaugeValue, s.value, s.labels...)
		if err != nil {
			m = prometheus.NewInvalidMetric(s.f.desc, err)
		}
		ch <- m
	}
}

// objects are the objects of every source, each once (by namespace/name), sorted for a stable output.
type objects struct {
	clusters  []etcdv1alpha1.EtcdCluster
	backups   []etcdv1alpha1.EtcdBackup
	schedules []etcdv1alpha1.EtcdBackupSchedule
}

func (c *Collector) readers() []client.Reader {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]client.Reader, 0, len(c.sources))
	for s := range c.sources {
		out = append(out, s.reader)
	}
	return out
}

// gather lists every kind from every source. A list that fails leaves that kind of that source out of this
// scrape (and is logged): the other gauges are still worth exporting, and a failed scrape would hide them.
func (c *Collector) gather(ctx context.Context) objects {
	var o objects
	seen := map[string]bool{}
	for _, r := range c.readers() {
		var cl etcdv1alpha1.EtcdClusterList
		c.list(ctx, r, &cl, "EtcdClusters")
		o.clusters = appendNew(seen, "EtcdCluster", o.clusters, cl.Items)
		var bl etcdv1alpha1.EtcdBackupList
		c.list(ctx, r, &bl, "EtcdBackups")
		o.backups = appendNew(seen, "EtcdBackup", o.backups, bl.Items)
		var sl etcdv1alpha1.EtcdBackupScheduleList
		c.list(ctx, r, &sl, "EtcdBackupSchedules")
		o.schedules = appendNew(seen, "EtcdBackupSchedule", o.schedules, sl.Items)
	}
	sortByKey(o.clusters)
	sortByKey(o.schedules)
	return o
}

func (c *Collector) list(ctx context.Context, r client.Reader, list client.ObjectList, what string) {
	if err := r.List(ctx, list); err != nil {
		c.Log.Error(err, "Listing objects for metrics failed", "kind", what)
	}
}

// appendNew appends to out the items of kind not seen yet (by namespace/name), and marks them seen.
func appendNew[T any, PT interface {
	*T
	client.Object
}](seen map[string]bool, kind string, out, items []T) []T {
	for i := range items {
		o := PT(&items[i])
		k := kind + "/" + keyOf(o.GetNamespace(), o.GetName())
		if !seen[k] {
			seen[k] = true
			out = append(out, items[i])
		}
	}
	return out
}

// sortByKey sorts objects by namespace/name, for a stable order of series.
func sortByKey[T any, PT interface {
	*T
	client.Object
}](items []T) {
	sort.Slice(items, func(i, j int) bool {
		a, b := PT(&items[i]), PT(&items[j])
		return keyOf(a.GetNamespace(), a.GetName()) < keyOf(b.GetNamespace(), b.GetName())
	})
}

func keyOf(namespace, name string) string { return namespace + "/" + name }

func (c *Collector) samples(ctx context.Context) []sample {
	return samplesOf(c.gather(ctx), c.Now())
}

// samplesOf maps every object to its gauges. Pure.
func samplesOf(o objects, now time.Time) []sample {
	var out []sample
	exists := map[string]bool{}
	for i := range o.clusters {
		c := &o.clusters[i]
		if !c.DeletionTimestamp.IsZero() {
			continue // going: its series go now rather than when the garbage collector is done
		}
		exists[keyOf(c.Namespace, c.Name)] = true
		out = append(out, clusterSamples(c, now)...)
	}
	out = append(out, backupSamples(exists, o.backups)...)
	out = append(out, claimSamples(o.backups)...)
	for i := range o.schedules {
		out = append(out, scheduleSamples(&o.schedules[i])...)
	}
	return out
}

var (
	registerOnce sync.Once
	collector    = NewCollector()
)

// Register registers the counters and the collector on controller-runtime's registry, once per process:
// several managers in one process (the e2e tests start one per test) share them, and registering the same
// metrics twice would panic.
func Register() {
	registerOnce.Do(func() {
		ctrlmetrics.Registry.MustRegister(collector)
		for _, c := range counters {
			ctrlmetrics.Registry.MustRegister(c)
		}
	})
}

// SetupWithManager registers Steward's metrics (once per process) and makes the manager's cache a source of
// the gauges while the manager leads. Each manager in the process adds its own cache; the one collector reads
// them all and exports each object once.
func SetupWithManager(mgr ctrl.Manager) error {
	Register()
	return mgr.Add(&source{reader: mgr.GetCache(), collector: collector})
}
