package metrics

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// BenchmarkScrape20Clusters scrapes the gauges of 20 three-member clusters, each with 10 backups and a schedule,
// and encodes them as Prometheus' text format, as the endpoint does. It reports the bytes and series of one
// scrape. The fake client deep-copies every list as the cache does, so the time is of the same order.
func BenchmarkScrape20Clusters(b *testing.B) {
	var objs []client.Object
	for i := range 20 {
		c := healthyCluster()
		c.Name = fmt.Sprintf("cluster-%02d", i)
		c.Status.TLS = &etcdv1alpha1.TLSStatus{CANotAfter: ts(now), MemberNotAfter: ts(now), ClientNotAfter: ts(now)}
		objs = append(objs, c)
		for j := range 10 {
			bk := backupOf(c.Name, fmt.Sprintf("%s-%d", c.Name, j), true, now.Add(time.Duration(j)*time.Hour), now.Add(time.Duration(j)*time.Hour+time.Minute), 1<<20)
			objs = append(objs, &bk)
		}
		s := &etcdv1alpha1.EtcdBackupSchedule{Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: c.Name, Schedule: "@hourly"}}
		s.Namespace, s.Name = "ns", c.Name
		s.Status.NextScheduleTime, s.Status.LastScheduleTime = ts(now.Add(time.Hour)), ts(now)
		objs = append(objs, s)
	}
	reader := fake.NewClientBuilder().WithScheme(benchScheme()).WithObjects(objs...).Build()
	c := NewCollector()
	defer c.AddReader(reader)()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	var size, series int
	b.ResetTimer()
	for range b.N {
		mfs, err := reg.Gather()
		if err != nil {
			b.Fatal(err)
		}
		var buf bytes.Buffer
		enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
		series = 0
		for _, mf := range mfs {
			series += len(mf.Metric)
			if err := enc.Encode(mf); err != nil {
				b.Fatal(err)
			}
		}
		size = buf.Len()
	}
	b.ReportMetric(float64(size), "bytes/scrape")
	b.ReportMetric(float64(series), "series/scrape")
}
