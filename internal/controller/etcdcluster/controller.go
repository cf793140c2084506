// Package etcdcluster is the EtcdCluster controller: each pass observes the cluster's Pods, PVCs and etcd's own
// view of its members, asks internal/plan for the one next step, takes it, and writes status. It owns the
// cluster's Kubernetes objects (through owner references, so deleting the EtcdCluster deletes them) and never
// decides anything itself that internal/plan can decide.
package etcdcluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/metrics"
	"steward.dev/steward/internal/pitr"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// Requeue intervals. etcd's state changes without a Kubernetes event, so the controller looks again on a timer.
// A Pod that starts, becomes ready or goes away brings a pass by itself (the controller owns the Pods); the timer
// is for what only etcd knows.
const (
	// requeueInFlight: right after a step, and while etcd finishes one by itself (a learner catching up, a
	// restarted member reporting its release, the cluster version following), the next step waits on etcd alone.
	requeueInFlight = time.Second
	// requeueProgressing: other waits (Pods starting, a backup, a restore, a spec that needs a human) re-observe
	// at this pace, so that a cluster stuck on one costs little.
	requeueProgressing = 3 * time.Second
	// requeueSteady: a healthy cluster is re-checked for member health this often.
	requeueSteady = 30 * time.Second
	// requeueComingUp: a learner whose etcd started within comingUpWindow is asked to be promoted this often: etcd
	// grants it as soon as the learner has caught up, which no Kubernetes event tells. The window ends the fast
	// pace for a learner that takes long to catch up.
	requeueComingUp = 250 * time.Millisecond
	comingUpWindow  = 30 * time.Second
	// requeueRefused: a membership change etcd refused until members have been connected for a few seconds
	// (etcd.ErrClusterNotSettled) is asked again this often: the member asked refuses at once, from its own view of
	// its peers' connections, and grants it the moment they are old enough, which no event tells. Returned as an
	// error, each refusal doubled the workqueue's back-off for the cluster (5 ms, 10 ms, ..., 20 s after a dozen in
	// a row), and any other event that woke a pass in the window added one more.
	requeueRefused = 250 * time.Millisecond
)

// waitsOnEtcd are the waits that end by etcd's doing, with no Kubernetes event to say so.
var waitsOnEtcd = map[string]bool{
	etcdv1alpha1.ReasonWaitingForCatchUp: true, etcdv1alpha1.ReasonWaitingForRestart: true, etcdv1alpha1.ReasonWaitingForClusterVersion: true,
	etcdv1alpha1.ReasonWaitingForStorageVersion: true,
}

// notSettled is the wait that replaces a membership change etcd refused because a member has not been
// connected long enough (etcd.ErrClusterNotSettled). It names no new member, so that its status is the same on
// every pass until etcd accepts. A change every member has refused on its own since longer than refusedReportAfter
// is a wait for a human (MembershipChangeRefused) naming those members; its message gives the run's start, not its
// length, for the same reason.
func notSettled(refused plan.Action, err error, memberAt map[string]string, now time.Time) plan.Action {
	var run *etcd.RefusedError
	if errors.As(err, &run) && len(run.Refusing) > 0 && len(run.Unreachable) == 0 && now.Sub(run.Since) >= refusedReportAfter {
		names := make([]string, 0, len(run.Refusing))
		for _, ep := range run.Refusing {
			if name := memberAt[ep]; name != "" {
				names = append(names, name)
			} else {
				names = append(names, ep)
			}
		}
		sort.Strings(names)
		return plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonMembershipChangeRefused, Message: fmt.Sprintf(
			"etcd has refused a membership change (%s) since %s: every member, asked on its own (%s), answers \"unhealthy cluster\", "+
				"counting one of its peers as not connected for the last 5 s although the cluster serves. etcd can keep a peer "+
				"marked inactive after a failed send until one of the two restarts (etcd-io/etcd#14523); restarting one of these "+
				"members (kubectl delete pod) reconnects its peers. Steward does not restart it itself: while the cluster has no "+
				"member to spare, writes stop until it is back", refused.Reason, run.Since.UTC().Format(time.RFC3339), strings.Join(names, ", "))}
	}
	return plan.Action{Kind: plan.Wait, Reason: refused.Reason,
		Message: "waiting for etcd to accept a membership change: it refuses them until every member has been connected to the leader for a few seconds"}
}

