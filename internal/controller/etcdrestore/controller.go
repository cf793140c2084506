// Package etcdrestore is the EtcdRestore controller. A restore is shaped Admit -> Verify -> Hand over -> Done:
// admission checks the cluster, the backup and (to re-seed a formed cluster) the confirmation and the loss of
// quorum (internal/backup.DecideRestore decides); a Job running steward-agent then reads the stored snapshot to
// the end and checks it against the backup's size and sha256 and etcd's own checksum. Only a verified restore is
// acted on, by the EtcdCluster controller, which alone creates and deletes member Pods: it stops the old members
// (a re-seed) and starts new ones whose init containers restore the snapshot. This controller reports progress
// and decides when the restore is done (every member from the snapshot, the cluster available) or failed.
package etcdrestore

import (
	"context"
	"fmt"
	"path"
	"sort"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/controller/agentjob"
	"steward.dev/steward/internal/controller/etcdbackup"
	"steward.dev/steward/internal/metrics"
	"steward.dev/steward/internal/resources"
)

// Requeue intervals: member Pods and the cluster's status change without an event on the restore.
const (
	requeueWaiting   = 5 * time.Second
	requeueRestoring = 3 * time.Second
)

// Reconciler reconciles EtcdRestores.
type Reconciler struct {
	Client client.Client
	// APIReader reads the verify Job's Pod past the cache (see agentjob.TerminationMessage).
	APIReader  client.Reader
	Recorder   record.EventRecorder
	AgentImage string
	// Now is the clock (injected for tests).
	Now func() time.Time
}

// The least this controller's code uses: it reads EtcdRestores, EtcdBackups, EtcdClusters, member Pods and PVCs
// (to count the members started from the snapshot and the volumes set aside) and patches restores' status; it
// creates the verify Job, owned by the restore with blockOwnerDeletion (hence etcdrestores/finalizers), and reads
// the Job's Pod for its result. It patches the EtcdBackup it restores to hold it (a finalizer) while it runs.
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdrestores,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdrestores/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdrestores/finalizers,verbs=update
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdbackups,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdbackupschedules,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create
// +kubebuilder:rbac:groups="",resources=pods;persistentvolumeclaims,verbs=get;list;watch

// SetupWithManager registers the controller: it watches EtcdRestores, their verify Jobs and those Jobs' Pods,
// and the EtcdClusters they restore (mapped back by spec.clusterName).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.AgentImage == "" {
		r.AgentImage = agentjob.DefaultImage
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1alpha1.EtcdRestore{}).
		Owns(&batchv1.Job{}).
		Owns(&etcdv1alpha1.EtcdBackup{}).
		Watches(&corev1.Pod{}, agentjob.PodsOf(resources.LabelRestore)).
		Watches(&etcdv1alpha1.EtcdCluster{}, handler.EnqueueRequestsFromMapFunc(r.restoresOf)).
		Named("etcdrestore").
		Complete(r)
}

// restoresOf maps a cluster to its unfinished restores.
func (r *Reconciler) restoresOf(ctx context.Context, o client.Object) []reconcile.Request {
	var list etcdv1alpha1.EtcdRestoreList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Spec.ClusterName == o.GetName() && !etcdv1alpha1.Finished(list.Items[i].Status.Conditions) {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: list.Items[i].Name}})
		}
	}
	return out
}

