package etcdbackup

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/resources"
)

// TestCredentialsAreReferencedNeverCopied: the values of an S3 credentials Secret reach neither the backup's
// status, nor its Job (which references the Secret), nor Events, nor the controller's log, whether the Secret is
// complete (the backup starts) or lacks a key (the backup fails with a message naming the key, not a value).
func TestCredentialsAreReferencedNeverCopied(t *testing.T) {
	const accessKey, secretKey = "AKIAHOSTILEEXAMPLE", "s3cr3t-v4lue-that-must-never-leak"
	tests := map[string]struct {
		data    map[string][]byte
		started bool
	}{
		"complete Secret": {map[string][]byte{etcdv1alpha1.S3AccessKeyIDKey: []byte(accessKey), etcdv1alpha1.S3SecretAccessKeyKey: []byte(secretKey)}, true},
		// A misspelt key: the value is there, under the wrong name.
		"misspelt key": {map[string][]byte{etcdv1alpha1.S3AccessKeyIDKey: []byte(accessKey), "secretaccesskey": []byte(secretKey)}, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			b := pvcBackup(etcdv1alpha1.DeletionPolicyRetain)
			b.Spec.Destination = etcdv1alpha1.BackupDestination{S3: &etcdv1alpha1.S3Destination{Endpoint: "s3:9000", Bucket: "bkt", Key: "etcd/",
				CredentialsSecret: &etcdv1alpha1.SecretReference{Name: "creds"}}}
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "creds"}, Data: tt.data}
			r, c := newReconciler(t, cluster(), b, secret)
			events := record.NewFakeRecorder(100)
			r.Recorder = events
			var logs strings.Builder
			ctx := ctrl.LoggerInto(context.Background(), funcr.New(func(prefix, args string) {
				logs.WriteString(prefix + " " + args + "\n")
			}, funcr.Options{Verbosity: 10}))
			for i := 0; i < 3; i++ {
				if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(b)}); err != nil {
					t.Fatalf("reconcile: %v", err)
				}
			}
			var got etcdv1alpha1.EtcdBackup
			get(t, c, &got, b.Name)
			var jobs batchv1.JobList
			if err := c.List(context.Background(), &jobs); err != nil {
				t.Fatal(err)
			}
			if started := len(jobs.Items) > 0; started != tt.started {
				t.Fatalf("Job started: %v, want %v (status %+v)", started, tt.started, got.Status.Conditions)
			}
			close(events.Events)
			var recorded []string
			for e := range events.Events {
				recorded = append(recorded, e)
			}
			status, _ := json.Marshal(got.Status)
			job, _ := json.Marshal(jobs.Items)
			for what, out := range map[string]string{"status": string(status), "Job": string(job), "events": fmt.Sprint(recorded), "log": logs.String()} {
				for _, v := range []string{accessKey, secretKey} {
					if strings.Contains(out, v) {
						t.Errorf("a credential value is in the %s: %s", what, out)
					}
				}
			}
			if tt.started && !strings.Contains(logs.String(), "Starting backup Job") {
				t.Errorf("the controller's log was not captured: %q", logs.String())
			}
			if !tt.started && !strings.Contains(string(status), "has no key secretAccessKey") {
				t.Errorf("failure does not name the missing key: %s", status)
			}
			for _, j := range jobs.Items {
				for _, e := range j.Spec.Template.Spec.Containers[0].Env {
					if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "creds" {
						t.Errorf("Job %s env %s does not reference the Secret", j.Name, e.Name)
					}
				}
				if j.Labels[resources.LabelBackup] != b.Name {
					t.Errorf("Job %s not labelled with its backup", j.Name)
				}
			}
		})
	}
}
