package etcdcluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/etcdauth"
	"steward.dev/steward/internal/pki"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// observeAuth learns whether etcd enforces authentication. etcd answers AuthStatus through raft (a proposal on
// every member), so it is asked only while status does not know or differs from the spec; otherwise status's
// record stands, as Steward is the one that switches it.
func (r *Reconciler) observeAuth(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) {
	if obs.plan.PasswordRejected {
		// etcd refuses a password only while it enforces authentication.
		on := true
		obs.plan.AuthEnabled = &on
		return
	}
	// An adoption's preflight asks every pass: the source is someone else's until it is admitted.
	if known := cluster.Status.AuthEnabled; known != nil && *known == resources.AuthWanted(cluster) && !checkingSource(cluster) {
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
	// Where members require client certificates, Steward's identity is its certificate's common name;
	// elsewhere its password user alone.
	identity := obs.operator.User
	var extra []string
	if resources.ClientCertAuth(cluster) {
		var err error
		if identity, err = r.clientIdentity(ctx, cluster); err != nil {
			return err
		}
		if identity != etcdauth.RootUser {
			extra = append(extra, identity)
		}
	} else if obs.operator == (etcd.Password{}) {
		return fmt.Errorf("no operator credentials to act with once auth is on (Secret %s)", resources.OperatorCredentialsSecretName(cluster))
	}
	if err := r.Etcd.EnableAuth(ctx, key, obs.endpoints, obs.operator, extra...); err != nil {
		return err
	}
	on := true
	obs.plan.AuthEnabled = &on
	if !resources.TLSEnabled(cluster) {
		r.tookStep(ctx, cluster, action, "Enabled auth", corev1.EventTypeWarning, "AuthEnabled",
			fmt.Sprintf("Turned etcd's authentication on without TLS; Steward acts as %q with the root role (password in Secret %s); "+
				"clients need an EtcdUser's password, which crosses the network unencrypted", identity, obs.operatorSecret),
			"identity", identity)
		return nil
	}
	msg := fmt.Sprintf("Turned etcd's authentication on; Steward acts as %q with the root role; clients need an EtcdUser's credentials", identity)
	if !resources.ClientCertAuth(cluster) {
		msg = fmt.Sprintf("Turned etcd's authentication on; Steward acts as %q with the root role (password in Secret %s); clients need an EtcdUser's password",
			identity, obs.operatorSecret)
	}
	r.tookStep(ctx, cluster, action, "Enabled auth", corev1.EventTypeNormal, "AuthEnabled", msg, "identity", identity)
	return nil
}

// ensureOperatorUser carries out EnsureOperatorUser: etcd refused Steward's password, and Steward makes its
// password user again through its client certificate.
func (r *Reconciler) ensureOperatorUser(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	if obs.operator == (etcd.Password{}) {
		return fmt.Errorf("no operator credentials to make the user with (Secret %s)", resources.OperatorCredentialsSecretName(cluster))
	}
	if err := r.Etcd.EnsureOperatorUser(ctx, client.ObjectKeyFromObject(cluster).String(), obs.endpoints, obs.operator); err != nil {
		return err
	}
	r.tookStep(ctx, cluster, action, "Made operator user", corev1.EventTypeNormal, "OperatorUserRestored",
		fmt.Sprintf("etcd refused Steward's password: made etcd user %s again with the password of Secret %s and the root role, through Steward's client certificate",
			obs.operator.User, obs.operatorSecret), "user", obs.operator.User)
	return nil
}

// prepareOperatorCredentials makes the operator credentials Secret where Steward must act as a password user
// (resources.PasswordAuth), and points the etcd pool at its password whenever it exists: also after the cluster
// switched to TLS, while members may still listen in plaintext, and harmless otherwise (etcd takes any password
// while auth is off, and where it refuses one the certificate acts). A Secret of that name the user made
// (with a password of their choosing, the one a restored store knows) is used as it is. It returns the Secret's
// name ("" when there is none) and the password. With a source password (an adoption's, sourceCredentials) the
// pool is dialed with that instead, while the operator's Secret is still made.
func (r *Reconciler) prepareOperatorCredentials(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, source etcd.Password) (string, etcd.Password, error) {
	key := client.ObjectKeyFromObject(cluster).String()
	setPassword := func(pw etcd.Password) {
		if source != (etcd.Password{}) {
			pw = source
		}
		r.Etcd.SetPassword(key, pw)
	}
	access := resources.AgentAccessFor(cluster)
	if access.CredentialsSecret == "" {
		setPassword(etcd.Password{})
		return "", etcd.Password{}, nil
	}
	name := access.CredentialsSecret
	secret := &corev1.Secret{}
	err := r.reader().Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		secret = nil
	case err != nil:
		return name, etcd.Password{}, fmt.Errorf("get Secret %s: %w", name, err)
	}
	if secret == nil && resources.PasswordAuth(cluster) && !cluster.Spec.Paused {
		password, from, err := r.operatorPassword(ctx, cluster)
		if err != nil {
			return "", etcd.Password{}, err
		}
		secret = resources.OperatorCredentialsSecret(cluster, password)
		if err := r.Client.Create(ctx, secret); err != nil {
			return "", etcd.Password{}, fmt.Errorf("create Secret %s: %w", name, err)
		}
		msg := fmt.Sprintf("Created Secret %s with a generated password for etcd user %s, which Steward acts as on this cluster: its members verify no client certificates", name, etcdauth.OperatorUser)
		if from != "" {
			msg = fmt.Sprintf("Created Secret %s for etcd user %s with the password of Secret %s: the cluster starts from a backup of that cluster, whose store knows it", name, etcdauth.OperatorUser, from)
		}
		ctrl.LoggerFrom(ctx).Info("Created operator credentials", "EtcdCluster", klog.KObj(cluster), "secret", name, "inherited", from)
		r.Recorder.Event(cluster, corev1.EventTypeNormal, "OperatorCredentialsCreated", msg)
	}
	user, password, ok := resources.OperatorCredentials(secret)
	if !ok {
		setPassword(etcd.Password{})
		if secret != nil {
			return name, etcd.Password{}, fmt.Errorf("the Secret %s holds no %s and %s: delete it for Steward to generate one, or write them", name, resources.SecretUsernameKey, resources.SecretPasswordKey)
		}
		return "", etcd.Password{}, nil
	}
	pw := etcd.Password{User: user, Password: password}
	setPassword(pw)
	return name, pw, nil
}