// refusedReportAfter is how long every member may refuse a change on its own before the wait is a human's: etcd's
// window is 5 s after a peer (re)connects, and the members are asked on their own from etcd.AskEachAfter.
const refusedReportAfter = time.Minute

// requeueAfter is how soon the pass after one that planned action looks again.
func requeueAfter(action plan.Action) time.Duration {
	switch {
	case action.Kind == plan.None, action.Reason == etcdv1alpha1.ReasonHibernated, action.Reason == etcdv1alpha1.ReasonMaintenanceDeferred:
		// Nothing runs in a hibernated cluster: the spec's change, or a Pod's event, brings the next pass.
		return requeueSteady
	case action.Kind != plan.Wait || waitsOnEtcd[action.Reason]:
		return requeueInFlight
	default:
		return requeueProgressing
	}
}

// Reconciler reconciles EtcdClusters.
type Reconciler struct {
	Client client.Client
	// APIReader reads Secrets the cache does not hold (a user's, or cert-manager's: see reader); the Client
	// when nil.
	APIReader client.Reader
	Recorder  record.EventRecorder
	Etcd      *etcd.Pool
	Options   resources.Options
	// Nodes reads Nodes (through the cache) to move members off crowded nodes and zones (observeNodes); nil where
	// Steward may not read them (a namespace-scoped install), and members are then not moved for balance.
	Nodes client.Reader
	// Now is the clock for condition timestamps (injected for tests).
	Now func() time.Time
	// ReadApplier reads a standby applier Pod's report (GET :8080/status); nil for the real one (tests inject).
	ReadApplier func(ctx context.Context, podIP string) (pitr.StandbyStatus, error)
}

// The least this controller's code uses: it reads EtcdClusters and patches their status; it creates member Pods
// and PVCs, patches them (a Pod's image on a version change, a PVC's release annotations) and deletes them
// (removed members, UID-preconditioned); it only creates Services and creates or patches the budget (garbage
// collection deletes them with the cluster). Its objects carry blockOwnerDeletion owner references to the
// EtcdCluster, which needs update on etcdclusters/finalizers where OwnerReferencesPermissionEnforcement is on.
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdclusters,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdclusters/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdclusters/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=pods;persistentvolumeclaims,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;list;watch;create;patch
// A standby's applier is a Deployment it owns: created, rolled when its template changes, deleted on promotion.
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;delete
// A standby's write fence records what it takes from etcd's roles in a ConfigMap it owns, read past the cache.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;delete
// It reads EtcdBackups (the newest for the quorum-loss policy) and EtcdRestores, and creates the EtcdRestore of
// bootstrap.fromBackup and of the quorum-loss policy.
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdrestores,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdbackups,verbs=get;list;watch
// It manages the cluster's certificates in Secrets it owns (labelled; the cache holds only those).
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;delete
// With provider CertManager it creates a cert-manager Certificate per member and one for itself, owned by the
// cluster: it reads them (uncached, no watch), updates the fields it sets, and deletes those of removed members;
// and the cluster's own CA: an intermediate CA Certificate from the user's issuer and a namespaced CA Issuer on it.
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;create;update;delete
// +kubebuilder:rbac:groups=cert-manager.io,resources=issuers,verbs=get;list;create;update;delete

// SetupWithManager registers the controller: it watches EtcdClusters and the objects they own.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1alpha1.EtcdCluster{}).
		Owns(&corev1.Pod{}).
		Owns(&corev1.PersistentVolumeClaim{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		// Restores a user creates are not owned by the cluster: map them to it by spec.clusterName.
		Watches(&etcdv1alpha1.EtcdRestore{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			rs, ok := o.(*etcdv1alpha1.EtcdRestore)
			if !ok {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: rs.Namespace, Name: rs.Spec.ClusterName}}}
		})).
		Owns(&corev1.Secret{}).
		Named("etcdcluster").
		Complete(r)
}

