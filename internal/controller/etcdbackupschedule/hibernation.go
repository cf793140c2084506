package etcdbackupschedule

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// While a schedule's cluster hibernates (etcdv1alpha1.Hibernating: from the moment its spec asks for it until it
// is Available again after resuming) no member runs: a backup would only fail, and the follower would only
// retry. So the schedule pauses: due times pass without a backup (and are not caught up at resume), the follower
// is removed (its stored segments stay, and so does status.continuous: the window it names is still recoverable),
// and Ready and ContinuousBackup say Hibernated. When the cluster is Available again both resume on their own.

// hibernationOf is the cluster's hibernation phase, and whether its schedules pause. A cluster whose spec has
// just asked for hibernation has no status.hibernation yet: it is Hibernating already, as far as backups go.
func hibernationOf(cluster *etcdv1alpha1.EtcdCluster) (etcdv1alpha1.HibernationPhase, bool) {
	if cluster == nil || !etcdv1alpha1.Hibernating(cluster) {
		return "", false
	}
	if h := cluster.Status.Hibernation; h != nil && h.Phase != "" {
		return h.Phase, true
	}
	return etcdv1alpha1.HibernationHibernating, true
}

// hibernatedReadyMessage is Ready's message while the cluster hibernates; next is the next scheduled time.
func hibernatedReadyMessage(cluster *etcdv1alpha1.EtcdCluster, phase etcdv1alpha1.HibernationPhase, next time.Time) string {
	return fmt.Sprintf("EtcdCluster %s is hibernated (phase %s): no backups until it resumes; the next after that at %s",
		cluster.Name, phase, next.UTC().Format(time.RFC3339))
}

// hibernatedContinuousMessage is ContinuousBackup's message while the cluster hibernates.
func hibernatedContinuousMessage(cluster *etcdv1alpha1.EtcdCluster, phase etcdv1alpha1.HibernationPhase) string {
	return fmt.Sprintf("EtcdCluster %s is hibernated (phase %s): the follower is stopped and its segments kept; "+
		"the recoverable window in status.continuous stays valid, and the follower starts again once the cluster is Available", cluster.Name, phase)
}

// schedulesOf maps an EtcdCluster to the schedules of it, from the cache: a namespace holds few schedules, so
// they are filtered here rather than through a field index.
func schedulesOf(c client.Reader) func(ctx context.Context, o client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var list etcdv1alpha1.EtcdBackupScheduleList
		if err := c.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
			return nil
		}
		var reqs []reconcile.Request
		for i := range list.Items {
			if s := &list.Items[i]; s.Spec.ClusterName == o.GetName() {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
			}
		}
		return reqs
	}
}

// clusterHibernationChanged passes the cluster updates that pause or resume its schedules: hibernation asked
// for or lifted, and each phase it goes through (the messages name it). A cluster's status changes on most of
// its passes, and each schedule pass reads the follower, so the rest is left to the schedule's own requeue.
// Creation and deletion pass too: a schedule waits for its cluster to exist.
var clusterHibernationChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, okOld := e.ObjectOld.(*etcdv1alpha1.EtcdCluster)
	n, okNew := e.ObjectNew.(*etcdv1alpha1.EtcdCluster)
	if !okOld || !okNew {
		return true
	}
	po, ho := hibernationOf(o)
	pn, hn := hibernationOf(n)
	return ho != hn || po != pn
}}