// Reconcile runs one pass: gather, decide, act, and write status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rs := &etcdv1alpha1.EtcdRestore{}
	if err := r.Client.Get(ctx, req.NamespacedName, rs); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !rs.DeletionTimestamp.IsZero() || etcdv1alpha1.Finished(rs.Status.Conditions) {
		return ctrl.Result{}, nil
	}
	p, err := r.decide(ctx, rs)
	if err != nil {
		return ctrl.Result{}, err
	}

	before := rs.DeepCopy()
	now := metav1.NewTime(r.Now())
	recordInputs(rs, p, now)
	requeue, ended, err := r.act(ctx, rs, p, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.fillMembers(ctx, rs, p.members); err != nil {
		return ctrl.Result{}, err
	}
	// The write that ends the restore carries the resourceVersion read: if the cache was behind (a previous pass
	// already ended it), it fails and the retry sees the restore finished. So a restore is counted, and its
	// Event recorded, once.
	patch := client.MergeFrom(before)
	if ended != nil {
		patch = client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
	}
	if err := r.Client.Status().Patch(ctx, rs, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("write status: %w", err)
	}
	if ended != nil {
		ended()
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// restorePass is one pass's decision and what it was made from.
type restorePass struct {
	d backup.RestoreDecision
	// pitBackup names the backup a point-in-time restore starts from, once chosen.
	pitBackup string
	cluster   *etcdv1alpha1.EtcdCluster
	b         *etcdv1alpha1.EtcdBackup
	members   []string
}

// decide prepares a point-in-time restore's backup, gathers the input and picks the step, then holds the
// backup's snapshot for as long as the restore may still read it.
func (r *Reconciler) decide(ctx context.Context, rs *etcdv1alpha1.EtcdRestore) (restorePass, error) {
	var p restorePass
	var pitStep *backup.RestoreDecision
	if rs.Spec.PointInTime != nil {
		var err error
		if p.pitBackup, pitStep, err = r.preparePointInTime(ctx, rs); err != nil {
			return p, err
		}
	}
	in, cluster, b, members, err := r.gather(ctx, rs)
	if err != nil {
		return p, err
	}
	p.cluster, p.b, p.members = cluster, b, members
	d := backup.DecideRestore(in)
	if pitStep != nil {
		// More precise than DecideRestore's view of a backup just created (not in the cache yet) or failed.
		d = *pitStep
	}
	p.d = d
	ctrl.LoggerFrom(ctx).V(1).Info("Restore step", "EtcdRestore", klog.KObj(rs), "step", d.Step, "reason", d.Reason, "message", d.Message)
	if b != nil && d.Step != backup.RestoreRefuse && d.Step != backup.RestoreDone {
		// Until this restore ends, its backup's snapshot is neither deleted with the backup nor retired by
		// retention (the EtcdBackup controller lets go once it has ended, or is gone).
		if err := etcdbackup.Hold(ctx, r.Client, b); err != nil {
			return p, err
		}
	}
	return p, nil
}

// recordInputs writes into status what the pass started from: when, in which mode, from which snapshot, and
// the cluster ID a reseed replaces (kept from the first pass that saw it, since the reseed changes it).
func recordInputs(rs *etcdv1alpha1.EtcdRestore, p restorePass, now metav1.Time) {
	st := &rs.Status
	d := p.d
	if st.StartTime == nil {
		st.StartTime = &now
	}
	if d.Mode != "" {
		st.Mode = etcdv1alpha1.RestoreMode(d.Mode)
	}
	st.ObservedGeneration = rs.Generation
	if p.pitBackup != "" {
		st.PointInTimeBackup = p.pitBackup
	}
	if b := p.b; b != nil {
		st.Location, st.SHA256, st.SizeBytes, st.Revision = b.Status.Location, b.Status.SHA256, b.Status.SizeBytes, b.Status.Revision
	}
	if p.cluster != nil && st.PreviousClusterID == "" && d.Mode == backup.ModeReseed && d.Step != backup.RestoreRefuse {
		st.PreviousClusterID = p.cluster.Status.ClusterID
	}
}

// act takes the decided step and sets the conditions that say so. It returns when to look again, and for a
// restore that ends in this pass, ended: what records the end (metric, Event, log), to run only once the
// status that says so is written.
func (r *Reconciler) act(ctx context.Context, rs *etcdv1alpha1.EtcdRestore, p restorePass, now metav1.Time) (time.Duration, func(), error) {
	log := ctrl.LoggerFrom(ctx)
	st := &rs.Status
	d, b, cluster := p.d, p.b, p.cluster
	set := func(t string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: rs.Generation, LastTransitionTime: now})
	}
	requeue := time.Duration(0)
	var ended func()
	switch d.Step {
	case backup.RestoreWait:
		set(etcdv1alpha1.ConditionComplete, metav1.ConditionFalse, d.Reason, d.Message)
		set(etcdv1alpha1.ConditionFailed, metav1.ConditionFalse, d.Reason, d.Message)
		requeue = requeueWaiting
	case backup.RestoreRefuse:
		set(etcdv1alpha1.ConditionFailed, metav1.ConditionTrue, d.Reason, d.Message)
		set(etcdv1alpha1.ConditionComplete, metav1.ConditionFalse, d.Reason, d.Message)
		st.CompletionTime = &now
		ended = func() {
			metrics.RestoreEnded(rs.Namespace, rs.Spec.ClusterName, metrics.ResultFailed, d.Reason)
			r.Recorder.Event(rs, corev1.EventTypeWarning, d.Reason, d.Message)
			log.Info("Restore failed", "EtcdRestore", klog.KObj(rs), "cluster", rs.Spec.ClusterName, "reason", d.Reason, "message", d.Message)
		}
	case backup.RestoreSafetyBackup:
		if err := r.ensureSafetyBackup(ctx, rs, b); err != nil {
			return 0, nil, err
		}
		st.SafetyBackup = SafetyBackupName(rs)
		set(etcdv1alpha1.ConditionComplete, metav1.ConditionFalse, d.Reason, d.Message)
		set(etcdv1alpha1.ConditionFailed, metav1.ConditionFalse, d.Reason, d.Message)
		requeue = requeueWaiting
	case backup.RestoreVerify:
		if err := r.ensureVerifyJob(ctx, rs, b); err != nil {
			return 0, nil, err
		}
		st.VerifyJobName = resources.VerifyJobName(rs)
		set(etcdv1alpha1.ConditionVerified, metav1.ConditionFalse, d.Reason, d.Message)
		set(etcdv1alpha1.ConditionComplete, metav1.ConditionFalse, d.Reason, d.Message)
		set(etcdv1alpha1.ConditionFailed, metav1.ConditionFalse, d.Reason, d.Message)
		requeue = requeueWaiting
	case backup.RestoreHandOver:
		if !meta.IsStatusConditionTrue(st.Conditions, etcdv1alpha1.ConditionVerified) {
			msg := fmt.Sprintf("%s matches its backup's size and sha256 and etcd's own checksum", b.Status.Location)
			set(etcdv1alpha1.ConditionVerified, metav1.ConditionTrue, etcdv1alpha1.ReasonRestoreSucceeded, msg)
			r.Recorder.Eventf(rs, corev1.EventTypeNormal, "Verified", "Snapshot %s", msg)
		}
		set(etcdv1alpha1.ConditionComplete, metav1.ConditionFalse, d.Reason, d.Message)
		set(etcdv1alpha1.ConditionFailed, metav1.ConditionFalse, d.Reason, d.Message)
		requeue = requeueRestoring
	case backup.RestoreDone:
		set(etcdv1alpha1.ConditionComplete, metav1.ConditionTrue, d.Reason, d.Message)
		set(etcdv1alpha1.ConditionFailed, metav1.ConditionFalse, d.Reason, d.Message)
		st.CompletionTime = &now
		st.ClusterID = cluster.Status.ClusterID
		ended = func() {
			metrics.RestoreEnded(rs.Namespace, rs.Spec.ClusterName, metrics.ResultComplete, "")
			r.Recorder.Event(rs, corev1.EventTypeNormal, "Restored", d.Message)
			log.Info("Restore complete", "EtcdRestore", klog.KObj(rs), "cluster", rs.Spec.ClusterName, "clusterID", st.ClusterID)
		}
	}
	return requeue, ended, nil
}

