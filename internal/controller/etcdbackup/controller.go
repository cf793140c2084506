// Package etcdbackup is the EtcdBackup controller. A backup is a one-shot task shaped Admit -> Execute ->
// Cleanup: admission checks the cluster and destination (internal/backup decides), execution is a Job running
// steward-agent that streams a snapshot from a member straight to the destination (the operator never holds
// snapshot data or reads credentials' values), and the agent's termination message becomes the backup's status
// as soon as its Pod has ended.
// With deletionPolicy Delete a finalizer deletes the stored snapshot, through another Job (or itself, in a
// namespace being deleted), before the EtcdBackup goes, and reports what it could not delete. It writes only status.lastBackup of EtcdClusters, never their spec.
package etcdbackup

import (
	"context"
	"fmt"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/resources"
	"steward.dev/steward/internal/version"
)

// Finalizer holds an EtcdBackup with deletionPolicy Delete until its stored snapshot is deleted.
const Finalizer = "etcd.steward.dev/delete-snapshot"

// DefaultAgentImage is Steward's own image, which holds steward-agent: Jobs run the operator's release.
const DefaultAgentImage = version.Image

// Requeue intervals.
const (
	// requeueWaiting: a backup waiting for its cluster to become available looks again this often.
	requeueWaiting = 5 * time.Second
	// requeueRunning: the Job's completion is watched; this is only the safety net for a missed event.
	requeueRunning = 30 * time.Second
)

// Reconciler reconciles EtcdBackups.
type Reconciler struct {
	Client client.Client
	// APIReader reads Secrets uncached: Steward only checks that the credentials Secret exists with its keys,
	// and does not cache (or list, or watch) the namespace's Secrets for that.
	APIReader  client.Reader
	Recorder   record.EventRecorder
	AgentImage string
	// Options give the etcd image a point-in-time backup's Job replays with.
	Options resources.Options
	// Now is the clock (injected for tests).
	Now func() time.Time
	// DeleteObject deletes an S3 object from the operator, where no delete Job can run any more (injected for
	// tests; deleteS3Object when nil).
	DeleteObject func(ctx context.Context, cfg backup.S3Config) error
}

// The least this controller's code uses: update and patch of EtcdBackups add and remove its finalizer; status
// patches record results (and a cluster's lastBackup); Jobs are created and deleted, never changed; the Pods
// of a Job are watched (their end is the result) and listed uncached for a finished Job's termination message;
// PVCs are read from the cache to check a destination exists; a credentials Secret is read (uncached, get only)
// to check its keys exist, never copied. EtcdRestores are watched for the holds on the backups they read. Jobs carry blockOwnerDeletion owner references to their EtcdBackup: update on etcdbackups/finalizers.
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdbackups,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdbackups/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdbackups/finalizers,verbs=update
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdclusters/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdbackupschedules,verbs=get;list;watch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdrestores,verbs=get;list;watch
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// SetupWithManager registers the controller: it watches EtcdBackups, their Jobs and the Jobs' Pods.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.AgentImage == "" {
		r.AgentImage = DefaultAgentImage
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1alpha1.EtcdBackup{}).
		Owns(&batchv1.Job{}).
		Watches(&corev1.Pod{}, JobPodsOf(resources.LabelBackup)).
		Watches(&etcdv1alpha1.EtcdRestore{}, handler.EnqueueRequestsFromMapFunc(backupOfRestore)).
		Named("etcdbackup").
		Complete(r)
}

// Reconcile runs one pass: delete, or admit, execute, and record the result.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	b := &etcdv1alpha1.EtcdBackup{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	held, err := r.holds(ctx, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !b.DeletionTimestamp.IsZero() {
		if len(held) > 0 && controllerutil.ContainsFinalizer(b, Finalizer) {
			return r.waitForRestores(ctx, b, held), nil
		}
		return r.reconcileDelete(ctx, b)
	}
	if b.Spec.DeletionPolicy == etcdv1alpha1.DeletionPolicyDelete && !controllerutil.ContainsFinalizer(b, Finalizer) {
		controllerutil.AddFinalizer(b, Finalizer)
		if err := r.Client.Update(ctx, b); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
		return ctrl.Result{}, nil // the update brings the next pass
	}
	if etcdv1alpha1.Finished(b.Status.Conditions) {
		// Cleanup: nothing runs any more; only make sure the cluster knows its newest backup.
		return ctrl.Result{}, r.recordLastBackup(ctx, b)
	}

	o := &outcome{}
	defer func() {
		// A status that could not be written is this pass's error, so the pass is retried: a finished backup
		// requeues nothing else, and would otherwise never show Complete or Failed.
		if err := r.writeStatus(ctx, b, o); err != nil && retErr == nil {
			retErr = err
		}
	}()
	if err := r.execute(ctx, b, o); err != nil {
		o.err = err
		return ctrl.Result{}, err
	}
	switch o.phase {
	case phaseWaiting:
		return ctrl.Result{RequeueAfter: requeueWaiting}, nil
	case phaseRunning:
		return ctrl.Result{RequeueAfter: requeueRunning}, nil
	}
	return ctrl.Result{}, nil
}