// Reconcile runs one observe -> plan -> act -> status pass (docs/development/architecture.md, "A reconcile pass").
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, retErr error) {
	log := ctrl.LoggerFrom(ctx)
	cluster := &etcdv1alpha1.EtcdCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			// Owned objects go with it through garbage collection; only the etcd client and the cluster's counter
			// series are ours to drop.
			r.Etcd.Forget(req.String())
			metrics.Forget(req.Namespace, req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get EtcdCluster: %w", err)
	}
	deleting := !cluster.DeletionTimestamp.IsZero()
	if deleting && !controllerutil.ContainsFinalizer(cluster, AdoptionFinalizer) {
		return ctrl.Result{}, nil
	}
	// An adoption under way holds the cluster's deletion until Steward's members have left the source again
	// (AdoptionFinalizer); the passes of such a deletion plan an abort.
	if changed, err := r.keepAdoptionFinalizer(ctx, cluster, false); changed || err != nil {
		return ctrl.Result{}, err
	}

	// observe, the Kubernetes side: the cluster's Pods and PVCs, read once, read only.
	objs, err := r.observeObjects(ctx, cluster)
	if err != nil {
		return ctrl.Result{}, err
	}
	// plan TLS, then act's first stage: observing etcd needs Steward's client certificate (and the CA or
	// provider material it rests on) and its password, which this pass may have to create or renew. So the TLS
	// step is decided from the spec and the Pods alone (plan.DecideTLS), and only the writes that give access to
	// etcd are made before observing it. A failure here still lets the pass observe (with what the pool already
	// has) and report, but not act.
	tlsDecision := plan.DecideTLS(tlsSpecOf(cluster), tlsPodsOf(cluster, objs.pods))
	ts, accessErr := r.ensureTLSMaterial(ctx, cluster, objs.pods, tlsDecision)
	source, sourceErr := r.sourceCredentials(ctx, cluster)
	operatorSecret, operator, credsErr := r.prepareOperatorCredentials(ctx, cluster, source.password)
	accessErr = errors.Join(accessErr, sourceErr, credsErr)
	// observe, etcd's side, joined with the objects read above.
	obs, err := r.observe(ctx, cluster, objs, source)
	if err != nil {
		return ctrl.Result{}, errors.Join(accessErr, err)
	}
	obs.tls, obs.operator, obs.operatorSecret = ts, operator, operatorSecret
	obs.plan.TLSBlocked = tlsBlocked(tlsDecision, ts)
	// plan: the one step, and what the pass keeps in step besides.
	spec := specOf(cluster, r.Options)
	if deleting && spec.Adopt != nil {
		spec.Adopt.Handover = plan.HandoverAbort
	}
	decision := plan.Decide(spec, obs.plan)
	action := decision.Action
	// status, whatever happens from here on.
	defer func() {
		// A deletion's last pass may have let the cluster go (its finalizer removed): no status to write then.
		if err := r.writeStatus(ctx, cluster, obs, action, retErr); err != nil && retErr == nil && (!deleting || !apierrors.IsNotFound(err)) {
			retErr = err
		}
	}()
	if accessErr != nil {
		return ctrl.Result{}, accessErr
	}
	if deleting {
		// Only the abort's steps: nothing is kept in step for a cluster on its way out.
		return r.abortForDeletion(ctx, cluster, obs, action)
	}
	// act: the members' certificates and the objects that disrupt nothing, then the step.
	if err := r.keepInStep(ctx, cluster, ts, obs, decision); err != nil {
		return ctrl.Result{}, err
	}
	log.V(1).Info("Planned step", "EtcdCluster", klog.KObj(cluster), "action", action.Kind, "reason", action.Reason, "message", action.Message)
	if err := r.act(ctx, cluster, obs, action); err != nil {
		if errors.Is(err, etcd.ErrClusterNotSettled) {
			// Right after a member (re)started etcd refuses membership changes for a few seconds: not a failure,
			// and nothing to retry at once. Status says so without the new member's name, which each pass draws
			// afresh: a message that changed on every pass would wake the next pass at once, a spin.
			log.V(1).Info("Membership change refused until members settle", "EtcdCluster", klog.KObj(cluster), "action", action.Kind)
			action = notSettled(action, err, obs.memberAt(), r.Now())
			r.warnWaitStart(cluster, action)
			var run *etcd.RefusedError
			if errors.As(err, &run) && len(run.Refusing) > 0 {
				// Each member was dialed on its own (an authentication each, with a password): not four times a second.
				return ctrl.Result{RequeueAfter: requeueProgressing}, nil
			}
			return ctrl.Result{RequeueAfter: requeueRefused}, nil
		}
		return ctrl.Result{}, err
	}
	restartedClock(obs, action, r.Now())
	if action.Kind == plan.None {
		if err := r.checkUndeclaredUsers(ctx, cluster, obs); err != nil {
			return ctrl.Result{}, err
		}
	}
	requeue := requeueAfterPass(action, obs.plan)
	if until := untilWindow(obs, action, r.Now()); until > 0 && until < requeue {
		requeue = until
	}
	return ctrl.Result{RequeueAfter: standbyRequeue(obs, requeue)}, nil
}