// gather reads what DecideRestore needs, from the cache (the verify Job's Pod past it; the cluster and the backup
// from the API server too when the cache does not have them, etcdbackup.GetConfirmed).
// It also returns the names of the member Pods started from this restore.
func (r *Reconciler) gather(ctx context.Context, rs *etcdv1alpha1.EtcdRestore) (backup.RestoreInput, *etcdv1alpha1.EtcdCluster, *etcdv1alpha1.EtcdBackup, []string, error) {
	in := backup.RestoreInput{ClusterName: rs.Spec.ClusterName, Confirm: rs.Spec.Confirm, Mode: string(rs.Status.Mode),
		Verified:          meta.IsStatusConditionTrue(rs.Status.Conditions, etcdv1alpha1.ConditionVerified),
		Backup:            backup.BackupRecord{Name: etcdv1alpha1.RestoreBackupName(rs)},
		PreviousClusterID: rs.Status.PreviousClusterID,
		Rollback:          backup.Rollback{Allowed: rs.Spec.AllowRollbackOfHealthyCluster}}
	var cluster *etcdv1alpha1.EtcdCluster
	c := &etcdv1alpha1.EtcdCluster{}
	switch err := etcdbackup.GetConfirmed(ctx, r.Client, r.APIReader, client.ObjectKey{Namespace: rs.Namespace, Name: rs.Spec.ClusterName}, c); {
	case err == nil:
		cluster = c
		in.ClusterFound = true
		in.Bootstrapped = c.Status.Bootstrapped
		in.FromBackup = etcdv1alpha1.BootstrapBackupName(c)
		in.ClusterAvailable = meta.IsStatusConditionTrue(c.Status.Conditions, etcdv1alpha1.ConditionAvailable)
		if c.Status.ClusterID != "" {
			in.ClusterIDs = append(in.ClusterIDs, c.Status.ClusterID)
		}
		in.ClusterIDs = append(in.ClusterIDs, c.Status.FormerClusterIDs...)
		in.Version = c.Spec.Version
		in.Rollback.ClusterRevision = c.Status.Revision
	case !apierrors.IsNotFound(err):
		return in, nil, nil, nil, fmt.Errorf("get EtcdCluster: %w", err)
	}
	var b *etcdv1alpha1.EtcdBackup
	eb := &etcdv1alpha1.EtcdBackup{}
	switch err := etcdbackup.GetConfirmed(ctx, r.Client, r.APIReader, client.ObjectKey{Namespace: rs.Namespace, Name: etcdv1alpha1.RestoreBackupName(rs)}, eb); {
	case err == nil:
		b = eb
		in.Backup = backup.BackupRecord{Name: eb.Name, Found: true,
			Complete:    meta.IsStatusConditionTrue(eb.Status.Conditions, etcdv1alpha1.ConditionComplete),
			Failed:      meta.IsStatusConditionTrue(eb.Status.Conditions, etcdv1alpha1.ConditionFailed),
			ClusterName: eb.Spec.ClusterName, ClusterID: eb.Status.ClusterID, EtcdVersion: eb.Status.EtcdVersion,
			Location: eb.Status.Location, SHA256: eb.Status.SHA256, SizeBytes: eb.Status.SizeBytes}
		in.Rollback.BackupRevision = eb.Status.Revision
		switch {
		case eb.Status.StartTime != nil:
			in.Rollback.BackupTime = eb.Status.StartTime.Time
		case eb.Status.CompletionTime != nil:
			in.Rollback.BackupTime = eb.Status.CompletionTime.Time
		}
	case !apierrors.IsNotFound(err):
		return in, nil, nil, nil, fmt.Errorf("get EtcdBackup: %w", err)
	}
	if err := r.observeSafetyBackup(ctx, rs, &in.Rollback); err != nil {
		return in, nil, nil, nil, err
	}
	other, err := r.olderActive(ctx, rs)
	if err != nil {
		return in, nil, nil, nil, err
	}
	in.OtherActive = other
	res, err := r.verifyResult(ctx, rs)
	if err != nil {
		return in, nil, nil, nil, err
	}
	in.Verify = res
	if b != nil && res == nil && !in.Verified {
		// Only until the verify Job has a result: an uncached read of a user's Secret, not one on every pass after.
		if in.KeyProblem, err = etcdbackup.EncryptionKeyProblem(ctx, r.APIReader, b.Namespace, b.Spec.Encryption); err != nil {
			return in, nil, nil, nil, err
		}
	}
	members, err := r.countMembers(ctx, rs, cluster, &in)
	if err != nil {
		return in, nil, nil, nil, err
	}
	return in, cluster, b, members, nil
}

