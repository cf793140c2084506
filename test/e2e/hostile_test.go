package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/test/e2e/framework"
)

// TestHostileSpecsAreRefused: malformed and dangerous EtcdClusters, EtcdBackups and EtcdBackupSchedules are
// refused at admission with a message saying what is wrong, and nothing is stored. No operator runs: refusing
// is the API server's job alone.
func TestHostileSpecsAreRefused(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "hostile")
	huge := strings.Repeat("a", 100_000)

	clusters := map[string]struct {
		mutate func(*etcdv1alpha1.EtcdCluster)
		want   string
	}{
		"huge version":              {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = huge }, "Too long"},
		"version with v":            {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "v3.6.16" }, "version must be an etcd release"},
		"version with leading zero": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.6.016" }, "version must be an etcd release"},
		"version with shell":        {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.6.1;rm" }, "version must be an etcd release"},
		"huge image":                {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Image = huge }, "Too long"},
		"image with whitespace":     {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Image = "etcd:v3.6.16 --evil" }, "spec.image"},
		"negative size":             {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Size = resource.MustParse("-1Gi") }, "size must be greater than zero"},
		"volume too small for etcd": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Size = resource.MustParse("256Mi") }, "size must be at least 512Mi"},
		"quota that does not fit the volume": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Storage.Size, c.Spec.Etcd.QuotaBackendBytes = resource.MustParse("1Gi"), ptr.To(resource.MustParse("300Mi"))
		}, "etcd.quotaBackendBytes does not fit storage.size"},
		"quota at etcd's default on the default volume": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Etcd.QuotaBackendBytes = ptr.To(resource.MustParse("2Gi"))
		}, "etcd.quotaBackendBytes does not fit storage.size"},
		"huge storage class":           {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.StorageClassName = ptr.To(huge) }, "Too long"},
		"quota zero":                   {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.QuotaBackendBytes = ptr.To(resource.MustParse("0")) }, "quotaBackendBytes must be between"},
		"quota above 100Gi":            {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.QuotaBackendBytes = ptr.To(resource.MustParse("1Ti")) }, "quotaBackendBytes must be between"},
		"heartbeat below minimum":      {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.HeartbeatIntervalMillis = ptr.To[int32](1) }, "heartbeatIntervalMillis"},
		"election above maximum":       {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.ElectionTimeoutMillis = ptr.To[int32](60000) }, "electionTimeoutMillis"},
		"heartbeat vs default timeout": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.HeartbeatIntervalMillis = ptr.To[int32](500) }, "at least 5 times"},
		"timeout vs default heartbeat": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.ElectionTimeoutMillis = ptr.To[int32](400) }, "at least 5 times"},
		"revision retention as time": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Etcd.AutoCompactionMode, c.Spec.Etcd.AutoCompactionRetention = "revision", "1h"
		}, "must be a number of revisions"},
		"retention not a duration": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.AutoCompactionRetention = "1 day" }, "autoCompactionRetention"},
		"snapshot count zero":      {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.SnapshotCount = ptr.To[int64](0) }, "snapshotCount"},
		"replace unhealthy too soon": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.ReplaceUnhealthyAfter = &metav1.Duration{Duration: time.Second}
		}, "at least 10s"},
		"replace unhealthy negative": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.ReplaceUnhealthyAfter = &metav1.Duration{Duration: -time.Hour}
		}, "at least 10s"},
		"huge priority class": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Pod.PriorityClassName = huge }, "Too long"},
		"Steward's own Pod annotation": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Pod.Annotations = map[string]string{resources.AnnotationInitialClusterState: "existing"}
		}, "annotations under etcd.steward.dev/"},
		"Steward's own Pod label": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Pod.Labels = map[string]string{resources.LabelMember: "x"} },
			"labels under etcd.steward.dev/"},
	}
	for name, tt := range clusters {
		t.Run("EtcdCluster "+name, func(t *testing.T) {
			c := framework.NewCluster(ns, "refused", 1)
			tt.mutate(c)
			framework.Refused(t, framework.K8s.Create(ctx, c), tt.want)
			requireNotStored(t, ns, &etcdv1alpha1.EtcdCluster{}, "refused")
		})
	}

	// Names whose Services or member Pods Kubernetes would refuse: the cluster would be admitted and fail forever.
	for name, clusterName := range map[string]string{"58 characters": "a" + strings.Repeat("b", 57), "leading digit": "1db", "dotted": "db.prod"} {
		t.Run("EtcdCluster name "+name, func(t *testing.T) {
			framework.Refused(t, framework.K8s.Create(ctx, framework.NewCluster(ns, clusterName, 1)), "metadata.name must start with a letter")
			requireNotStored(t, ns, &etcdv1alpha1.EtcdCluster{}, clusterName)
		})
	}

	// Spellings the typed client cannot send.
	raw := map[string]struct {
		spec map[string]any
		want string
	}{
		"replicas as string": {map[string]any{"replicas": "3", "version": "3.6.16"}, "spec.replicas"},
		"replicas 2^31":      {map[string]any{"replicas": int64(1) << 31, "version": "3.6.16"}, "spec.replicas"},
		"no version":         {map[string]any{"replicas": 1}, "spec.version: Required value"},
		"quota not a quantity": {map[string]any{"replicas": 1, "version": "3.6.16", "etcd": map[string]any{"quotaBackendBytes": "lots"}},
			"quotaBackendBytes"},
		"unknown TLS provider": {map[string]any{"replicas": 1, "version": "3.6.16", "tls": map[string]any{"provider": "Magic"}}, "Unsupported value"},
	}
	for name, tt := range raw {
		t.Run("EtcdCluster "+name, func(t *testing.T) {
			framework.Refused(t, framework.CreateUnstructured(ctx, map[string]any{"apiVersion": "etcd.steward.dev/v1alpha1", "kind": "EtcdCluster",
				"metadata": map[string]any{"name": "raw", "namespace": ns}, "spec": tt.spec}), tt.want)
			requireNotStored(t, ns, &etcdv1alpha1.EtcdCluster{}, "raw")
		})
	}

	pvc := func(path string) etcdv1alpha1.BackupDestination {
		return etcdv1alpha1.BackupDestination{PVC: &etcdv1alpha1.PVCDestination{ClaimName: "backups", Path: path}}
	}
	s3 := func(mutate func(*etcdv1alpha1.S3Destination)) etcdv1alpha1.BackupDestination {
		d := &etcdv1alpha1.S3Destination{Endpoint: "s3.example.com", Bucket: "backups", Key: "etcd/",
			CredentialsSecret: &etcdv1alpha1.SecretReference{Name: "creds"}}
		mutate(d)
		return etcdv1alpha1.BackupDestination{S3: d}
	}
	gcs := func(mutate func(*etcdv1alpha1.GCSDestination)) etcdv1alpha1.BackupDestination {
		d := &etcdv1alpha1.GCSDestination{Bucket: "backups", Key: "etcd/"}
		mutate(d)
		return etcdv1alpha1.BackupDestination{GCS: d}
	}
	azure := func(mutate func(*etcdv1alpha1.AzureDestination)) etcdv1alpha1.BackupDestination {
		d := &etcdv1alpha1.AzureDestination{StorageAccount: "acmebackups", Container: "etcd", Key: "etcd/"}
		mutate(d)
		return etcdv1alpha1.BackupDestination{Azure: d}
	}
	destinations := map[string]struct {
		d    etcdv1alpha1.BackupDestination
		want string
	}{
		"path traversal":                {pvc("../../etc/passwd"), "without '..'"},
		"path traversal inside":         {pvc("backups/../../x.db"), "without '..'"},
		"absolute path":                 {pvc("/etc/shadow"), "path must be relative"},
		"path with newline":             {pvc("a\nb.db"), "path must be relative"},
		"huge path":                     {pvc(huge), "Too long"},
		"both destinations":             {etcdv1alpha1.BackupDestination{PVC: pvc("x.db").PVC, S3: s3(func(*etcdv1alpha1.S3Destination) {}).S3}, "exactly one of pvc, s3, gcs or azure"},
		"no destination":                {etcdv1alpha1.BackupDestination{}, "exactly one of pvc, s3, gcs or azure"},
		"s3 and gcs":                    {etcdv1alpha1.BackupDestination{S3: s3(func(*etcdv1alpha1.S3Destination) {}).S3, GCS: gcs(func(*etcdv1alpha1.GCSDestination) {}).GCS}, "exactly one of pvc, s3, gcs or azure"},
		"gcs and azure":                 {etcdv1alpha1.BackupDestination{GCS: gcs(func(*etcdv1alpha1.GCSDestination) {}).GCS, Azure: azure(func(*etcdv1alpha1.AzureDestination) {}).Azure}, "exactly one of pvc, s3, gcs or azure"},
		"azure account uppercase":       {azure(func(d *etcdv1alpha1.AzureDestination) { d.StorageAccount = "AcmeBackups" }), "spec.destination.azure.storageAccount"},
		"azure container double hyphen": {azure(func(d *etcdv1alpha1.AzureDestination) { d.Container = "etcd--backups" }), "spec.destination.azure.container"},
		"azure key absolute":            {azure(func(d *etcdv1alpha1.AzureDestination) { d.Key = "/etcd" }), "key must not be empty or start with '/'"},
		"azure key over plain HTTP": {azure(func(d *etcdv1alpha1.AzureDestination) {
			d.Endpoint, d.CredentialsSecret = "http://blob.example.com:10000/acmebackups", &etcdv1alpha1.SecretReference{Name: "key"}
		}), "never sent over plain HTTP"},
		"gcs bucket uppercase":   {gcs(func(d *etcdv1alpha1.GCSDestination) { d.Bucket = "Backups" }), "spec.destination.gcs.bucket"},
		"gcs bucket goog":        {gcs(func(d *etcdv1alpha1.GCSDestination) { d.Bucket = "google-backups" }), "must not start with goog"},
		"gcs bucket too long":    {gcs(func(d *etcdv1alpha1.GCSDestination) { d.Bucket = strings.Repeat("b", 64) }), "without dots has at most 63"},
		"gcs key absolute":       {gcs(func(d *etcdv1alpha1.GCSDestination) { d.Key = "/etcd" }), "key must not be empty or start with '/'"},
		"gcs endpoint no scheme": {gcs(func(d *etcdv1alpha1.GCSDestination) { d.Endpoint = "storage.example.com" }), "endpoint is an http:// or https:// URL"},
		"gcs endpoint query":     {gcs(func(d *etcdv1alpha1.GCSDestination) { d.Endpoint = "https://storage.example.com/?x=1" }), "endpoint is an http:// or https:// URL"},
		"gcs key over plain HTTP": {gcs(func(d *etcdv1alpha1.GCSDestination) {
			d.Endpoint, d.CredentialsSecret = "http://fake-gcs:4443", &etcdv1alpha1.SecretReference{Name: "key"}
		}), "never sent over plain HTTP"},
		"endpoint with scheme":   {s3(func(d *etcdv1alpha1.S3Destination) { d.Endpoint = "https://s3.example.com" }), "endpoint is host[:port]"},
		"endpoint with path":     {s3(func(d *etcdv1alpha1.S3Destination) { d.Endpoint = "s3.example.com/bucket" }), "endpoint is host[:port]"},
		"endpoint with userinfo": {s3(func(d *etcdv1alpha1.S3Destination) { d.Endpoint = "admin:secret@s3.example.com" }), "endpoint is host[:port]"},
		"endpoint with query":    {s3(func(d *etcdv1alpha1.S3Destination) { d.Endpoint = "s3.example.com?x=1" }), "endpoint is host[:port]"},
		"bucket with slash":      {s3(func(d *etcdv1alpha1.S3Destination) { d.Bucket = "a/b/c" }), "spec.destination.s3.bucket"},
		"key absolute":           {s3(func(d *etcdv1alpha1.S3Destination) { d.Key = "/etcd" }), "key must not be empty or start with '/'"},
		"region with spaces":     {s3(func(d *etcdv1alpha1.S3Destination) { d.Region = "us east" }), "spec.destination.s3.region"},
		"no credentials secret":  {s3(func(d *etcdv1alpha1.S3Destination) { d.CredentialsSecret.Name = "" }), "credentialsSecret.name"},
	}
	for name, tt := range destinations {
		t.Run("EtcdBackup "+name, func(t *testing.T) {
			framework.Refused(t, framework.K8s.Create(ctx, framework.NewBackup(ns, "refused", "db", tt.d)), tt.want)
			requireNotStored(t, ns, &etcdv1alpha1.EtcdBackup{}, "refused")
		})
	}
	t.Run("EtcdBackup of another namespace's cluster", func(t *testing.T) {
		framework.Refused(t, framework.K8s.Create(ctx, framework.NewBackup(ns, "refused", "other-namespace/victim", pvc("x.db"))), "spec.clusterName")
		requireNotStored(t, ns, &etcdv1alpha1.EtcdBackup{}, "refused")
	})
	t.Run("EtcdBackup name too long for its labels", func(t *testing.T) {
		name := "b" + strings.Repeat("x", 63)
		framework.Refused(t, framework.K8s.Create(ctx, framework.NewBackup(ns, name, "db", pvc("x.db"))), "at most 63 characters")
		requireNotStored(t, ns, &etcdv1alpha1.EtcdBackup{}, name)
	})
	t.Run("EtcdBackup without cluster", func(t *testing.T) {
		framework.Refused(t, framework.K8s.Create(ctx, framework.NewBackup(ns, "refused", "", pvc("x.db"))), "spec.clusterName")
	})
	t.Run("EtcdBackup bad deletion policy", func(t *testing.T) {
		b := framework.NewBackup(ns, "refused", "db", pvc("x.db"))
		b.Spec.DeletionPolicy = "Shred"
		framework.Refused(t, framework.K8s.Create(ctx, b), "Unsupported value")
	})

	schedules := map[string]struct {
		mutate func(*etcdv1alpha1.EtcdBackupSchedule)
		want   string
	}{
		"four fields":    {func(s *etcdv1alpha1.EtcdBackupSchedule) { s.Spec.Schedule = "* * * *" }, "schedule must have five fields"},
		"six fields":     {func(s *etcdv1alpha1.EtcdBackupSchedule) { s.Spec.Schedule = "0 * * * * *" }, "schedule must have five fields"},
		"every second":   {func(s *etcdv1alpha1.EtcdBackupSchedule) { s.Spec.Schedule = "@every 1s" }, "at least 10s"},
		"huge schedule":  {func(s *etcdv1alpha1.EtcdBackupSchedule) { s.Spec.Schedule = huge }, "Too long"},
		"retention zero": {func(s *etcdv1alpha1.EtcdBackupSchedule) { s.Spec.Retention.MaxCount = ptr.To[int32](0) }, "maxCount"},
		"retention too young": {func(s *etcdv1alpha1.EtcdBackupSchedule) {
			s.Spec.Retention.MaxAge = &metav1.Duration{Duration: time.Second}
		}, "maxAge must be at least 1m"},
		"failed history huge":         {func(s *etcdv1alpha1.EtcdBackupSchedule) { s.Spec.FailedBackupsHistoryLimit = ptr.To[int32](1000) }, "failedBackupsHistoryLimit"},
		"path traversal":              {func(s *etcdv1alpha1.EtcdBackupSchedule) { s.Spec.Destination = pvc("..") }, "without '..'"},
		"bad concurrency":             {func(s *etcdv1alpha1.EtcdBackupSchedule) { s.Spec.ConcurrencyPolicy = "Replace" }, "Unsupported value"},
		"another namespace's cluster": {func(s *etcdv1alpha1.EtcdBackupSchedule) { s.Spec.ClusterName = "other-namespace/victim" }, "spec.clusterName"},
	}
	for name, tt := range schedules {
		t.Run("EtcdBackupSchedule "+name, func(t *testing.T) {
			s := &etcdv1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "refused"},
				Spec: etcdv1alpha1.EtcdBackupScheduleSpec{ClusterName: "db", Schedule: "@hourly", Destination: pvc("nightly")}}
			tt.mutate(s)
			framework.Refused(t, framework.K8s.Create(ctx, s), tt.want)
			requireNotStored(t, ns, &etcdv1alpha1.EtcdBackupSchedule{}, "refused")
		})
	}

	t.Run("EtcdBackup spec change", func(t *testing.T) {
		b := framework.NewBackup(ns, "fixed", "db", pvc("x.db"))
		if err := framework.K8s.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = framework.K8s.Delete(ctx, b) }()
		before := b.ResourceVersion
		b.Spec.Destination.PVC.Path = "y.db"
		framework.Refused(t, framework.K8s.Update(ctx, b), "spec is immutable")
		var after etcdv1alpha1.EtcdBackup
		if err := framework.K8s.Get(ctx, client.ObjectKeyFromObject(b), &after); err != nil {
			t.Fatal(err)
		}
		if after.ResourceVersion != before || after.Spec.Destination.PVC.Path != "x.db" {
			t.Fatalf("stored backup changed: %s %s", after.ResourceVersion, after.Spec.Destination.PVC.Path)
		}
	})
}

