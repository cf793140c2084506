package etcdbackup

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/resources"
)

// startStandbySeed admits a standby seed (spec.standbySeed) and starts its Job, in the etcd image of the standby's
// release (spec.clusterName): the agent finds the snapshot in the primary's schedule directory and reports its
// record, which writeStatus keeps like any backup's (status.path naming the object found).
func (r *Reconciler) startStandbySeed(ctx context.Context, b *etcdv1alpha1.EtcdBackup, o *outcome) error {
	cluster := &etcdv1alpha1.EtcdCluster{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterName}, cluster); {
	case apierrors.IsNotFound(err):
		o.notAdmitted(backup.Refuse, etcdv1alpha1.ReasonClusterNotFound, fmt.Sprintf("EtcdCluster %s (the standby to seed) does not exist", b.Spec.ClusterName))
		return nil
	case err != nil:
		return fmt.Errorf("get EtcdCluster: %w", err)
	}
	problem, err := r.destinationProblem(ctx, b)
	if err != nil {
		return err
	}
	if problem != "" {
		o.notAdmitted(backup.Refuse, etcdv1alpha1.ReasonDestinationNotFound, problem)
		return nil
	}
	keyProblem, err := EncryptionKeyProblem(ctx, r.APIReader, b.Namespace, b.Spec.Encryption)
	if err != nil {
		return err
	}
	if keyProblem != "" {
		o.notAdmitted(backup.Refuse, etcdv1alpha1.ReasonEncryptionKeyNotFound, keyProblem)
		return nil
	}
	job := resources.StandbySeedJob(b, resources.ImageFor(cluster, cluster.Spec.Version, r.Options), r.AgentImage)
	ctrl.LoggerFrom(ctx).Info("Starting standby seed Job", "EtcdBackup", klog.KObj(b), "job", job.Name, "primary", b.Spec.StandbySeed.ClusterName)
	if err := r.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create standby seed Job: %w", err)
	}
	r.Recorder.Eventf(b, corev1.EventTypeNormal, "Started", "Job %s looks for the newest snapshot of %s that its continuous backup continues, at %s",
		job.Name, b.Spec.StandbySeed.ClusterName, resources.DestinationPath(b.Spec.Destination))
	o.phase, o.started = phaseRunning, true
	return nil
}