// olderActive names an unfinished restore of the same cluster created before rs (the one that goes first).
func (r *Reconciler) olderActive(ctx context.Context, rs *etcdv1alpha1.EtcdRestore) (string, error) {
	var list etcdv1alpha1.EtcdRestoreList
	if err := r.Client.List(ctx, &list, client.InNamespace(rs.Namespace)); err != nil {
		return "", fmt.Errorf("list EtcdRestores: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	for i := range list.Items {
		o := &list.Items[i]
		if o.Name == rs.Name || o.Spec.ClusterName != rs.Spec.ClusterName || etcdv1alpha1.Finished(o.Status.Conditions) || o.Status.Mode == "" {
			continue
		}
		if o.CreationTimestamp.Before(&rs.CreationTimestamp) || (o.CreationTimestamp.Equal(&rs.CreationTimestamp) && o.Name < rs.Name) {
			return o.Name, nil
		}
	}
	return "", nil
}

// verifyResult is the verify Job's result once it has finished, nil before (or when there is no Job).
func (r *Reconciler) verifyResult(ctx context.Context, rs *etcdv1alpha1.EtcdRestore) (*backup.Result, error) {
	job := &batchv1.Job{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: rs.Namespace, Name: resources.VerifyJobName(rs)}, job); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get verify Job: %w", err)
	}
	return agentjob.Result(ctx, r.Client, r.APIReader, job)
}

