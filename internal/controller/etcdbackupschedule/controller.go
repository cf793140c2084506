// Package etcdbackupschedule is the EtcdBackupSchedule controller: like a CronJob for EtcdBackups. Each pass
// creates the backup of the most recent due time (never catching up a burst of missed ones), then retires
// backups by retention (internal/backup decides which). Backups it creates carry deletionPolicy Delete, so
// retiring one deletes its stored snapshot too. They are labelled with the schedule but not owned by it:
// deleting a schedule keeps its backups and their data, because losing every backup is not what anyone
// deleting a schedule expects. While its cluster hibernates a schedule pauses: no backups, no follower
// (hibernation.go).
package etcdbackupschedule

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/controller/etcdbackup"
	"steward.dev/steward/internal/pitr"
	"steward.dev/steward/internal/resources"
)

// requeueMax bounds the wait for the next scheduled time, so that a changed clock or a missed event costs at
// most this much delay.
const requeueMax = 5 * time.Minute

// Reconciler reconciles EtcdBackupSchedules.
type Reconciler struct {
	Client client.Client
	// APIReader reads ServiceAccounts, which the cache does not hold (the Client when nil).
	APIReader client.Reader
	Recorder  record.EventRecorder
	// Options address the cluster's client Service and name the agent image, for the continuous-backup follower.
	Options resources.Options
	// ReadFollower reads a follower Pod's report (default: GET http://<podIP>:8080/status; injected for tests).
	ReadFollower func(ctx context.Context, podIP string) (pitr.FollowerStatus, error)
	// Now is the clock (injected for tests).
	Now func() time.Time
}

// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdbackupschedules,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdbackupschedules/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdbackups,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdrestores,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get

// SetupWithManager registers the controller: it watches schedules, the backups labelled with them, and their
// clusters' hibernation (which pauses and resumes them).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	toSchedule := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		name, ok := o.GetLabels()[resources.LabelSchedule]
		if !ok {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1alpha1.EtcdBackupSchedule{}).
		Owns(&appsv1.Deployment{}).
		Watches(&etcdv1alpha1.EtcdBackup{}, toSchedule).
		Watches(&etcdv1alpha1.EtcdCluster{}, handler.EnqueueRequestsFromMapFunc(schedulesOf(r.Client)), builder.WithPredicates(clusterHibernationChanged)).
		Named("etcdbackupschedule").
		Complete(r)
}

// Reconcile runs one pass: observe the schedule's backups, create the due one, prune, write status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	s := &etcdv1alpha1.EtcdBackupSchedule{}
	if err := r.Client.Get(ctx, req.NamespacedName, s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	now := r.Now()
	before := s.DeepCopy()
	ready := metav1.Condition{Type: etcdv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: etcdv1alpha1.ReasonScheduled}
	defer func() {
		if retErr != nil {
			ready.Message += fmt.Sprintf(" (last pass failed: %v)", retErr)
		} else {
			s.Status.ObservedGeneration = s.Generation
		}
		ready.ObservedGeneration = s.Generation
		meta.SetStatusCondition(&s.Status.Conditions, ready)
		if err := r.Client.Status().Patch(ctx, s, client.MergeFrom(before)); err != nil && retErr == nil {
			retErr = fmt.Errorf("write status: %w", err)
		}
	}()

	sched, err := backup.ParseSchedule(s.Spec.Schedule)
	if err != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, etcdv1alpha1.ReasonInvalidSchedule, err.Error()
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	backups, err := r.observe(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	cluster, err := r.getCluster(ctx, s)
	if err != nil {
		return ctrl.Result{}, err
	}
	next, err := r.runDue(ctx, s, sched, cluster, now, &ready)
	if err != nil {
		return ctrl.Result{}, err
	}
	continuous, err := r.keepContinuous(ctx, s, cluster, backups, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.prune(ctx, s, backups, now); err != nil {
		return ctrl.Result{}, err
	}
	// A hibernated cluster's follower is gone: nothing to read until the cluster's resumption (watched) brings
	// the next pass.
	_, hibernating := hibernationOf(cluster)
	return ctrl.Result{RequeueAfter: requeueAfter(next, now, continuous != nil && !hibernating)}, nil
}

// getCluster reads the schedule's cluster from the cache; nil when it does not exist.
func (r *Reconciler) getCluster(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule) (*etcdv1alpha1.EtcdCluster, error) {
	cluster := &etcdv1alpha1.EtcdCluster{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.Spec.ClusterName}, cluster); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get EtcdCluster %s: %w", s.Spec.ClusterName, err)
	}
	return cluster, nil
}