// execute admits the backup and starts its Job, or reads the result of the Job already started.
func (r *Reconciler) execute(ctx context.Context, b *etcdv1alpha1.EtcdBackup, o *outcome) error {
	log := ctrl.LoggerFrom(ctx)
	job := &batchv1.Job{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: resources.BackupJobName(b)}, job)
	switch {
	case err == nil:
		return r.observeJob(ctx, b, job, o)
	case !apierrors.IsNotFound(err):
		return fmt.Errorf("get backup Job: %w", err)
	}
	if b.Spec.PointInTime != nil {
		return r.startPointInTime(ctx, b, o)
	}
	// Admit.
	in, access, err := r.admitInput(ctx, b)
	if err != nil {
		return err
	}
	d := backup.Decide(in)
	if o.notAdmitted(d.Verdict, d.Reason, d.Message) {
		return nil
	}
	// Execute.
	job = resources.BackupJob(b, d.Members, r.AgentImage, access)
	log.Info("Starting backup Job", "EtcdBackup", klog.KObj(b), "job", job.Name, "members", d.Members)
	if err := r.Client.Create(ctx, job); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create backup Job: %w", err)
	}
	r.Recorder.Eventf(b, corev1.EventTypeNormal, "Started", "Job %s takes a snapshot of %s", job.Name, b.Spec.ClusterName)
	o.phase, o.started = phaseRunning, true
	return nil
}

// admitInput gathers what admission decides on, and the cluster's client Secret when its members use TLS.
func (r *Reconciler) admitInput(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (in backup.AdmitInput, access resources.AgentAccess, err error) {
	in = backup.AdmitInput{Age: r.Now().Sub(b.CreationTimestamp.Time)}
	cluster := &etcdv1alpha1.EtcdCluster{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterName}, cluster); {
	case apierrors.IsNotFound(err):
		return in, access, nil
	case err != nil:
		return in, access, fmt.Errorf("get EtcdCluster: %w", err)
	}
	in.ClusterFound = true
	access = resources.AgentAccessFor(cluster)
	for _, m := range cluster.Status.Members {
		in.Members = append(in.Members, backup.Member{Name: m.Name, ClientURL: m.ClientURL, Healthy: m.Healthy,
			Leader: m.Role == etcdv1alpha1.RoleLeader, Learner: m.Role == etcdv1alpha1.RoleLearner})
	}
	problem, err := r.destinationProblem(ctx, b)
	in.DestinationProblem = problem
	return in, access, err
}

// destinationProblem says why the destination cannot be used; a Job started anyway would wait forever for a
// missing volume or Secret instead of failing.
func (r *Reconciler) destinationProblem(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (string, error) {
	if pvc := b.Spec.Destination.PVC; pvc != nil {
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: pvc.ClaimName}, &corev1.PersistentVolumeClaim{})
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("PersistentVolumeClaim %s does not exist", pvc.ClaimName), nil
		}
		if err != nil {
			return "", fmt.Errorf("get PersistentVolumeClaim %s: %w", pvc.ClaimName, err)
		}
		return "", nil
	}
	name := b.Spec.Destination.S3.CredentialsSecret.Name
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: name}, secret)
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("credentials Secret %s does not exist", name), nil
	}
	if err != nil {
		return "", fmt.Errorf("get credentials Secret %s: %w", name, err)
	}
	for _, k := range []string{etcdv1alpha1.S3AccessKeyIDKey, etcdv1alpha1.S3SecretAccessKeyKey} {
		if len(secret.Data[k]) == 0 {
			return fmt.Sprintf("credentials Secret %s has no key %s", name, k), nil
		}
	}
	return "", nil
}

// observeJob turns a Job's state into the backup's outcome: running, or finished with the agent's result.
func (r *Reconciler) observeJob(ctx context.Context, b *etcdv1alpha1.EtcdBackup, job *batchv1.Job, o *outcome) error {
	o.jobStart = job.CreationTimestamp.Time
	res, err := JobResult(ctx, r.Client, r.APIReader, job)
	switch {
	case err != nil:
		return err
	case res == nil:
		o.phase = phaseRunning
	case res.Succeeded:
		o.phase, o.result = phaseSucceeded, res
	default:
		o.phase, o.reason, o.message = phaseFailed, res.Reason, res.Message
	}
	return nil
}