// ensureVerifyJob creates the verify Job unless it exists.
func (r *Reconciler) ensureVerifyJob(ctx context.Context, rs *etcdv1alpha1.EtcdRestore, b *etcdv1alpha1.EtcdBackup) error {
	job := resources.VerifyJob(rs, b, r.AgentImage)
	err := r.Client.Create(ctx, job)
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err != nil:
		return fmt.Errorf("create verify Job: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Verifying snapshot", "EtcdRestore", klog.KObj(rs), "job", job.Name, "location", b.Status.Location)
	r.Recorder.Eventf(rs, corev1.EventTypeNormal, "Verifying", "Job %s reads %s and checks it against backup %s", job.Name, b.Status.Location, b.Name)
	return nil
}

// countMembers counts the cluster's member Pods started from this restore and the others (and how many of
// those are Ready: the kubelet's view of whether the cluster serves), and finds a restore init container that
// failed (its result is in its termination message). It returns the fresh members' names.
func (r *Reconciler) countMembers(ctx context.Context, rs *etcdv1alpha1.EtcdRestore, cluster *etcdv1alpha1.EtcdCluster, in *backup.RestoreInput) ([]string, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(rs.Namespace), client.MatchingLabels{resources.LabelCluster: rs.Spec.ClusterName}); err != nil {
		return nil, fmt.Errorf("list member Pods: %w", err)
	}
	if cluster != nil {
		in.Members = max(int(cluster.Spec.Replicas), len(cluster.Status.Members))
	}
	var fresh []string
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Annotations[resources.AnnotationRestore] != rs.Name {
			in.OtherMembers++
			if cluster != nil && metav1.IsControlledBy(p, cluster) && p.DeletionTimestamp == nil && resources.PodReady(p) {
				in.ReadyMembers++
			}
			continue
		}
		in.FreshMembers++
		fresh = append(fresh, p.Name)
		for _, cs := range p.Status.InitContainerStatuses {
			for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
				if cs.Name != resources.RestoreContainer || t == nil || t.ExitCode == 0 {
					continue
				}
				if res, err := backup.ParseResult(t.Message); err == nil && !res.Succeeded {
					in.MemberFailure = fmt.Sprintf("member %s could not restore the snapshot: %s: %s", p.Name, res.Reason, res.Message)
				}
			}
		}
	}
	sort.Strings(fresh)
	return fresh, nil
}

