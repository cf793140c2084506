package framework

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// FromBackup is a NewCluster bootstrapped from the EtcdBackup backupName.
func FromBackup(ns, name string, replicas int32, backupName string) *etcdv1alpha1.EtcdCluster {
	c := NewCluster(ns, name, replicas)
	c.Spec.Bootstrap = &etcdv1alpha1.BootstrapSpec{FromBackup: &etcdv1alpha1.BackupSource{BackupName: backupName}}
	return c
}

// NewRestore is an EtcdRestore ns/name of EtcdBackup backupName into cluster; the caller creates it.
func NewRestore(ns, name, cluster, backupName string) *etcdv1alpha1.EtcdRestore {
	return &etcdv1alpha1.EtcdRestore{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: etcdv1alpha1.EtcdRestoreSpec{ClusterName: cluster, BackupName: backupName}}
}

// RequireRestoreReason fails t unless restore r's condition condType is True with reason, and logs its message.
func RequireRestoreReason(t *testing.T, r *etcdv1alpha1.EtcdRestore, condType, reason string) {
	t.Helper()
	c := meta.FindStatusCondition(r.Status.Conditions, condType)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != reason {
		t.Fatalf("restore %s: %s is %+v, want True/%s", r.Name, condType, c, reason)
	}
	t.Logf("restore %s: %s/%s: %s", r.Name, condType, c.Reason, c.Message)
}

// WaitRestoreFinished waits until the EtcdRestore key is Complete or Failed and returns it.
func WaitRestoreFinished(t *testing.T, key client.ObjectKey, timeout time.Duration) *etcdv1alpha1.EtcdRestore {
	t.Helper()
	var r etcdv1alpha1.EtcdRestore
	Poll(t, "EtcdRestore "+key.String()+" finished", timeout, func() error {
		if err := K8s.Get(context.Background(), key, &r); err != nil {
			return err
		}
		if meta.IsStatusConditionTrue(r.Status.Conditions, etcdv1alpha1.ConditionComplete) ||
			meta.IsStatusConditionTrue(r.Status.Conditions, etcdv1alpha1.ConditionFailed) {
			return nil
		}
		return fmt.Errorf("conditions %v", r.Status.Conditions)
	})
	return &r
}
