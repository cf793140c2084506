package etcdbackup

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
)

// terminatingNamespace is the API server's refusal of a new object in a namespace being deleted.
func terminatingNamespace(obj client.Object) error {
	err := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, obj.GetName(),
		errors.New("unable to create new content in namespace ns because it is being terminated"))
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause, Message: "namespace ns is being terminated", Field: "metadata.namespace"}}
	return err
}

// TestFinalizerNeverHoldsTheObject: the finalizer of a committed Delete-policy backup lets its EtcdBackup go in
// every case a namespace's deletion (or a missing destination, or an unreachable one) brings, deleting what it can
// and reporting what it leaves behind, within the passes a controller makes, without a human.
func TestFinalizerNeverHoldsTheObject(t *testing.T) {
	s3Dest := etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Endpoint: "s3:9000", Bucket: "bkt", Key: "etcd/b1.db",
		CredentialsSecret: &etcdv1alpha1.SecretReference{Name: "creds"}}}
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"},
		Data: map[string][]byte{etcdv1alpha1.S3AccessKeyIDKey: []byte("AKIAEXAMPLE"), etcdv1alpha1.S3SecretAccessKeyKey: []byte("s3cr3t")}}
	claim := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backups"}}
	gcsKey := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "gcs-key"},
		Data: map[string][]byte{etcdv1alpha1.GCSServiceAccountKey: []byte(`{"type":"service_account","private_key":"s3cr3t"}`)}}
	gcsDest := func(secret bool) etcdv1alpha1.BackupDestination {
		d := etcdv1alpha1.BackupDestination{GCS: &etcdv1alpha1.GCSDestination{Bucket: "bkt", Key: "etcd/b1.db", ServiceAccountName: "etcd-backup"}}
		if secret {
			d.GCS.CredentialsSecret = &etcdv1alpha1.SecretReference{Name: "gcs-key"}
		}
		return d
	}
	azureKey := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "azure-key"},
		Data: map[string][]byte{etcdv1alpha1.AzureSASTokenKey: []byte("sv=2021-08-06&sig=s3cr3t")}}
	azureDest := func(secret bool) etcdv1alpha1.BackupDestination {
		d := etcdv1alpha1.BackupDestination{Azure: &etcdv1alpha1.AzureDestination{StorageAccount: "acct", Container: "bkt", Key: "etcd/b1.db", ServiceAccountName: "etcd-backup"}}
		if secret {
			d.Azure.CredentialsSecret = &etcdv1alpha1.SecretReference{Name: "azure-key"}
		}
		return d
	}
	tests := []struct {
		name        string
		s3          bool
		gcs         string // "key" (a credentials Secret) or "ambient" (Workload Identity)
		azure       string // the same for Azure
		objs        []client.Object
		terminating bool
		deleteErr   error
		since       time.Duration
		failingJob  bool
		wantEvent   string
		wantDirect  bool
	}{
		{name: "terminating namespace, S3 with its Secret: deleted directly", s3: true, objs: []client.Object{creds}, terminating: true,
			wantEvent: "SnapshotDeleted", wantDirect: true},
		{name: "terminating namespace, S3 unreachable", s3: true, objs: []client.Object{creds}, terminating: true,
			deleteErr: errors.New("dial tcp s3:9000: connection refused (key s3cr3t)"), wantEvent: "SnapshotLeftBehind", wantDirect: true},
		{name: "terminating namespace, S3 Secret gone", s3: true, terminating: true, wantEvent: "SnapshotLeftBehind"},
		{name: "terminating namespace, GCS with its key file: deleted directly", gcs: "key", objs: []client.Object{gcsKey}, terminating: true,
			wantEvent: "SnapshotDeleted", wantDirect: true},
		{name: "terminating namespace, GCS key file gone", gcs: "key", terminating: true, wantEvent: "SnapshotLeftBehind"},
		{name: "terminating namespace, GCS through Workload Identity", gcs: "ambient", terminating: true, wantEvent: "SnapshotLeftBehind"},
		{name: "terminating namespace, Azure with its SAS token: deleted directly", azure: "key", objs: []client.Object{azureKey}, terminating: true,
			wantEvent: "SnapshotDeleted", wantDirect: true},
		{name: "terminating namespace, Azure Secret without either key", azure: "key", terminating: true,
			objs:      []client.Object{&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "azure-key"}, Data: map[string][]byte{"key": []byte("s3cr3t")}}},
			wantEvent: "SnapshotLeftBehind"},
		{name: "terminating namespace, Azure through workload identity", azure: "ambient", terminating: true, wantEvent: "SnapshotLeftBehind"},
		{name: "terminating namespace, PVC", objs: []client.Object{claim}, terminating: true, wantEvent: "SnapshotLeftBehind"},
		{name: "claim gone", wantEvent: "SnapshotLeftBehind"},
		{name: "Secret gone", s3: true, wantEvent: "SnapshotLeftBehind"},
		{name: "deletion failing past the bound", objs: []client.Object{claim}, since: backup.DeletionGiveUpAfter, failingJob: true,
			wantEvent: "SnapshotLeftBehind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			b := pvcBackup(etcdv1alpha1.DeletionPolicyDelete)
			if tt.s3 {
				b.Spec.Destination = *s3Dest.DeepCopy()
			}
			if tt.gcs != "" {
				b.Spec.Destination = gcsDest(tt.gcs == "key")
			}
			if tt.azure != "" {
				b.Spec.Destination = azureDest(tt.azure == "key")
			}
			b.Finalizers = []string{Finalizer}
			b.Status.Location = "somewhere://b1.db"
			s := runtime.NewScheme()
			if err := clientgoscheme.AddToScheme(s); err != nil {
				t.Fatal(err)
			}
			if err := etcdv1alpha1.AddToScheme(s); err != nil {
				t.Fatal(err)
			}
			objs := append([]client.Object{cluster(), b}, tt.objs...)
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
				WithStatusSubresource(&etcdv1alpha1.EtcdBackup{}, &batchv1.Job{}, &corev1.Pod{}).
				WithInterceptorFuncs(interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
					if _, ok := obj.(*batchv1.Job); ok && tt.terminating {
						return terminatingNamespace(obj)
					}
					return c.Create(ctx, obj, opts...)
				}}).Build()
			events := record.NewFakeRecorder(100)
			clock := time.Now()
			direct := 0
			r := &Reconciler{Client: c, APIReader: c, Recorder: events, AgentImage: "agent:test", Now: func() time.Time { return clock },
				DeleteObject: func(_ context.Context, cfg backup.S3Config) error {
					direct++
					if cfg.Bucket != "bkt" || cfg.Key != "etcd/b1.db" || cfg.SecretAccessKey != "s3cr3t" {
						t.Errorf("direct deletion of %+v", cfg)
					}
					return tt.deleteErr
				},
				DeleteGCSObject: func(_ context.Context, cfg backup.GCSConfig, key string) error {
					direct++
					if cfg.Bucket != "bkt" || key != "etcd/b1.db" || !strings.Contains(string(cfg.CredentialsJSON), "s3cr3t") {
						t.Errorf("direct deletion of %s in %+v", key, cfg)
					}
					return tt.deleteErr
				},
				DeleteAzureBlob: func(_ context.Context, cfg backup.AzureConfig, key string) error {
					direct++
					if cfg.Account != "acct" || cfg.Container != "bkt" || key != "etcd/b1.db" || cfg.SASToken != "sv=2021-08-06&sig=s3cr3t" || cfg.AccountKey != "" {
						t.Errorf("direct deletion of %s in %+v", key, cfg)
					}
					return tt.deleteErr
				}}
			if err := c.Delete(ctx, b); err != nil {
				t.Fatal(err)
			}
			get(t, c, b, "b1")
			clock = b.DeletionTimestamp.Add(tt.since)
			for pass := 0; pass < 4; pass++ {
				reconcile(t, r)
				if err := c.Get(ctx, client.ObjectKeyFromObject(b), b); apierrors.IsNotFound(err) {
					break
				}
				if tt.failingJob {
					finishJob(t, c, "b1-delete", batchv1.JobFailed, string(backup.Encode(backup.Result{Reason: etcdv1alpha1.ReasonUploadFailed, Message: "read-only file system"})))
				}
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(b), b); !apierrors.IsNotFound(err) {
				t.Fatalf("EtcdBackup still held: %v %+v", err, b.ObjectMeta)
			}
			if (direct > 0) != tt.wantDirect {
				t.Fatalf("%d direct deletions, want any: %v", direct, tt.wantDirect)
			}
			var all []string
			for len(events.Events) > 0 {
				all = append(all, <-events.Events)
			}
			got := strings.Join(all, "\n")
			if !strings.Contains(got, tt.wantEvent) || strings.Contains(got, "s3cr3t") {
				t.Fatalf("events %q, want %s and no credential", got, tt.wantEvent)
			}
			if tt.wantEvent == "SnapshotLeftBehind" && !strings.Contains(got, "somewhere://b1.db") {
				t.Fatalf("events %q do not name what is left behind", got)
			}
		})
	}
}