// JobResult is the result of an agent Job (backup, delete, verify), nil while it runs. The agent's own result is
// taken from the Job's Pod (read through cached, which must watch Pods) as soon as that Pod has ended with it: the
// Job controller marks a Job finished only a batching period (1 s) after it sees its Pod end, and with
// backoffLimit 0 and restartPolicy Never a Pod that ended is the Job's last word. Otherwise, once the Job has
// finished: the agent's result from the termination message (read past the cache by reader), a success only
// when the Job completed; without a usable result (the Pod was killed by the deadline or an eviction, or never
// ran for a missing image) a JobFailed result with the Job's own words.
func JobResult(ctx context.Context, cached, reader client.Reader, job *batchv1.Job) (*backup.Result, error) {
	if res, err := endedPodResult(ctx, cached, job); res != nil || err != nil {
		return res, err
	}
	cond := JobFinished(job)
	if cond == nil {
		return nil, nil
	}
	msg, err := TerminationMessage(ctx, reader, job)
	if err != nil {
		return nil, err
	}
	res, perr := backup.ParseResult(msg)
	switch {
	case perr == nil && res.Succeeded && cond.Type == batchv1.JobComplete:
		return &res, nil
	case perr == nil && !res.Succeeded:
		return &res, nil
	}
	failed := &backup.Result{Reason: etcdv1alpha1.ReasonJobFailed, Message: fmt.Sprintf("Job %s %s: %s", job.Name, cond.Reason, cond.Message)}
	if perr != nil {
		failed.Message += fmt.Sprintf(" (%v)", perr)
	}
	return failed, nil
}

// endedPodResult is the agent's result read off the Job's Pod once the Pod has ended in agreement with it
// (Succeeded with a success, Failed with a failure), nil while it runs or when the Pod ended without a result
// that says so (then the Job's condition tells). Pods of an earlier Job of the same name do not count.
func endedPodResult(ctx context.Context, cached client.Reader, job *batchv1.Job) (*backup.Result, error) {
	pods := &corev1.PodList{}
	if err := cached.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return nil, fmt.Errorf("list Pods of Job %s: %w", job.Name, err)
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if !metav1.IsControlledBy(p, job) {
			continue
		}
		res, err := backup.ParseResult(agentMessage(p))
		switch {
		case err != nil:
		case p.Status.Phase == corev1.PodSucceeded && res.Succeeded, p.Status.Phase == corev1.PodFailed && !res.Succeeded:
			return &res, nil
		}
	}
	return nil, nil
}

// JobPodsOf maps the Pods of agent Jobs to the object named by their label (the Jobs' Pod templates carry it),
// so that a Pod's end is seen without waiting for the Job controller to mark the Job finished.
func JobPodsOf(label string) handler.EventHandler {
	return handler.EnqueueRequestsFromMapFunc(jobPodsOf(label))
}

// jobPodsOf is JobPodsOf's mapping.
func jobPodsOf(label string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []ctrl.Request {
		name, ok := o.GetLabels()[label]
		if !ok || o.GetLabels()[batchv1.JobNameLabel] == "" {
			return nil
		}
		return []ctrl.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	}
}

// JobFinished is the Job's Complete or Failed condition once it is True.
func JobFinished(job *batchv1.Job) *batchv1.JobCondition {
	for i, c := range job.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// terminationMessage is the agent container's termination message of the Job's Pod ("" if none). Read past the
// cache: the Job's informer can report the Job finished before the Pod's informer has the terminated container,
// and a missed message would turn a success into JobFailed. Once per finished Job, so cheap.
func (r *Reconciler) terminationMessage(ctx context.Context, job *batchv1.Job) (string, error) {
	return TerminationMessage(ctx, r.APIReader, job)
}

// TerminationMessage is the agent container's termination message of the Job's Pod ("" if none), read past the
// cache (see terminationMessage).
func TerminationMessage(ctx context.Context, reader client.Reader, job *batchv1.Job) (string, error) {
	pods := &corev1.PodList{}
	if err := reader.List(ctx, pods, client.InNamespace(job.Namespace), client.MatchingLabels{batchv1.JobNameLabel: job.Name}); err != nil {
		return "", fmt.Errorf("list Pods of Job %s: %w", job.Name, err)
	}
	for i := range pods.Items {
		if msg := agentMessage(&pods.Items[i]); msg != "" {
			return msg, nil
		}
	}
	return "", nil
}

// agentMessage is the termination message of the Pod's agent container once it has terminated, "" before.
func agentMessage(p *corev1.Pod) string {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == resources.AgentContainer && cs.State.Terminated != nil {
			return cs.State.Terminated.Message
		}
	}
	return ""
}
