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
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
	"steward.dev/steward/internal/controller/agentjob"
	"steward.dev/steward/internal/resources"
)

// Finalizer holds an EtcdBackup with deletionPolicy Delete until its stored snapshot is deleted.
const Finalizer = "etcd.steward.dev/delete-snapshot"

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
	// DeleteGCSObject deletes a GCS object the same way (deleteGCSObject when nil).
	DeleteGCSObject func(ctx context.Context, cfg backup.GCSConfig, key string) error
	// DeleteAzureBlob deletes an Azure blob the same way (deleteAzureBlob when nil).
	DeleteAzureBlob func(ctx context.Context, cfg backup.AzureConfig, key string) error
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
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get

// SetupWithManager registers the controller: it watches EtcdBackups, their Jobs and the Jobs' Pods.
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
		For(&etcdv1alpha1.EtcdBackup{}).
		Owns(&batchv1.Job{}).
		Watches(&corev1.Pod{}, agentjob.PodsOf(resources.LabelBackup)).
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
	if b.Spec.StandbySeed != nil {
		return r.startStandbySeed(ctx, b, o)
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
	switch err := GetConfirmed(ctx, r.Client, r.APIReader, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterName}, cluster); {
	case apierrors.IsNotFound(err):
		return in, access, nil
	case err != nil:
		return in, access, fmt.Errorf("get EtcdCluster: %w", err)
	}
	in.ClusterFound = true
	if etcdv1alpha1.Hibernating(cluster) {
		in.Hibernated = cluster.Name
		return in, access, nil
	}
	access = resources.AgentAccessFor(cluster)
	for _, m := range cluster.Status.Members {
		in.Members = append(in.Members, backup.Member{Name: m.Name, ClientURL: m.ClientURL, Healthy: m.Healthy,
			Leader: m.Role == etcdv1alpha1.RoleLeader, Learner: m.Role == etcdv1alpha1.RoleLearner})
	}
	problem, err := r.destinationProblem(ctx, b)
	if err != nil {
		return in, access, err
	}
	in.DestinationProblem = problem
	in.KeyProblem, err = EncryptionKeyProblem(ctx, r.APIReader, b.Namespace, b.Spec.Encryption)
	return in, access, err
}

// destinationProblem says why the destination cannot be used; a Job started anyway would wait forever for a
// missing volume or Secret instead of failing.
func (r *Reconciler) destinationProblem(ctx context.Context, b *etcdv1alpha1.EtcdBackup) (string, error) {
	if pvc := b.Spec.Destination.PVC; pvc != nil {
		err := GetConfirmed(ctx, r.Client, r.APIReader, client.ObjectKey{Namespace: b.Namespace, Name: pvc.ClaimName}, &corev1.PersistentVolumeClaim{})
		if apierrors.IsNotFound(err) {
			return fmt.Sprintf("PersistentVolumeClaim %s does not exist", pvc.ClaimName), nil
		}
		if err != nil {
			return "", fmt.Errorf("get PersistentVolumeClaim %s: %w", pvc.ClaimName, err)
		}
		return "", nil
	}
	// The Jobs run as the ServiceAccount: without it the Job controller creates no Pod, and the backup would wait
	// for its deadline. Whether the identity may reach the bucket only the Job can find out.
	if problem, err := MissingServiceAccount(ctx, r.APIReader, b.Namespace, b.Spec.Destination, "the backup Jobs"); problem != "" || err != nil {
		return problem, err
	}
	name, need, _ := destinationCredentials(b.Spec.Destination)
	if name == "" {
		return "", nil // ambient credentials (workload identity, the AWS default chain): the Job's own, nothing to look up
	}
	problem, _, err := secretProblem(ctx, r.APIReader, b.Namespace, name, "credentials", need)
	return problem, err
}

// MissingServiceAccount says that the ServiceAccount destination d names (serviceAccountName, for ambient
// credentials) does not exist in namespace, "" when it does or none is named; who says what runs as it.
func MissingServiceAccount(ctx context.Context, reader client.Reader, namespace string, d etcdv1alpha1.BackupDestination, who string) (string, error) {
	_, _, serviceAccount := destinationCredentials(d)
	if serviceAccount == "" {
		return "", nil
	}
	err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: serviceAccount}, &corev1.ServiceAccount{})
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("ServiceAccount %s (serviceAccountName, the identity %s run as) does not exist", serviceAccount, who), nil
	}
	if err != nil {
		return "", fmt.Errorf("get ServiceAccount %s: %w", serviceAccount, err)
	}
	return "", nil
}

// observeJob turns a Job's state into the backup's outcome: running, or finished with the agent's result.
func (r *Reconciler) observeJob(ctx context.Context, b *etcdv1alpha1.EtcdBackup, job *batchv1.Job, o *outcome) error {
	o.jobStart = job.CreationTimestamp.Time
	res, err := agentjob.Result(ctx, r.Client, r.APIReader, job)
	switch {
	case err != nil:
		return err
	case res == nil:
		o.phase = phaseRunning
	case res.Succeeded:
		o.phase, o.result, o.space = phaseSucceeded, res, res.Space
	default:
		o.phase, o.reason, o.message, o.space = phaseFailed, res.Reason, res.Message, res.Space
	}
	return nil
}
