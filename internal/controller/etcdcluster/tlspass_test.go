package etcdcluster

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/plan"
)

// prepareTLS is a pass's TLS up to observing etcd: the Pods as the pass reads them, plan.DecideTLS, the first act
// stage (ensureTLSMaterial), and the Wait they impose on the plan.
func (r *Reconciler) prepareTLS(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster) (*tlsState, *plan.Action, error) {
	objs, err := r.observeObjects(ctx, cluster)
	if err != nil {
		return nil, nil, err
	}
	d := plan.DecideTLS(tlsSpecOf(cluster), tlsPodsOf(cluster, objs.pods))
	ts, err := r.ensureTLSMaterial(ctx, cluster, objs.pods, d)
	return ts, tlsBlocked(d, ts), err
}

// tlsWait is plan.DecideTLS's Wait for the cluster and its Pods: a legacy plaintext cluster's or mixed providers'.
func tlsWait(cluster *etcdv1alpha1.EtcdCluster, pods []corev1.Pod) (plan.Action, bool) {
	d := plan.DecideTLS(tlsSpecOf(cluster), tlsPodsOf(cluster, pods))
	if d.Wait == nil {
		return plan.Action{}, false
	}
	return *d.Wait, true
}
