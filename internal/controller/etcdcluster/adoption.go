package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/etcdauth"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// Adoption of a running etcd (spec.bootstrap.fromExisting; the decisions are internal/plan's adoption.go). This
// file reads the source for the planner and keeps the adoption's memory in status: the source's cluster ID and
// members recorded when the preflight admitted it, and those since retired. A member etcd lists under a recorded
// ID is the source's (plan.Member.External), never a stray.

// fromExisting is the cluster's spec.bootstrap.fromExisting, nil without one.
func fromExisting(c *etcdv1alpha1.EtcdCluster) *etcdv1alpha1.ExistingSource {
	if b := c.Spec.Bootstrap; b != nil {
		return b.FromExisting
	}
	return nil
}

// adopting reports whether the cluster adopts a running etcd and the adoption is not complete.
func adopting(c *etcdv1alpha1.EtcdCluster) bool {
	return fromExisting(c) != nil && (c.Status.Adoption == nil || c.Status.Adoption.Phase != etcdv1alpha1.AdoptionComplete)
}

// checkingSource reports whether the cluster adopts a source the preflight has not admitted yet.
func checkingSource(c *etcdv1alpha1.EtcdCluster) bool {
	return adopting(c) && !admittedSource(c)
}

// admittedSource reports whether status records the admitted source.
func admittedSource(c *etcdv1alpha1.EtcdCluster) bool {
	a := c.Status.Adoption
	return a != nil && a.ClusterID != ""
}

// recordedSource are the IDs of the source's members status records (still members, or retired).
func recordedSource(c *etcdv1alpha1.EtcdCluster) map[uint64]bool {
	out := map[uint64]bool{}
	if a := c.Status.Adoption; a != nil {
		for _, list := range [][]etcdv1alpha1.ExternalMember{a.ExternalMembers, a.Retired} {
			for _, m := range list {
				if id, err := etcd.ParseID(m.ID); err == nil {
					out[id] = true
				}
			}
		}
	}
	return out
}