// keepInStep is the part of act that disrupts no member and runs on every pass: the certificates of the members
// with a Pod, and (unless paused) the kubelet's refresh of their certificate volumes and grown file systems, the Services and the budget, and the
// marks on members' volumes the plan asked for.
func (r *Reconciler) keepInStep(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, ts *tlsState, obs *observation, decision plan.Decision) error {
	if err := r.ensureMemberCerts(ctx, cluster, ts, obs); err != nil {
		return err
	}
	// A standby's applier is no member and disrupts none; paused, it is only reported.
	if err := r.reconcileStandby(ctx, cluster, obs); err != nil {
		return err
	}
	if cluster.Spec.Paused {
		return nil
	}
	if err := r.refreshCertificates(ctx, cluster, ts, obs); err != nil {
		return err
	}
	if err := r.refreshResizedVolumes(ctx, cluster, obs); err != nil {
		return err
	}
	if err := r.ensureServices(ctx, cluster, obs, decision.BudgetMinAvailable); err != nil {
		return err
	}
	if err := r.recordVolumeTLS(ctx, cluster, decision.VolumeTLS); err != nil {
		return err
	}
	return r.recordRuns(ctx, cluster, decision.RunsToRecord)
}

// requeueAfterPass is requeueAfter, except that a settled cluster whose cluster version etcd is about to raise
// (the tail of an upgrade) is looked at again soon (nothing in Kubernetes changes when etcd raises it), and a pass
// while a learner that just started awaits its promotion very soon.
func requeueAfterPass(action plan.Action, obs plan.Observation) time.Duration {
	if action.Kind == plan.None && plan.ClusterVersionRising(obs) {
		return requeueInFlight
	}
	if (action.Kind == plan.PromoteLearner || action.Kind == plan.Wait) && learnerJustStarted(obs.Members) {
		return requeueComingUp
	}
	return requeueAfter(action)
}

// learnerJustStarted reports whether a learner's etcd container started less than comingUpWindow ago: its
// promotion is asked for on every pass, and etcd grants it once the learner has caught up.
func learnerJustStarted(members []plan.Member) bool {
	for _, m := range members {
		if m.HasPod && !m.PodDeleting && m.IsLearner && m.RunningFor > 0 && m.RunningFor < comingUpWindow {
			return true
		}
	}
	return false
}

// restartedClock starts the unhealthy clock of a down member again when this pass restarted it (on another
// release or image, or in another TLS mode): it gets the whole replaceUnhealthyAfter to start on its new Pod,
// instead of being replaced by the next pass, while its etcd is still starting, for the time it was down before.
func restartedClock(obs *observation, action plan.Action, now time.Time) {
	if action.Kind != plan.RollMember && action.Kind != plan.RestartMember {
		return
	}
	for _, name := range action.Members {
		if _, down := obs.unhealthySince[name]; down {
			obs.unhealthySince[name] = now
		}
	}
}

