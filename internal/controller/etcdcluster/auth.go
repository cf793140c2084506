package etcdcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcdauth"
	"steward.dev/steward/internal/pki"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// authWanted is spec.auth.enabled.
func authWanted(cluster *etcdv1alpha1.EtcdCluster) bool {
	return cluster.Spec.Auth != nil && cluster.Spec.Auth.Enabled
}

// observeAuth learns whether etcd enforces authentication. etcd answers AuthStatus through raft (a proposal on
// every member), so it is asked only while status does not know or differs from the spec; otherwise status's
// record stands, as Steward is the one that switches it.
func (r *Reconciler) observeAuth(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) {
	if known := cluster.Status.AuthEnabled; known != nil && *known == authWanted(cluster) {
		obs.plan.AuthEnabled = known
		return
	}
	if !obs.plan.EtcdReachable || len(obs.endpoints) == 0 {
		return
	}
	enabled, err := r.Etcd.AuthEnabled(ctx, client.ObjectKeyFromObject(cluster).String(), obs.endpoints)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("Could not read whether auth is enabled", "error", err.Error())
		return
	}
	obs.plan.AuthEnabled = &enabled
}

// switchAuth carries out EnableAuth or DisableAuth.
func (r *Reconciler) switchAuth(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	key := client.ObjectKeyFromObject(cluster).String()
	if action.Kind == plan.DisableAuth {
		if err := r.Etcd.DisableAuth(ctx, key, obs.endpoints); err != nil {
			return err
		}
		off := false
		obs.plan.AuthEnabled = &off
		r.tookStep(ctx, cluster, action, "Disabled auth", corev1.EventTypeWarning, "AuthDisabled",
			"Turned etcd's authentication off: every client that reaches the cluster may do anything")
		return nil
	}
	identity, err := r.clientIdentity(ctx, cluster)
	if err != nil {
		return err
	}
	var extra []string
	if identity != etcdauth.RootUser {
		extra = append(extra, identity)
	}
	if err := r.Etcd.EnableAuth(ctx, key, obs.endpoints, extra...); err != nil {
		return err
	}
	on := true
	obs.plan.AuthEnabled = &on
	r.tookStep(ctx, cluster, action, "Enabled auth", corev1.EventTypeNormal, "AuthEnabled",
		fmt.Sprintf("Turned etcd's authentication on; Steward acts as %q with the root role; clients need an EtcdUser's credentials", identity),
		"identity", identity)
	return nil
}

// clientIdentity is the etcd user Steward's client certificate maps to: the common name of the certificate in
// the client Secret. Steward asks for root (providers Steward and CertManager), but a certificate the user
// provides (provider Secrets) may carry another name, and one cert-manager has not re-issued yet may carry an
// older one: that user gets the root role too, so Steward never locks itself out.
func (r *Reconciler) clientIdentity(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster) (string, error) {
	s, err := r.getSecret(ctx, cluster.Namespace, resources.ClientSecretName(cluster))
	if err != nil {
		return "", err
	}
	if s.secret == nil {
		return "", fmt.Errorf("client Secret %s does not exist", s.name)
	}
	cert, err := pki.ParseCertificate(s.secret.Data[resources.SecretCertKey])
	if err != nil {
		return "", fmt.Errorf("client Secret %s: %w", s.name, err)
	}
	if cert.Subject.CommonName == "" {
		return "", fmt.Errorf("client Secret %s: the certificate has no common name, which etcd needs as the user name", s.name)
	}
	return cert.Subject.CommonName, nil
}

// usersCheckInterval: how often, at most, etcd's users are compared with the cluster's EtcdUsers. etcd serves
// the user list through raft, so it is not read on every pass.
const usersCheckInterval = time.Minute

// checkUndeclaredUsers reports (and, with spec.auth.removeUndeclaredUsers, deletes) the etcd users no EtcdUser
// of the cluster declares, once a minute while authentication is on and the cluster is settled (action None).
func (r *Reconciler) checkUndeclaredUsers(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) error {
	st := &cluster.Status
	if on := obs.plan.AuthEnabled; on == nil || !*on {
		return nil
	}
	// At once after a spec change (removeUndeclaredUsers turned on), else once per interval.
	if st.UsersCheckedTime != nil && r.Now().Sub(st.UsersCheckedTime.Time) < usersCheckInterval && st.ObservedGeneration == cluster.Generation {
		return nil
	}
	key := client.ObjectKeyFromObject(cluster).String()
	names, err := r.Etcd.UserNames(ctx, key, obs.endpoints)
	if err != nil {
		return err
	}
	var users etcdv1alpha1.EtcdUserList
	if err := r.Client.List(ctx, &users, client.InNamespace(cluster.Namespace)); err != nil {
		return fmt.Errorf("list EtcdUsers: %w", err)
	}
	declared := map[string]bool{}
	for i := range users.Items {
		if u := &users.Items[i]; u.Spec.ClusterName == cluster.Name {
			declared[etcdauth.UserName(u)] = true
		}
	}
	identity, err := r.clientIdentity(ctx, cluster)
	if err != nil {
		return err
	}
	undeclared := etcdauth.Undeclared(names, declared, map[string]bool{identity: true})
	obs.users = &userCheck{checked: metav1.NewTime(r.Now()), undeclared: undeclared}
	if len(undeclared) == 0 || cluster.Spec.Auth == nil || !cluster.Spec.Auth.RemoveUndeclaredUsers || cluster.Spec.Paused {
		return nil
	}
	for _, name := range undeclared {
		if err := r.Etcd.DeleteUser(ctx, key, obs.endpoints, name, false); err != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("Removed undeclared etcd user", "EtcdCluster", klog.KObj(cluster), "user", name)
		r.Recorder.Eventf(cluster, corev1.EventTypeWarning, "UndeclaredUserRemoved",
			"Deleted etcd user %s and its role: no EtcdUser declares it (spec.auth.removeUndeclaredUsers)", name)
	}
	obs.users.undeclared = nil
	return nil
}

// userCheck is one comparison of etcd's users with the cluster's EtcdUsers, for status.
type userCheck struct {
	checked    metav1.Time
	undeclared []string
}