// sourceEndpoints are the endpoints a pass asks besides the member Pods': the spec's, and once the source is
// admitted the client URLs of the recorded source members not retired too. The spec's stay because the client
// URLs a source advertises may not be reachable from Steward (a source behind NAT, or advertising addresses of
// its own network): each answer names the member that gave it, so an endpoint of any address serves. A spec
// endpoint that is a retired member's recorded client URL is left out; one reaching a retired member under
// another address answers for a member etcd no longer lists, which assemble ignores.
func sourceEndpoints(c *etcdv1alpha1.EtcdCluster) []string {
	fe := fromExisting(c)
	if fe == nil || !adopting(c) {
		return nil
	}
	if !admittedSource(c) {
		return fe.Endpoints
	}
	var out, retired []string
	for _, m := range c.Status.Adoption.Retired {
		retired = append(retired, m.ClientURLs...)
	}
	for _, m := range c.Status.Adoption.ExternalMembers {
		out = append(out, m.ClientURLs...)
	}
	for _, u := range fe.Endpoints {
		if !slices.Contains(retired, u) {
			out = append(out, u)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// sourceHosts are the hosts of the adopted source's endpoints and of its recorded members' client URLs, while
// the adoption is under way (etcd.TLS.SourceHosts): their certificates name their own addresses.
func sourceHosts(c *etcdv1alpha1.EtcdCluster) []string {
	var out []string
	for _, ep := range sourceEndpoints(c) {
		if u, err := url.Parse(ep); err == nil && u.Hostname() != "" {
			out = append(out, u.Hostname())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// externalOf decides, in assemble, whether etcd's member em (named name by etcdMemberNames) is the source's: one
// of the recorded IDs once the source is admitted; before that, any member that is not one of Steward's (which
// has none then).
func (a *assembly) externalOf(em etcd.Member, name string) bool {
	if !adopting(a.cluster) {
		return false
	}
	if admittedSource(a.cluster) {
		return a.recorded[em.ID]
	}
	_, ours := a.members[name]
	return !ours
}

// addExternalStatuses gives the source's members their status answers: by the member ID an answer carries, or,
// for an endpoint that did not answer, by the client URLs etcd lists for the member.
func (a *assembly) addExternalStatuses(view etcd.ClusterView) {
	obs := a.obs
	byURL := map[string]string{}
	for _, em := range view.Members {
		if name := obs.nameOf[em.ID]; a.members[name] != nil && a.members[name].External {
			for _, u := range em.ClientURLs {
				byURL[u] = name
			}
		}
	}
	endpoints := make([]string, 0, len(view.Statuses))
	for ep := range view.Statuses {
		endpoints = append(endpoints, ep)
	}
	sort.Strings(endpoints)
	for _, ep := range endpoints {
		s := view.Statuses[ep]
		name := byURL[ep]
		if s.Err == nil {
			name = obs.nameOf[s.MemberID]
		}
		m := a.members[name]
		if m == nil || !m.External {
			continue
		}
		if prev, ok := obs.statusOf[name]; ok && prev.Err == nil {
			continue // answered at another of its endpoints
		}
		a.takeStatus(name, m, s)
	}
}

// observeAdoption gives the planner the adoption (plan.Observation.Adoption), and the pass the status it
// records: the source as the preflight reads it until it is admitted, then the recorded cluster ID and which
// recorded members have left etcd.
func observeAdoption(cluster *etcdv1alpha1.EtcdCluster, obs *observation) {
	fe := fromExisting(cluster)
	if fe == nil || !adopting(cluster) {
		return
	}
	ad := &plan.Adoption{Admitted: admittedSource(cluster), ObservedClusterID: obs.view.ClusterID, CredentialsInUse: obs.source.password.User != ""}
	if a := cluster.Status.Adoption; a != nil {
		ad.OperatorUser = a.OperatorUser
	}
	obs.plan.Adoption = ad
	if !ad.Admitted {
		ad.Source = sourceOf(fe, obs)
		return
	}
	obs.plan.Bootstrapped = true // the source formed long ago
	ad.ClusterID, _ = etcd.ParseID(cluster.Status.Adoption.ClusterID)
	ad.Retired = len(cluster.Status.Adoption.Retired) > 0
	if obs.view.ListErr == nil {
		listed := map[uint64]bool{}
		for _, em := range obs.view.Members {
			listed[em.ID] = true
		}
		for _, m := range cluster.Status.Adoption.ExternalMembers {
			if id, err := etcd.ParseID(m.ID); err == nil && !listed[id] && ad.ObservedClusterID == ad.ClusterID {
				ad.Retired = true
			}
		}
	}
}

// sourceOf is what the preflight decides on: the source's member list with each member's status answer, its
// alarms and auth state.
func sourceOf(fe *etcdv1alpha1.ExistingSource, obs *observation) plan.Source {
	src := plan.Source{ClusterID: obs.view.ClusterID, CredentialsProblem: obs.source.problem, User: obs.source.password.User,
		UserIsRoot: obs.source.isRoot}
	if src.User != "" && obs.plan.PasswordRejected {
		src.CredentialsProblem = fmt.Sprintf("the source refuses the password of etcd user %s (Secret %s): put the password etcd knows into the Secret",
			src.User, fe.CredentialsSecret)
	}
	if obs.view.ListErr != nil {
		src.ListErr = obs.view.ListErr.Error()
		src.TLSProblem = handshakeProblem(src.ListErr)
		return src
	}
	for _, m := range obs.plan.Members {
		if !m.External || !m.InEtcd {
			continue
		}
		sm := plan.SourceMember{ID: m.ID, Name: m.EtcdName, IsLearner: m.IsLearner, Healthy: m.Healthy, Version: m.RunningVersion, DBSize: m.DBSize}
		for _, em := range obs.view.Members {
			if em.ID == m.ID {
				sm.PeerURLs, sm.ClientURLs = em.PeerURLs, em.ClientURLs
			}
		}
		if s, ok := obs.statusOf[m.Name]; ok {
			sm.Answered = s.Err == nil
			switch {
			case s.Err != nil:
				sm.StatusErr = s.Err.Error()
			case len(s.Errors) > 0:
				sm.StatusErr = strings.Join(s.Errors, "; ")
			case s.LeaderID == 0:
				sm.StatusErr = "it knows no leader"
			}
		} else {
			sm.StatusErr = "none of its client URLs was asked: list them in spec.bootstrap.fromExisting.endpoints"
		}
		src.Members = append(src.Members, sm)
	}
	if obs.view.AlarmErr != nil {
		src.Alarms = append(src.Alarms, "unreadable: "+obs.view.AlarmErr.Error())
	}
	for _, al := range obs.view.Alarms {
		src.Alarms = append(src.Alarms, fmt.Sprintf("%s on member %s", al.Type, etcd.FormatID(al.MemberID)))
	}
	if e := obs.plan.AuthEnabled; e != nil {
		src.AuthKnown, src.AuthEnabled = true, *e
	}
	return src
}

// handshakeProblem is the part of a dial error that says a TLS handshake failed (gRPC hands it over as text, in
// its status message), "" for any other error.
func handshakeProblem(err string) string {
	at := -1
	for _, mark := range []string{"x509: ", "tls: "} {
		if i := strings.Index(err, mark); i >= 0 && (at < 0 || i < at) {
			at = i
		}
	}
	if at < 0 {
		return ""
	}
	return strings.TrimRight(err[at:], `"`)
}

// sourceAccess is how a pass reads an adopted source: as the user of spec.bootstrap.fromExisting
// .credentialsSecret until Steward has added its own user to the source (status.adoption.operatorUser).
type sourceAccess struct {
	// password is the Secret's user and password the pool is dialed with this pass (zero: the operator's, or none).
	password etcd.Password
	// problem says why the Secret cannot serve (missing, without a username and password).
	problem string
	// isRoot: etcd lists the root role among the user's roles (asked only before admission, with auth on).
	isRoot bool
}

// sourceCredentials reads the adoption's credentials Secret while Steward acts as its user: an adoption not
// complete whose source holds no user of Steward's yet. A Secret that cannot serve is the preflight's refusal
// (or, after admission, a wait), never an error of the pass.
func (r *Reconciler) sourceCredentials(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster) (sourceAccess, error) {
	fe := fromExisting(cluster)
	if fe == nil || fe.CredentialsSecret == "" || !adopting(cluster) || (cluster.Status.Adoption != nil && cluster.Status.Adoption.OperatorUser != "") {
		return sourceAccess{}, nil
	}
	secret := &corev1.Secret{}
	err := r.reader().Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: fe.CredentialsSecret}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return sourceAccess{problem: fmt.Sprintf("Secret %s (spec.bootstrap.fromExisting.credentialsSecret) does not exist", fe.CredentialsSecret)}, nil
	case err != nil:
		return sourceAccess{}, fmt.Errorf("get Secret %s: %w", fe.CredentialsSecret, err)
	}
	user, password, ok := resources.OperatorCredentials(secret)
	if !ok {
		return sourceAccess{problem: fmt.Sprintf("Secret %s (spec.bootstrap.fromExisting.credentialsSecret) holds no %s and %s; this version authenticates to a source with a user's password only",
			fe.CredentialsSecret, resources.SecretUsernameKey, resources.SecretPasswordKey)}, nil
	}
	return sourceAccess{password: etcd.Password{User: user, Password: password}}, nil
}

// observeSourceUser asks, before admission, whether the credentials Secret's user holds the root role on a source
// with authentication on (plan.Source.UserIsRoot).
func (r *Reconciler) observeSourceUser(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) {
	user := obs.source.password.User
	if user == "" || !checkingSource(cluster) || obs.plan.PasswordRejected || obs.plan.AuthEnabled == nil || !*obs.plan.AuthEnabled || len(obs.endpoints) == 0 {
		return
	}
	roles, err := r.Etcd.UserRoles(ctx, client.ObjectKeyFromObject(cluster).String(), obs.endpoints, user)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("Could not read the roles of the source's user", "user", user, "error", err.Error())
		return
	}
	obs.source.isRoot = slices.Contains(roles, etcdauth.RootRole)
}

// addSourceOperatorUser carries out plan.AddSourceOperatorUser: Steward's password user, with the root role,
// made on the source through the credentials Secret's user (the pool's this pass); status records it, and the
// next pass acts as it.
func (r *Reconciler) addSourceOperatorUser(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	if obs.operator == (etcd.Password{}) {
		return fmt.Errorf("no operator credentials to add to the source (Secret %s)", resources.OperatorCredentialsSecretName(cluster))
	}
	if err := r.Etcd.EnsureOperatorUser(ctx, client.ObjectKeyFromObject(cluster).String(), obs.endpoints, obs.operator); err != nil {
		return err
	}
	obs.operatorUserAdded = true
	r.tookStep(ctx, cluster, action, "Added operator user to the source", corev1.EventTypeNormal, etcdv1alpha1.ReasonAddingOperatorUser,
		fmt.Sprintf("Added etcd user %s with the root role to the source (password in Secret %s); Steward acts as it from now on, and the source's users and roles stay as they were",
			obs.operator.User, obs.operatorSecret), "user", obs.operator.User)
	return nil
}

// removeSourceOperatorUser carries out plan.RemoveSourceOperatorUser: the user Steward added is deleted again
// (acting as that very user, which holds the root role), the source as Steward found it.
func (r *Reconciler) removeSourceOperatorUser(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	user := cluster.Status.Adoption.OperatorUser
	if err := r.Etcd.DeleteUser(ctx, client.ObjectKeyFromObject(cluster).String(), obs.endpoints, user, false); err != nil {
		return err
	}
	obs.operatorUserRemoved = true
	r.tookStep(ctx, cluster, action, "Removed operator user from the source", corev1.EventTypeNormal, etcdv1alpha1.ReasonRemovingOperatorUser,
		fmt.Sprintf("Deleted etcd user %s, which Steward had added to the source: adoption aborted", user), "user", user)
	return nil
}

// adoptSource carries out plan.AdoptSource: the admitted source's cluster ID and members go into status (written
// at the end of the pass, statusAdoption); nothing on the source changes.
func (r *Reconciler) adoptSource(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	obs.admitted = true
	obs.plan.Bootstrapped = true
	r.tookStep(ctx, cluster, action, "Admitted source cluster", corev1.EventTypeNormal, etcdv1alpha1.ReasonSourceAdmitted, action.Message,
		"clusterID", etcd.FormatID(obs.view.ClusterID))
	return nil
}

// statusAdoption writes status.adoption: the memory (cluster ID and recorded members, kept whatever a pass
// reads), the source's members as last observed, those retired, and the phase.
func (r *Reconciler) statusAdoption(cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) {
	fe := fromExisting(cluster)
	if fe == nil {
		return
	}
	st := &cluster.Status
	if st.Adoption == nil {
		st.Adoption = &etcdv1alpha1.AdoptionStatus{Phase: etcdv1alpha1.AdoptionChecking}
	}
	ad := st.Adoption
	if ad.Phase == etcdv1alpha1.AdoptionComplete {
		return
	}
	switch {
	case obs.operatorUserAdded:
		ad.OperatorUser = obs.operator.User
	case obs.operatorUserRemoved:
		ad.OperatorUser = ""
	}
	if obs.admitted {
		now := metav1.NewTime(r.Now())
		ad.ClusterID, ad.AdmittedTime = etcd.FormatID(obs.view.ClusterID), &now
		ad.ExternalMembers, ad.Retired = nil, nil
		for _, em := range obs.view.Members {
			ad.ExternalMembers = append(ad.ExternalMembers, etcdv1alpha1.ExternalMember{ID: etcd.FormatID(em.ID), Name: em.Name,
				PeerURLs: em.PeerURLs, ClientURLs: em.ClientURLs})
		}
	}
	if ad.ClusterID == "" {
		ad.Phase = etcdv1alpha1.AdoptionChecking
		if action.Reason == etcdv1alpha1.ReasonAdoptionAborted {
			ad.Phase = etcdv1alpha1.AdoptionAborted
		}
		return
	}
	if obs.view.ListErr == nil && obs.view.ClusterID != 0 && etcd.FormatID(obs.view.ClusterID) == ad.ClusterID {
		ad.ExternalMembers, ad.Retired = observedExternals(obs, ad)
	}
	handover := fe.Handover
	if !cluster.DeletionTimestamp.IsZero() {
		handover = etcdv1alpha1.HandoverAbort // a deletion aborts (AdoptionFinalizer)
	}
	ad.Phase = adoptionPhase(handover, ad, obs, action)
}

// observedExternals splits the recorded source members into those etcd still lists (with what this pass saw of
// them) and those gone from its list (retired, by Steward or by hand).
func observedExternals(obs *observation, ad *etcdv1alpha1.AdoptionStatus) (listed, retired []etcdv1alpha1.ExternalMember) {
	byID := map[uint64]plan.Member{}
	for _, m := range obs.plan.Members {
		if m.External && m.InEtcd {
			byID[m.ID] = m
		}
	}
	retired = append(retired, ad.Retired...)
	for _, em := range ad.ExternalMembers {
		id, err := etcd.ParseID(em.ID)
		if err != nil {
			continue
		}
		m, ok := byID[id]
		if !ok {
			em.Role, em.Healthy, em.Version = "", false, ""
			retired = append(retired, em)
			continue
		}
		em.Healthy, em.Version, em.Role = m.Healthy, m.RunningVersion, etcdv1alpha1.RoleFollower
		switch {
		case m.IsLearner:
			em.Role = etcdv1alpha1.RoleLearner
		case m.ID == obs.plan.LeaderID:
			em.Role = etcdv1alpha1.RoleLeader
		case obs.plan.LeaderID == 0:
			em.Role = etcdv1alpha1.RoleUnknown
		}
		listed = append(listed, em)
	}
	return listed, retired
}

// adoptionPhase is the phase status reports, from the recorded adoption and the pass's step.
func adoptionPhase(handover etcdv1alpha1.Handover, ad *etcdv1alpha1.AdoptionStatus, obs *observation, action plan.Action) etcdv1alpha1.AdoptionPhase {
	switch {
	case len(ad.ExternalMembers) == 0 && len(ad.Retired) > 0:
		return etcdv1alpha1.AdoptionComplete
	case handover == etcdv1alpha1.HandoverAbort && len(ad.Retired) == 0:
		if action.Reason == etcdv1alpha1.ReasonAdoptionAborted {
			return etcdv1alpha1.AdoptionAborted
		}
		return etcdv1alpha1.AdoptionAborting
	case len(ad.Retired) > 0 || action.Reason == etcdv1alpha1.ReasonRetiringSourceMember:
		return etcdv1alpha1.AdoptionRetiring
	}
	return etcdv1alpha1.AdoptionMigrating
}

// AdoptionFinalizer holds an EtcdCluster that adopts a running etcd while Steward's members vote beside the
// source's and no source member has left: garbage collection deleting Steward's Pods then would leave the source
// with dead voters (3 of 6: no quorum). Deleting such a cluster aborts the adoption first (Steward's members are
// removed from etcd one at a time), and only then lets its objects go.
const AdoptionFinalizer = "etcd.steward.dev/abort-adoption"

// adoptionHolds reports whether the cluster's deletion must wait for an abort: an adoption under way, before any
// source member left. Once one has, the cluster is mostly Steward's and is deleted as any other.
func adoptionHolds(c *etcdv1alpha1.EtcdCluster) bool {
	if !adopting(c) {
		return false
	}
	a := c.Status.Adoption
	return a == nil || (len(a.Retired) == 0 && a.Phase != etcdv1alpha1.AdoptionAborted)
}

// keepAdoptionFinalizer adds the finalizer while adoptionHolds, and takes it away once it does not (or, for a
// cluster being deleted, once the abort the deletion asked for is done, abortDone). It reports whether it
// changed the object; the pass then ends and the update brings the next.
func (r *Reconciler) keepAdoptionFinalizer(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, abortDone bool) (bool, error) {
	has := controllerutil.ContainsFinalizer(cluster, AdoptionFinalizer)
	want := adoptionHolds(cluster) && !abortDone
	if has == want {
		return false, nil
	}
	patch := client.MergeFromWithOptions(cluster.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if want {
		controllerutil.AddFinalizer(cluster, AdoptionFinalizer)
	} else {
		controllerutil.RemoveFinalizer(cluster, AdoptionFinalizer)
	}
	if err := r.Client.Patch(ctx, cluster, patch); err != nil {
		return false, fmt.Errorf("update the adoption's finalizer: %w", err)
	}
	return true, nil
}

// abortForDeletion is a deleting cluster's pass: the abort's step, and the finalizer taken away once Steward's
// members have left the source (the plan's AdoptionAborted), or once a source member has left after all.
func (r *Reconciler) abortForDeletion(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) (ctrl.Result, error) {
	done := action.Reason == etcdv1alpha1.ReasonAdoptionAborted || action.Reason == etcdv1alpha1.ReasonAdoptionAbortTooLate
	if done {
		_, err := r.keepAdoptionFinalizer(ctx, cluster, true)
		return ctrl.Result{}, err
	}
	if err := r.act(ctx, cluster, obs, action); err != nil {
		if errors.Is(err, etcd.ErrClusterNotSettled) {
			return ctrl.Result{RequeueAfter: requeueRefused}, nil
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeueAfter(action)}, nil
}

// unaskedSourceURLs are, before the preflight admitted a source, the client URLs its member list names that the
// pass did not ask (asked): the preflight needs every member's status, and the spec may name one endpoint.
func unaskedSourceURLs(c *etcdv1alpha1.EtcdCluster, view etcd.ClusterView, asked []string) []string {
	if !adopting(c) || admittedSource(c) || view.ListErr != nil {
		return nil
	}
	var out []string
	for _, m := range view.Members {
		for _, u := range m.ClientURLs {
			if !slices.Contains(asked, u) && !slices.Contains(out, u) {
				out = append(out, u)
			}
		}
	}
	return out
}