// operatorPassword is the password of a new operator credentials Secret: for a cluster that starts from a backup
// of another cluster whose operator credentials exist, that cluster's (the restored store knows it, if that
// cluster had auth on), else a generated one. from names the Secret it came from.
func (r *Reconciler) operatorPassword(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster) (password, from string, err error) {
	if name := etcdv1alpha1.BootstrapBackupName(cluster); name != "" && !cluster.Status.Bootstrapped {
		b := &etcdv1alpha1.EtcdBackup{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: name}, b)
		if err == nil && b.Spec.ClusterName != cluster.Name {
			src := &corev1.Secret{}
			srcName := resources.OperatorCredentialsSecretName(&etcdv1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: b.Spec.ClusterName}})
			if err := r.reader().Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: srcName}, src); err == nil {
				if _, p, ok := resources.OperatorCredentials(src); ok {
					return p, srcName, nil
				}
			}
		}
	}
	password, err = resources.GeneratePassword()
	return password, "", err
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
			declared[etcdv1alpha1.EtcdUserName(u)] = true
		}
	}
	protected := map[string]bool{}
	if resources.TLSEnabled(cluster) {
		identity, err := r.clientIdentity(ctx, cluster)
		if err != nil {
			return err
		}
		protected[identity] = true
	}
	undeclared := etcdauth.Undeclared(names, declared, protected)
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
