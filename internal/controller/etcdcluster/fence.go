package etcdcluster

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcdauth"
	"steward.dev/steward/internal/resources"
)

// A standby's write fence. etcd refuses every client write while each role but root holds only read
// permissions and no user but root and Steward's own identity holds the root role (etcdauth.Fence). What the
// fence takes, it records first, in the ConfigMap <cluster>-standby-fence, which is the controller's memory: the
// primary's roles and users came with the snapshot and must be given back exactly at promotion, and once a
// role is read-only etcd no longer tells what it was. Every run plans afresh from etcd and the record, so a run
// cut short between the record and the calls, or among the calls, is made whole by the next.

// The fence record's keys.
const (
	// fenceRecordKey holds etcdauth.FenceRecord as JSON.
	fenceRecordKey = "record"
	// fenceStateKey is fenceStateFencing while calls the record announces may still be unmade, fenceStateFenced
	// once every call was made.
	fenceStateKey     = "state"
	fenceStateFencing = "Fencing"
	fenceStateFenced  = "Fenced"
)

// fenceRecord is the fence's ConfigMap as read from the API server: cm nil when it does not exist.
type fenceRecord struct {
	cm     *corev1.ConfigMap
	record etcdauth.FenceRecord
}

// fenced reports whether every call of the fence was made.
func (f *fenceRecord) fenced() bool {
	return f.cm != nil && f.cm.Data[fenceStateKey] == fenceStateFenced
}

// readFence reads the fence's record past the cache: a record read stale would plan the fence from less than
// it took, and what the missing part took would never be given back.
func (r *Reconciler) readFence(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster) (*fenceRecord, error) {
	cm := &corev1.ConfigMap{}
	err := r.reader().Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: etcdv1alpha1.StandbyFenceName(cluster.Name)}, cm)
	switch {
	case apierrors.IsNotFound(err):
		return &fenceRecord{}, nil
	case err != nil:
		return nil, fmt.Errorf("get standby fence record: %w", err)
	case !metav1.IsControlledBy(cm, cluster):
		return nil, fmt.Errorf("ConfigMap %s exists and is not this cluster's: Steward does not take it over", cm.Name)
	}
	f := &fenceRecord{cm: cm}
	if raw := cm.Data[fenceRecordKey]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &f.record); err != nil {
			return nil, fmt.Errorf("standby fence record %s: %w", cm.Name, err)
		}
	}
	return f, nil
}

// writeFence writes record and state to the fence's ConfigMap: created, or updated at the version read (a
// conflict fails the pass rather than overwrite a record written meanwhile).
func (r *Reconciler) writeFence(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, f *fenceRecord, record etcdauth.FenceRecord, state string) error {
	raw, err := json.Marshal(record)
	if err != nil {
		return fmt.Errorf("standby fence record: %w", err)
	}
	data := map[string]string{fenceRecordKey: string(raw), fenceStateKey: state}
	if f.cm == nil {
		cm := &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: etcdv1alpha1.StandbyFenceName(cluster.Name),
				Labels:          map[string]string{resources.LabelStandby: cluster.Name, resources.LabelManagedBy: "steward"},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cluster, etcdv1alpha1.GroupVersion.WithKind("EtcdCluster"))}},
			Data: data,
		}
		if err := r.Client.Create(ctx, cm); err != nil {
			return fmt.Errorf("create standby fence record: %w", err)
		}
		f.cm = cm
	} else if !maps.Equal(f.cm.Data, data) {
		f.cm.Data = data
		if err := r.Client.Update(ctx, f.cm); err != nil {
			return fmt.Errorf("update standby fence record: %w", err)
		}
	}
	f.record = record
	return nil
}

// fenceExempt are the identities that keep the root role on a standby: root (Steward's client certificate's
// name by default, and the applier's) and Steward's own identity where it is another (a certificate of another
// common name, or the operator's password user).
func (r *Reconciler) fenceExempt(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) (map[string]bool, error) {
	exempt := map[string]bool{etcdauth.RootUser: true}
	if obs.operator.User != "" {
		exempt[obs.operator.User] = true
	}
	if resources.ClientCertAuth(cluster) {
		identity, err := r.clientIdentity(ctx, cluster)
		if err != nil {
			return nil, fmt.Errorf("standby fence: %w", err)
		}
		exempt[identity] = true
	}
	return exempt, nil
}

// fenceWrites makes etcd refuse client writes: plans the fence from etcd's roles and users and the record,
// writes the record, and only then makes the calls.
func (r *Reconciler) fenceWrites(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, f *fenceRecord) error {
	key := client.ObjectKeyFromObject(cluster).String()
	roles, users, err := r.Etcd.AuthStore(ctx, key, obs.endpoints)
	if err != nil {
		return fmt.Errorf("standby fence: %w", err)
	}
	exempt, err := r.fenceExempt(ctx, cluster, obs)
	if err != nil {
		return err
	}
	ops, record := etcdauth.Fence(roles, users, exempt, f.record)
	if err := r.writeFence(ctx, cluster, f, record, fenceStateFencing); err != nil {
		return err
	}
	if err := r.Etcd.ApplyFence(ctx, key, obs.endpoints, ops); err != nil {
		return fmt.Errorf("standby fence: %w", err)
	}
	if err := r.writeFence(ctx, cluster, f, record, fenceStateFenced); err != nil {
		return err
	}
	readOnly := slices.Sorted(maps.Keys(record.Roles))
	ctrl.LoggerFrom(ctx).Info("Fenced the standby's writes", "EtcdCluster", klog.KObj(cluster), "calls", len(ops),
		"readOnlyRoles", readOnly, "rootRevokedFrom", record.RootOf)
	r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "StandbyFenced",
		"etcd refuses client writes: roles made read-only %v, root role revoked from %v (recorded in ConfigMap %s, given back at promotion)",
		readOnly, record.RootOf, f.cm.Name)
	return nil
}

// openWrites gives back what the fence took (etcdauth.Unfence from the record) and deletes the record. Called
// only once the applier is gone and the promoted revision is recorded, so no write of a client can come before
// that revision.
func (r *Reconciler) openWrites(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, pass *standbyPass) error {
	f, err := r.readFence(ctx, cluster)
	if err != nil {
		return err
	}
	var ops []etcdauth.FenceOp
	if f.cm != nil {
		key := client.ObjectKeyFromObject(cluster).String()
		roles, users, err := r.Etcd.AuthStore(ctx, key, obs.endpoints)
		if err != nil {
			return fmt.Errorf("open writes: %w", err)
		}
		ops = etcdauth.Unfence(roles, users, f.record)
		if err := r.Etcd.ApplyFence(ctx, key, obs.endpoints, ops); err != nil {
			return fmt.Errorf("open writes: %w", err)
		}
		if err := r.Client.Delete(ctx, f.cm, client.Preconditions{UID: &f.cm.UID}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete standby fence record: %w", err)
		}
	}
	// Absent, the record was given back and deleted by a pass that ended before it recorded the promotion.
	pass.promotedRevision = cluster.Status.Standby.PromotedRevision
	ctrl.LoggerFrom(ctx).Info("Opened the promoted standby's writes", "EtcdCluster", klog.KObj(cluster), "calls", len(ops),
		"revision", pass.promotedRevision)
	r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "StandbyPromoted",
		"Promoted at revision %d: what the write fence took is given back (%d calls), an ordinary cluster open to writes", pass.promotedRevision, len(ops))
	return nil
}