func requireNotStored(t *testing.T, ns string, obj client.Object, name string) {
	t.Helper()
	err := framework.K8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	if !apierrors.IsNotFound(err) {
		if err == nil {
			_ = framework.K8s.Delete(context.Background(), obj)
		}
		t.Fatalf("refused object %s: get says %v, want NotFound", name, err)
	}
}

// TestHostileUpdatesChangeNothing: every refused change to a running cluster leaves the stored object (same
// resourceVersion and generation) and the member Pods (same UIDs and resourceVersions) as they were.
func TestHostileUpdatesChangeNothing(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "hostile")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "steady", 1)
	c.Spec.Version = "3.5.35"
	c.Spec.Storage.Ephemeral = true
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	defer framework.DeleteAndCheckNothingLeft(t, c)
	key := client.ObjectKeyFromObject(c)
	framework.WaitAvailable(t, key, 3*time.Minute)
	// The Pod's readiness can trail etcd's own answer by a probe period; after it, nothing changes the Pod.
	framework.Poll(t, "member Pod ready", time.Minute, func() error {
		var list corev1.PodList
		if err := framework.K8s.List(ctx, &list, client.InNamespace(key.Namespace), client.MatchingLabels{resources.LabelCluster: key.Name}); err != nil {
			return err
		}
		if len(list.Items) != 1 || !framework.PodIsReady(&list.Items[0]) {
			return fmt.Errorf("%d Pods, not ready", len(list.Items))
		}
		return nil
	})
	var settled etcdv1alpha1.EtcdCluster
	if err := framework.K8s.Get(ctx, key, &settled); err != nil {
		t.Fatal(err)
	}
	pods, podsBefore := framework.MemberPodsState(t, &settled), framework.MemberPodsOf(t, &settled)

	updates := map[string]struct {
		mutate func(*etcdv1alpha1.EtcdCluster)
		want   string
	}{
		"even replicas":     {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 2 }, "replicas must be odd"},
		"eleven replicas":   {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = 11 }, "less than or equal to 9"},
		"negative replicas": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Replicas = -3 }, "greater than or equal to 1"},
		"two-minor jump with a pinned image": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Version, c.Spec.Image = "3.7.3", "registry.example/etcd:v3.7.3"
		}, "with spec.image set, version may go up by at most one minor version at a time"},
		"unsupported version": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Version = "3.4.30" }, "version must be an etcd release"},
		"ephemeral off":       {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.Ephemeral = false }, "ephemeral is immutable"},
		"storage class added": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.StorageClassName = ptr.To("fast") }, "storageClassName cannot change on an ephemeral cluster"},
		"bootstrap added": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{} },
			"bootstrap is immutable"},
		"election too short": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Etcd.HeartbeatIntervalMillis, c.Spec.Etcd.ElectionTimeoutMillis = ptr.To[int32](300), ptr.To[int32](1000)
		}, "at least 5 times"},
		"quota too big": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Etcd.QuotaBackendBytes = ptr.To(resource.MustParse("200Gi")) }, "quotaBackendBytes"},
	}
	for name, tt := range updates {
		t.Run(name, func(t *testing.T) {
			// The operator writes status meanwhile: a stale resourceVersion is a conflict, not the refusal under
			// test, so take the current object.
			var err error
			for attempt := 0; attempt < 5; attempt++ {
				var cur etcdv1alpha1.EtcdCluster
				if err = framework.K8s.Get(ctx, key, &cur); err != nil {
					t.Fatal(err)
				}
				tt.mutate(&cur)
				if err = framework.K8s.Update(ctx, &cur); !apierrors.IsConflict(err) {
					break
				}
			}
			framework.Refused(t, err, tt.want)
		})
	}
	t.Run("zero replicas by merge patch", func(t *testing.T) {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"))
		u.SetNamespace(key.Namespace)
		u.SetName(key.Name)
		framework.Refused(t, framework.K8s.Patch(ctx, u, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"replicas":0}}`))), "greater than or equal to 1")
	})

	var after etcdv1alpha1.EtcdCluster
	if err := framework.K8s.Get(ctx, key, &after); err != nil {
		t.Fatal(err)
	}
	if after.Generation != settled.Generation || after.Spec.Version != "3.5.35" || after.Spec.Replicas != 1 || !after.Spec.Storage.Ephemeral {
		t.Fatalf("stored spec changed by refused updates: generation %d -> %d, %+v", settled.Generation, after.Generation, after.Spec)
	}
	if now := framework.MemberPodsState(t, &after); fmt.Sprint(now) != fmt.Sprint(pods) {
		t.Fatalf("member Pods changed by refused updates: %v -> %v\n%s", pods, now, framework.PodChanges(podsBefore, framework.MemberPodsOf(t, &after)))
	}
}

// TestHostileSpecsCELCannotCatchAreReported: specs that pass admission but cannot run (an image that does not exist, a
// storage class that does not exist, placement no node satisfies) end in a Degraded condition that says why, in
// the kubelet's or the scheduler's words, and Steward deletes nothing: the member Pods and PVCs it created stay
// (same UIDs), even past spec.replaceUnhealthyAfter.
func TestHostileSpecsCELCannotCatchAreReported(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "hostile")
	framework.StartOperator(t, ns)
	cases := map[string]struct {
		mutate func(*etcdv1alpha1.EtcdCluster)
		want   string
	}{
		"noimage": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Image = "steward.invalid/etcd:v" + c.Spec.Version
			c.Spec.Storage.Ephemeral = true
		}, "Image"},
		"noclass": {func(c *etcdv1alpha1.EtcdCluster) { c.Spec.Storage.StorageClassName = ptr.To("does-not-exist") }, "Unschedulable"},
		// One member per node required, three members, one node they may run on (the test bed's others are
		// dedicated, see bedOptions): two cannot be placed.
		"antiaffinity": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Replicas = 3
			c.Spec.Pod.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{TopologyKey: resources.TopologyKeyHostname,
					LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{resources.LabelCluster: c.Name}}}}}}
		}, "anti-affinity"},
		// A required spread over a topology no node is labelled with: no node qualifies.
		"nospreadlabel": {func(c *etcdv1alpha1.EtcdCluster) {
			c.Spec.Pod.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "example.com/rack",
				WhenUnsatisfiable: corev1.DoNotSchedule, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{resources.LabelCluster: c.Name}}}}
		}, "topology spread"},
	}
	for name, tt := range cases {
		t.Run(name, func(t *testing.T) {
			c := framework.NewCluster(ns, name, 1)
			c.Spec.ReplaceUnhealthyAfter = &metav1.Duration{Duration: 10 * time.Second}
			tt.mutate(c)
			if err := framework.K8s.Create(ctx, c); err != nil {
				t.Fatal(err)
			}
			defer framework.DeleteAndCheckNothingLeft(t, c)
			key := client.ObjectKeyFromObject(c)
			var cur etcdv1alpha1.EtcdCluster
			// The kubelet's first pull (or the scheduler's first attempt) comes within seconds here; 4 minutes
			// covers a loaded CI machine, whose failure output then shows where the Pod was (docs/development/flakes.md).
			framework.Poll(t, "Degraded "+etcdv1alpha1.ReasonMemberPodsFailing, 4*time.Minute, func() error {
				if err := framework.K8s.Get(ctx, key, &cur); err != nil {
					return err
				}
				d := meta.FindStatusCondition(cur.Status.Conditions, etcdv1alpha1.ConditionDegraded)
				if d == nil || d.Status != metav1.ConditionTrue || d.Reason != etcdv1alpha1.ReasonMemberPodsFailing || !strings.Contains(d.Message, tt.want) {
					return fmt.Errorf("conditions: %s; %s", framework.Describe(&cur), framework.PodStates(&cur))
				}
				return nil
			})
			t.Logf("reported: %s", framework.Describe(&cur))
			before := framework.OwnedState(t, &cur)
			if len(before) == 0 {
				t.Fatal("no member Pod or PVC created")
			}
			// Past replaceUnhealthyAfter (10s) twice over: a member that never ran is not Steward's to replace.
			framework.RequireOwnedStateFor(t, &cur, before, 25*time.Second)
		})
	}
}

// TestHostileImageChangeReplacesNothing: spec.image changed on a running 3-member cluster to an image that does
// not exist. Steward restarts one follower on it, reports the Pod that cannot pull as Degraded/MemberPodsFailing,
// goes no further, and replaces nobody even past spec.replaceUnhealthyAfter (a successor would pull the same
// image, and the member's data would be lost over a typo). Setting the image back heals the member in place:
// the same members, IDs and Pods as before.
func TestHostileImageChangeReplacesNothing(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "hostile")
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "typo", 3)
	c.Spec.Storage.Ephemeral = true
	c.Spec.ReplaceUnhealthyAfter = &metav1.Duration{Duration: 10 * time.Second}
	if err := framework.K8s.Create(ctx, c); err != nil {
		t.Fatal(err)
	}
	defer framework.DeleteAndCheckNothingLeft(t, c)
	key := client.ObjectKeyFromObject(c)
	c = framework.WaitAvailable(t, key, 4*time.Minute)
	ids := framework.MemberIDs(c)
	pods := framework.OwnedState(t, c)

	setImage := func(image string) {
		t.Helper()
		framework.Poll(t, "set spec.image", time.Minute, func() error {
			var cur etcdv1alpha1.EtcdCluster
			if err := framework.K8s.Get(ctx, key, &cur); err != nil {
				return err
			}
			cur.Spec.Image = image
			return framework.K8s.Update(ctx, &cur)
		})
	}
	setImage("steward.invalid/etcd:v" + c.Spec.Version)
	var cur etcdv1alpha1.EtcdCluster
	framework.Poll(t, "Degraded "+etcdv1alpha1.ReasonMemberPodsFailing, 2*time.Minute, func() error {
		if err := framework.K8s.Get(ctx, key, &cur); err != nil {
			return err
		}
		d := meta.FindStatusCondition(cur.Status.Conditions, etcdv1alpha1.ConditionDegraded)
		if d == nil || d.Reason != etcdv1alpha1.ReasonMemberPodsFailing || !strings.Contains(d.Message, "Image") {
			return fmt.Errorf("conditions: %s; %s", framework.Describe(&cur), framework.PodStates(&cur))
		}
		return nil
	})
	t.Logf("reported: %s", framework.Describe(&cur))
	// Twice replaceUnhealthyAfter: the members, their IDs and Pods stay, and the cluster keeps its quorum.
	deadline := time.Now().Add(25 * time.Second)
	for time.Now().Before(deadline) {
		if err := framework.K8s.Get(ctx, key, &cur); err != nil {
			t.Fatal(err)
		}
		if now := framework.MemberIDs(&cur); fmt.Sprint(now) != fmt.Sprint(ids) {
			t.Fatalf("members changed while the image could not be pulled: %v -> %v (%s)", ids, now, framework.Describe(&cur))
		}
		if now := framework.OwnedState(t, &cur); fmt.Sprint(now) != fmt.Sprint(pods) {
			t.Fatalf("member Pods changed: %v -> %v", pods, now)
		}
		if !meta.IsStatusConditionTrue(cur.Status.Conditions, etcdv1alpha1.ConditionAvailable) {
			t.Fatalf("quorum lost: %s", framework.Describe(&cur))
		}
		time.Sleep(time.Second)
	}

	setImage("")
	healed := framework.WaitAvailable(t, key, 3*time.Minute)
	framework.Poll(t, "member healed in place", 2*time.Minute, func() error {
		if err := framework.K8s.Get(ctx, key, healed); err != nil {
			return err
		}
		if d := meta.FindStatusCondition(healed.Status.Conditions, etcdv1alpha1.ConditionDegraded); d == nil || d.Status != metav1.ConditionFalse {
			return fmt.Errorf("conditions: %s", framework.Describe(healed))
		}
		return nil
	})
	if now := framework.MemberIDs(healed); fmt.Sprint(now) != fmt.Sprint(ids) {
		t.Fatalf("members after healing %v, want the same as before %v", now, ids)
	}
	if now := framework.OwnedState(t, healed); fmt.Sprint(now) != fmt.Sprint(pods) {
		t.Fatalf("member Pods after healing %v, want the same as before %v", now, pods)
	}
}