// upgradeStages are the releases the cluster may pass through on an upgrade of more than one minor, by minor:
// the operator's --upgrade-via, in the operator's image repository. None when the spec pins an image, because
// Steward cannot tell which image would hold another release then.
func upgradeStages(c *etcdv1alpha1.EtcdCluster, o resources.Options) map[string]plan.Release {
	if c.Spec.Image != "" || len(o.UpgradeVia) == 0 {
		return nil
	}
	stages := make(map[string]plan.Release, len(o.UpgradeVia))
	for _, r := range o.UpgradeVia {
		if v, err := plan.ParseVersion(r); err == nil {
			stages[v.MinorString()] = plan.Release{Version: r, Image: resources.ImageFor(c, r, o)}
		}
	}
	return stages
}

func specOf(c *etcdv1alpha1.EtcdCluster, o resources.Options) plan.Spec {
	s := plan.Spec{Replicas: int(c.Spec.Replicas), Version: c.Spec.Version, Image: resources.Image(c, o), Paused: c.Spec.Paused,
		Hibernate: etcdv1alpha1.HibernationRequested(c),
		TLS:       resources.TLSEnabled(c), ClientCertAuth: resources.ClientCertAuth(c),
		PeerCheck: resources.PeerAuthWanted(c), Storage: storageGoal(c), Auth: resources.AuthWanted(c)}
	if c.Spec.Etcd.SnapshotCount != nil {
		s.SnapshotCount = *c.Spec.Etcd.SnapshotCount
	}
	if c.Spec.ReplaceUnhealthyAfter != nil {
		s.ReplaceUnhealthyAfter = c.Spec.ReplaceUnhealthyAfter.Duration
	}
	s.FromBackup = etcdv1alpha1.BootstrapBackupName(c)
	if fe := fromExisting(c); fe != nil {
		s.Adopt = &plan.Adopt{Handover: string(fe.Handover), Quota: resources.QuotaBackendBytes(c), Endpoints: fe.Endpoints,
			StewardCA: resources.TLSMode(c) == etcdv1alpha1.TLSProviderSteward}
		if s.Adopt.Handover == "" {
			s.Adopt.Handover = plan.HandoverKeep
		}
	}
	s.Standby = c.Spec.Standby != nil
	s.RecoveryGrace = plan.DefaultRecoveryGrace
	s.UpgradeVia = upgradeStages(c, o)
	s.Maintenance = maintenanceOf(c)
	if m := c.Spec.Maintenance; m != nil && m.Window != nil {
		s.Maintenance.WindowVersionChanges = m.Window.VersionChanges
	}
	if q := c.Spec.QuorumLossRecovery; q != nil && q.Policy == etcdv1alpha1.QuorumLossRestoreLatestBackup {
		s.QuorumLossAfter = 10 * time.Minute
		if q.After != nil {
			s.QuorumLossAfter = q.After.Duration
		}
		s.RecoveryGrace = s.QuorumLossAfter
	}
	return s
}

// newMemberNames returns n candidate names <cluster>-<5 random characters> not used by any existing member.
// Random, never derived from a counter, so that a replaced member never gets an old member's name.
func newMemberNames(cluster string, n int, taken map[string]bool) []string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	var names []string
	for len(names) < n {
		suffix := make([]byte, 5)
		for i := range suffix {
			k, err := rand.Int(rand.Reader, big.NewInt(int64(len(alphabet))))
			if err != nil {
				panic(fmt.Sprintf("read random: %v", err)) // crypto/rand does not fail on Linux
			}
			suffix[i] = alphabet[k.Int64()]
		}
		name := cluster + "-" + string(suffix)
		if !taken[name] {
			taken[name] = true
			names = append(names, name)
		}
	}
	return names
}