// runDue creates the backup due by now (or skips it while the previous one runs and concurrency is
// forbidden, or while the cluster hibernates), says in ready when the next one is, and returns that time.
// cluster is nil when it does not exist.
func (r *Reconciler) runDue(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, sched backup.Schedule, cluster *etcdv1alpha1.EtcdCluster, now time.Time, ready *metav1.Condition) (time.Time, error) {
	log := ctrl.LoggerFrom(ctx)
	last := s.CreationTimestamp.Time
	if s.Status.LastScheduleTime != nil {
		last = s.Status.LastScheduleTime.Time
	}
	due, isDue, next := sched.Due(last, now)
	s.Status.NextScheduleTime = &metav1.Time{Time: next}
	ready.Message = "next backup at " + next.UTC().Format(time.RFC3339)
	phase, hibernating := hibernationOf(cluster)
	switch {
	case s.Spec.Suspend:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, etcdv1alpha1.ReasonSuspended, "spec.suspend is set"
	case hibernating:
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, etcdv1alpha1.ReasonHibernated, hibernatedReadyMessage(cluster, phase, next)
		if c := meta.FindStatusCondition(s.Status.Conditions, etcdv1alpha1.ConditionReady); c == nil || c.Reason != etcdv1alpha1.ReasonHibernated {
			// One Event when the pause begins; the due times it skips are not announced one by one.
			r.Recorder.Eventf(s, corev1.EventTypeNormal, etcdv1alpha1.ReasonHibernated, "scheduled backups pause: %s", ready.Message)
		}
		if isDue {
			// Skipped like a forbidden concurrent run: not caught up at resume, which would only add load to a
			// cluster that is just coming back.
			log.Info("Skipping a scheduled backup: the cluster is hibernated", "EtcdBackupSchedule", klog.KObj(s), "EtcdCluster", klog.KObj(cluster), "due", due, "phase", phase)
			s.Status.LastScheduleTime = &metav1.Time{Time: due}
		}
	case isDue && len(s.Status.Active) > 0 && s.Spec.ConcurrencyPolicy != etcdv1alpha1.ConcurrencyAllow:
		// Forbid: skip this time; it is not caught up later.
		log.Info("Skipping a scheduled backup: the previous one still runs", "EtcdBackupSchedule", klog.KObj(s), "due", due, "active", s.Status.Active)
		r.Recorder.Eventf(s, corev1.EventTypeWarning, "Skipped", "backup due at %s skipped: %v still running", due.UTC().Format(time.RFC3339), s.Status.Active)
		s.Status.LastScheduleTime = &metav1.Time{Time: due}
	case isDue:
		b := scheduledBackup(s, due)
		log.Info("Creating scheduled backup", "EtcdBackupSchedule", klog.KObj(s), "EtcdBackup", klog.KObj(b), "due", due)
		if err := r.Client.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
			return next, fmt.Errorf("create EtcdBackup %s: %w", b.Name, err)
		}
		r.Recorder.Eventf(s, corev1.EventTypeNormal, "Created", "created EtcdBackup %s", b.Name)
		s.Status.LastScheduleTime = &metav1.Time{Time: due}
		s.Status.Active = append(s.Status.Active, b.Name)
	}
	return next, nil
}

// keepContinuous keeps continuous backup's follower as the spec asks, records its condition, and takes the
// snapshot its window needs to start from. It returns that condition, nil when continuous backup is off.
func (r *Reconciler) keepContinuous(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, cluster *etcdv1alpha1.EtcdCluster, backups []etcdv1alpha1.EtcdBackup, now time.Time) (*metav1.Condition, error) {
	needSnapshot, continuous, err := r.reconcileContinuous(ctx, s, cluster, backups)
	if err != nil {
		return nil, err
	}
	if continuous != nil {
		continuous.ObservedGeneration = s.Generation
		meta.SetStatusCondition(&s.Status.Conditions, *continuous)
	}
	if needSnapshot && len(s.Status.Active) == 0 && !s.Spec.Suspend {
		// The follower's segments start after every snapshot (it just started, or etcd compacted what it had
		// not read): without a snapshot they restore nothing, so one is taken now rather than at the next time.
		b := scheduledBackup(s, now)
		ctrl.LoggerFrom(ctx).Info("Taking a snapshot to start continuous backup's window", "EtcdBackupSchedule", klog.KObj(s), "EtcdBackup", klog.KObj(b))
		if err := r.Client.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
			return continuous, fmt.Errorf("create EtcdBackup %s: %w", b.Name, err)
		}
		r.Recorder.Eventf(s, corev1.EventTypeNormal, "SnapshotForContinuousBackup", "created EtcdBackup %s: %s", b.Name, continuous.Message)
		s.Status.Active = append(s.Status.Active, b.Name)
	}
	return continuous, nil
}

// requeueAfter is when to look again: at the next scheduled time, but no later than requeueMax (a changed
// clock, a missed event), or requeueContinuous while continuous backup runs (the follower's report is read into
// status), and never sooner than a second.
func requeueAfter(next, now time.Time, continuous bool) time.Duration {
	wait := next.Sub(now)
	if wait > requeueMax {
		wait = requeueMax
	}
	if continuous && wait > requeueContinuous {
		wait = requeueContinuous
	}
	if wait < time.Second {
		wait = time.Second
	}
	return wait
}