// fillMembers records the members started from the snapshot and, for a re-seed, the volumes set aside.
func (r *Reconciler) fillMembers(ctx context.Context, rs *etcdv1alpha1.EtcdRestore, members []string) error {
	var pvcs corev1.PersistentVolumeClaimList
	if err := r.Client.List(ctx, &pvcs, client.InNamespace(rs.Namespace), client.MatchingLabels{resources.LabelRetiredFrom: rs.Spec.ClusterName}); err != nil {
		return fmt.Errorf("list set-aside PersistentVolumeClaims: %w", err)
	}
	var retired []string
	for _, v := range pvcs.Items {
		if v.Annotations[resources.AnnotationRetiredBy] == rs.Name {
			retired = append(retired, v.Name)
		}
	}
	sort.Strings(retired)
	if len(members) > 0 {
		rs.Status.Members = members
	}
	if len(retired) > 0 {
		rs.Status.RetiredVolumes = retired
	}
	return nil
}

// SafetyBackupName is the EtcdBackup a rollback of a healthy cluster takes first.
func SafetyBackupName(rs *etcdv1alpha1.EtcdRestore) string {
	return etcdv1alpha1.DerivedName(rs.Name, "-safety")
}

// observeSafetyBackup reads the restore's safety backup, if it was created, into the rollback's input. Only a
// backup this restore owns counts: a stranger of the same name is not a safety backup of this cluster.
func (r *Reconciler) observeSafetyBackup(ctx context.Context, rs *etcdv1alpha1.EtcdRestore, rb *backup.Rollback) error {
	eb := &etcdv1alpha1.EtcdBackup{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: rs.Namespace, Name: SafetyBackupName(rs)}, eb); err != nil {
		return client.IgnoreNotFound(err)
	}
	rb.SafetyBackup = eb.Name
	if !metav1.IsControlledBy(eb, rs) {
		rb.SafetyFailed, rb.SafetyMessage = true, fmt.Sprintf("EtcdBackup %s exists and is not owned by restore %s", eb.Name, rs.Name)
		return nil
	}
	rb.SafetyComplete = meta.IsStatusConditionTrue(eb.Status.Conditions, etcdv1alpha1.ConditionComplete)
	if c := meta.FindStatusCondition(eb.Status.Conditions, etcdv1alpha1.ConditionFailed); c != nil && c.Status == metav1.ConditionTrue {
		rb.SafetyFailed, rb.SafetyMessage = true, c.Reason+": "+c.Message
	}
	return nil
}

// ensureSafetyBackup creates the safety backup of a cluster about to be rolled back, unless it exists: a backup
// of the cluster as it is, owned by the restore, to the destination of the backup restored (next to it, under
// a name of its own: a destination's existing file is never overwritten).
func (r *Reconciler) ensureSafetyBackup(ctx context.Context, rs *etcdv1alpha1.EtcdRestore, restored *etcdv1alpha1.EtcdBackup) error {
	file := fmt.Sprintf("%s-safety-%s.db", rs.Name, string(rs.UID)[:min(8, len(rs.UID))])
	dest := resources.WithPath(restored.Spec.Destination, path.Join(path.Dir(resources.DestinationPath(restored.Spec.Destination)), file))
	eb := &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{Namespace: rs.Namespace, Name: SafetyBackupName(rs)},
		// Stored like the backup restored: a safety copy of encrypted data is encrypted to the same key.
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: rs.Spec.ClusterName, Destination: dest,
			Compression: restored.Spec.Compression, Encryption: restored.Spec.Encryption.DeepCopy()},
	}
	if err := controllerutil.SetControllerReference(rs, eb, r.Client.Scheme()); err != nil {
		return fmt.Errorf("own safety backup: %w", err)
	}
	err := r.Client.Create(ctx, eb)
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil
	case err != nil:
		return fmt.Errorf("create safety backup: %w", err)
	}
	ctrl.LoggerFrom(ctx).Info("Taking safety backup", "EtcdRestore", klog.KObj(rs), "backup", eb.Name, "cluster", rs.Spec.ClusterName)
	r.Recorder.Eventf(rs, corev1.EventTypeNormal, "SafetyBackup", "EtcdBackup %s of cluster %s, taken before it is rolled back to backup %s", eb.Name, rs.Spec.ClusterName, restored.Name)
	return nil
}