// observe lists the schedule's backups and fills the status fields that describe them.
func (r *Reconciler) observe(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule) ([]etcdv1alpha1.EtcdBackup, error) {
	list := &etcdv1alpha1.EtcdBackupList{}
	if err := r.Client.List(ctx, list, client.InNamespace(s.Namespace), client.MatchingLabels{resources.LabelSchedule: s.Name}); err != nil {
		return nil, fmt.Errorf("list EtcdBackups: %w", err)
	}
	s.Status.Active = nil
	for _, b := range list.Items {
		it := item(&b)
		switch it.State {
		case backup.Running:
			if b.DeletionTimestamp.IsZero() {
				s.Status.Active = append(s.Status.Active, b.Name)
			}
		case backup.Succeeded:
			if lb := s.Status.LastSuccessfulBackup; lb == nil || lb.Time == nil || lb.Time.Time.Before(it.Finished) {
				s.Status.LastSuccessfulBackup = &etcdv1alpha1.BackupRef{Name: b.Name, Time: &metav1.Time{Time: it.Finished}}
			}
		case backup.Failed:
			if lf := s.Status.LastFailure; lf == nil || lf.Time == nil || lf.Time.Time.Before(it.Finished) {
				c := meta.FindStatusCondition(b.Status.Conditions, etcdv1alpha1.ConditionFailed)
				s.Status.LastFailure = &etcdv1alpha1.BackupRef{Name: b.Name, Time: &metav1.Time{Time: it.Finished}, Reason: c.Reason}
			}
		}
	}
	return list.Items, nil
}

// prune deletes the backups retention retires; their finalizer deletes the stored snapshots. A backup a restore
// is reading is left for a later pass (the restore's end brings one: the backup's hold is released then).
func (r *Reconciler) prune(ctx context.Context, s *etcdv1alpha1.EtcdBackupSchedule, backups []etcdv1alpha1.EtcdBackup, now time.Time) error {
	log := ctrl.LoggerFrom(ctx)
	uses, err := etcdbackup.RestoreUses(ctx, r.Client, s.Namespace)
	if err != nil {
		return err
	}
	var items []backup.Item
	byName := map[string]*etcdv1alpha1.EtcdBackup{}
	for i := range backups {
		if !backups[i].DeletionTimestamp.IsZero() {
			continue
		}
		it := item(&backups[i])
		it.InUse = len(backup.HeldBy(it.Name, uses)) > 0 || controllerutil.ContainsFinalizer(&backups[i], etcdbackup.HoldFinalizer)
		items = append(items, it)
		byName[backups[i].Name] = &backups[i]
	}
	for _, name := range backup.Prune(items, now, retentionOf(s)) {
		b := byName[name]
		log.Info("Pruning backup", "EtcdBackupSchedule", klog.KObj(s), "EtcdBackup", klog.KObj(b), "location", b.Status.Location)
		if err := r.Client.Delete(ctx, b); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("prune EtcdBackup %s: %w", name, err)
		}
		r.Recorder.Eventf(s, corev1.EventTypeNormal, "Pruned", "deleted EtcdBackup %s (%s)", name, b.Status.Location)
	}
	return nil
}

func retentionOf(s *etcdv1alpha1.EtcdBackupSchedule) backup.Retention {
	r := backup.Retention{MaxCount: 7, FailedLimit: 3}
	if s.Spec.Retention.MaxCount != nil {
		r.MaxCount = int(*s.Spec.Retention.MaxCount)
	}
	if s.Spec.Retention.MaxAge != nil {
		r.MaxAge = s.Spec.Retention.MaxAge.Duration
	}
	if s.Spec.FailedBackupsHistoryLimit != nil {
		r.FailedLimit = int(*s.Spec.FailedBackupsHistoryLimit)
	}
	return r
}

// item is what retention knows of a backup.
func item(b *etcdv1alpha1.EtcdBackup) backup.Item {
	it := backup.Item{Name: b.Name, Created: b.CreationTimestamp.Time, State: backup.Running}
	if b.Status.CompletionTime != nil {
		it.Finished = b.Status.CompletionTime.Time
	}
	switch {
	case meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionComplete):
		it.State = backup.Succeeded
	case meta.IsStatusConditionTrue(b.Status.Conditions, etcdv1alpha1.ConditionFailed):
		it.State = backup.Failed
	}
	return it
}

// scheduledBackup is the EtcdBackup of schedule s for due time t.
func scheduledBackup(s *etcdv1alpha1.EtcdBackupSchedule, t time.Time) *etcdv1alpha1.EtcdBackup {
	d := resources.WithPath(s.Spec.Destination,
		backup.JoinPrefix(resources.DestinationPath(s.Spec.Destination), backup.ArtifactName(s.Spec.ClusterName, t)))
	return &etcdv1alpha1.EtcdBackup{
		ObjectMeta: metav1.ObjectMeta{
			Name: backup.ScheduledBackupName(s.Name, t), Namespace: s.Namespace,
			Labels: map[string]string{resources.LabelSchedule: s.Name, resources.LabelCluster: s.Spec.ClusterName},
		},
		Spec: etcdv1alpha1.EtcdBackupSpec{ClusterName: s.Spec.ClusterName, Destination: d, DeletionPolicy: etcdv1alpha1.DeletionPolicyDelete,
			Compression: s.Spec.Compression, Encryption: s.Spec.Encryption.DeepCopy()},
	}
}
