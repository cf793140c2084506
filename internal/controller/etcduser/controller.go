// Package etcduser is the EtcdUser controller: it keeps one application's identity on an EtcdCluster in place.
// Each pass issues or renews the user's client certificate from the cluster's CA and generates its password
// (each in a Secret the EtcdUser owns), reads the user and its role from etcd, and applies the changes
// internal/etcdauth computes, so that drift made in etcd by hand is undone. Deleting an EtcdUser deletes the etcd
// user and its role first (a finalizer), so that its credentials stop working at once; its Secrets go with it.
package etcduser

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/controller/certissue"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/etcdauth"
	"steward.dev/steward/internal/pki"
	"steward.dev/steward/internal/resources"
)

const (
	// finalizer holds an EtcdUser until its etcd user and role are deleted.
	finalizer = "etcd.steward.dev/etcd-user"
	// requeueSteady: how often a Ready user is compared with etcd again (drift made by hand), at most.
	requeueSteady = time.Minute
	// requeueWaiting: how soon a user waiting for its cluster is tried again, besides the cluster's own events.
	requeueWaiting = 15 * time.Second
	// annotationPasswordApplied holds the sha256 of the password last set in etcd, on the password Secret: a
	// Secret whose password no longer matches it (rotated by deleting or editing the Secret) is set again.
	annotationPasswordApplied = "etcd.steward.dev/password-applied-sha256" //nolint:gosec // an annotation's name, not a credential
)

// Reconciler reconciles EtcdUsers.
type Reconciler struct {
	Client client.Client
	// APIReader reads past the cache where a stale read would be destructive (see recordedPassword); the
	// manager's when nil.
	APIReader client.Reader
	Recorder  record.EventRecorder
	// Etcd holds this controller's own clients, one per cluster, dialed with Steward's client certificate.
	Etcd *etcd.Pool
	// Options are the operator's resource options: the cluster domain in the name members' certificates carry.
	Options resources.Options
	// Now is the clock (injected for tests).
	Now func() time.Time
}

// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdusers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdusers/status,verbs=patch
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdusers/finalizers,verbs=update
// +kubebuilder:rbac:groups=etcd.steward.dev,resources=etcdclusters,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;delete
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;create;update;delete

// SetupWithManager registers the controller: it watches EtcdUsers, the Secrets they own, and their clusters (a
// cluster that becomes available, or whose auth is switched, wakes its users).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &etcdv1alpha1.EtcdUser{}, "spec.clusterName",
		func(o client.Object) []string { return []string{o.(*etcdv1alpha1.EtcdUser).Spec.ClusterName} }); err != nil {
		return fmt.Errorf("index EtcdUsers by cluster: %w", err)
	}
	toUsers := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		var users etcdv1alpha1.EtcdUserList
		if err := r.Client.List(ctx, &users, client.InNamespace(o.GetNamespace()), client.MatchingFields{"spec.clusterName": o.GetName()}); err != nil {
			return nil
		}
		reqs := make([]reconcile.Request, 0, len(users.Items))
		for _, u := range users.Items {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: u.Namespace, Name: u.Name}})
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(&etcdv1alpha1.EtcdUser{}).
		Owns(&corev1.Secret{}).
		Watches(&etcdv1alpha1.EtcdCluster{}, toUsers, builder.WithPredicates(clusterChangeForUsers)).
		Named("etcduser").
		Complete(r)
}

// clusterChangeForUsers passes the cluster updates its users act on: auth switched, which members are healthy,
// the TLS provider, the spec, or a standby's promotion done (its users get their declared permissions). A cluster's status changes on most of its passes (revision, sizes), and each user
// pass costs etcd three raft proposals (auth reads go through raft), so the rest is left to the periodic pass.
var clusterChangeForUsers = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, okOld := e.ObjectOld.(*etcdv1alpha1.EtcdCluster)
	n, okNew := e.ObjectNew.(*etcdv1alpha1.EtcdCluster)
	if !okOld || !okNew {
		return true
	}
	return o.Generation != n.Generation || !reflect.DeepEqual(o.Status.AuthEnabled, n.Status.AuthEnabled) ||
		!reflect.DeepEqual(healthyVoters(o), healthyVoters(n)) || resources.TLSMode(o) != resources.TLSMode(n) ||
		etcdv1alpha1.WritesFenced(o) != etcdv1alpha1.WritesFenced(n)
}}

// pass is one reconcile's outcome for the Ready condition.
type pass struct {
	reason, message string
	requeue         time.Duration
}

// Reconcile runs one pass: credentials, then etcd, then status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	user := &etcdv1alpha1.EtcdUser{}
	if err := r.Client.Get(ctx, req.NamespacedName, user); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cluster := &etcdv1alpha1.EtcdCluster{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: user.Namespace, Name: user.Spec.ClusterName}, cluster)
	if err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("get EtcdCluster %s: %w", user.Spec.ClusterName, err)
	}
	if apierrors.IsNotFound(err) {
		cluster = nil
	}
	if !user.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, user, cluster)
	}
	if controllerutil.AddFinalizer(user, finalizer) {
		if err := r.Client.Update(ctx, user); err != nil {
			return ctrl.Result{}, fmt.Errorf("add finalizer: %w", err)
		}
	}
	before := user.DeepCopy()
	p, passErr := r.sync(ctx, user, cluster)
	user.Status.ObservedGeneration = user.Generation
	user.Status.UserName = etcdv1alpha1.EtcdUserName(user)
	if cluster != nil && cluster.Status.AuthEnabled != nil {
		user.Status.AuthEnabled = *cluster.Status.AuthEnabled
	}
	ready := metav1.Condition{Type: etcdv1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: p.reason,
		Message: p.message, ObservedGeneration: user.Generation}
	if p.reason == etcdv1alpha1.ReasonApplied {
		ready.Status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&user.Status.Conditions, ready)
	if !equality.Semantic.DeepEqual(before.Status, user.Status) {
		if err := r.Client.Status().Patch(ctx, user, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, errors.Join(passErr, fmt.Errorf("write status: %w", err))
		}
	}
	if passErr != nil {
		return ctrl.Result{}, passErr
	}
	return ctrl.Result{RequeueAfter: p.requeue}, nil
}

// sync puts the user's credentials and etcd entries in place and returns what Ready says. An error is returned
// only for what a retry may cure (the API server, etcd); what the user must fix is a reason. The steps run in
// this order because each needs the one before: the name must be this user's before anything is written, the
// credentials must exist before etcd is told the password, and status records only what etcd took.
func (r *Reconciler) sync(ctx context.Context, user *etcdv1alpha1.EtcdUser, cluster *etcdv1alpha1.EtcdCluster) (pass, error) {
	if cluster == nil {
		return pass{reason: etcdv1alpha1.ReasonClusterNotFound, requeue: requeueWaiting,
			message: fmt.Sprintf("EtcdCluster %s does not exist in namespace %s", user.Spec.ClusterName, user.Namespace)}, nil
	}
	want, err := etcdauth.Desired(authSpec(user))
	if err != nil {
		return pass{reason: etcdv1alpha1.ReasonInvalidSpec, message: err.Error()}, nil
	}
	if etcdv1alpha1.WritesFenced(cluster) {
		// A standby's fence makes every role read-only until promotion; a user's own role granted as declared
		// would open writes the fence does not record, and the fence would take them again.
		want = etcdauth.FencedUser(want)
	}
	if p, err := r.claimName(ctx, user, cluster, want.Name); err != nil || p != nil {
		return derefPass(p), err
	}
	// What the last pass recorded, before this one overwrites it: whether Steward gave the etcd user a password,
	// and which Secrets it wrote (those the spec no longer asks for go).
	hadPassword := user.Status.PasswordSecretName != ""
	if err := r.dropSecrets(ctx, user); err != nil {
		return pass{reason: etcdv1alpha1.ReasonEtcdError, message: err.Error()}, err
	}
	cred, p, err := r.ensureCredentials(ctx, user, cluster, want.Name)
	if err != nil || p != nil {
		return derefPass(p), err
	}
	missing, p, err := r.applyToEtcd(ctx, user, cluster, want, cred, hadPassword)
	if err != nil || p != nil {
		return derefPass(p), err
	}
	return r.applied(user, cluster, want, cred.cert, missing), nil
}

// claimName stops the pass (a non-nil pass) when another EtcdUser, created before this one, owns the etcd user
// name: two EtcdUsers writing one etcd user would undo each other's password and roles.
func (r *Reconciler) claimName(ctx context.Context, user *etcdv1alpha1.EtcdUser, cluster *etcdv1alpha1.EtcdCluster, name string) (*pass, error) {
	owner, err := r.owner(ctx, user, name)
	if err != nil {
		return &pass{reason: etcdv1alpha1.ReasonEtcdError, message: err.Error()}, err
	}
	if owner != nil && owner.UID != user.UID {
		// The owner's record of the role goes with the name: if this user takes over, the role is still
		// Steward's.
		user.Status.CreatedRole = roleCreatedBySteward(owner)
		return &pass{reason: etcdv1alpha1.ReasonUserNameConflict, requeue: requeueWaiting,
			message: fmt.Sprintf("etcd user %s of EtcdCluster %s belongs to EtcdUser %s, created before this one; this one changes nothing in etcd (no password, no roles) until that one is deleted, or set another spec.userName",
				name, cluster.Name, owner.Name)}, nil
	}
	return nil, nil
}

// credentials are what the spec asks Steward to issue for the user: a client certificate, a password (with the
// Secret that holds it). Each is empty when the spec does not ask for it.
type credentials struct {
	cert           *x509.Certificate
	password       string
	passwordSecret *corev1.Secret
}

// ensureCredentials issues (or keeps) the certificate and password the spec asks for and records their Secrets
// in status. A non-nil pass stops the pass before etcd is touched: a password etcd is told must already be in
// its Secret, or the user could never read it.
func (r *Reconciler) ensureCredentials(ctx context.Context, user *etcdv1alpha1.EtcdUser, cluster *etcdv1alpha1.EtcdCluster, name string) (credentials, *pass, error) {
	var cred credentials
	if user.Spec.Certificate != nil {
		if p, ok := certificateAllowed(cluster); !ok {
			return cred, &p, nil
		}
		ensure := r.ensureCertificate
		if resources.TLSMode(cluster) == etcdv1alpha1.TLSProviderCertManager {
			ensure = r.ensureCertManagerCertificate
		}
		c, p, err := ensure(ctx, user, cluster, name)
		if err != nil || p != nil {
			return cred, p, err
		}
		cred.cert = c
	}
	user.Status.CertificateNotAfter = nil
	if cred.cert != nil {
		user.Status.CertificateNotAfter = &metav1.Time{Time: cred.cert.NotAfter}
	}
	user.Status.CertificateSecretName = ""
	if user.Spec.Certificate != nil {
		user.Status.CertificateSecretName = user.Spec.Certificate.SecretName
	}
	user.Status.PasswordSecretName = ""
	if user.Spec.Password != nil {
		s, p, err := r.ensurePasswordSecret(ctx, user, name)
		if err != nil || p != nil {
			return cred, p, err
		}
		cred.passwordSecret, cred.password = s, string(s.Data[resources.SecretPasswordKey])
		user.Status.PasswordSecretName = s.Name
	}
	return cred, nil, nil
}

// applyToEtcd brings etcd's user and role to want and returns the roles want grants that etcd does not hold.
// A non-nil pass stops the pass: etcd is unreachable, or holds a role Steward must not touch.
func (r *Reconciler) applyToEtcd(ctx context.Context, user *etcdv1alpha1.EtcdUser, cluster *etcdv1alpha1.EtcdCluster,
	want etcdauth.User, cred credentials, hadPassword bool) ([]string, *pass, error) {
	endpoints, err := r.endpoints(ctx, cluster)
	if err != nil {
		return nil, &pass{reason: etcdv1alpha1.ReasonEtcdError, message: err.Error()}, err
	}
	if len(endpoints) == 0 {
		return nil, &pass{reason: etcdv1alpha1.ReasonClusterNotReady, requeue: requeueWaiting,
			message: fmt.Sprintf("EtcdCluster %s has no healthy member to apply the user to yet", cluster.Name)}, nil
	}
	key := client.ObjectKeyFromObject(cluster).String()
	if err := r.dialWith(ctx, cluster, key); err != nil {
		return nil, &pass{reason: etcdv1alpha1.ReasonClusterNotReady, requeue: requeueWaiting, message: err.Error()}, nil
	}
	observed, roles, err := r.Etcd.ObserveUser(ctx, key, endpoints, want.Name)
	if err != nil {
		return nil, &pass{reason: etcdv1alpha1.ReasonEtcdError, message: err.Error()}, err
	}
	observed.Password = hadPassword
	observed.RoleCreated = roleCreatedBySteward(user)
	if etcdauth.RoleConflict(want, observed) {
		return nil, &pass{reason: etcdv1alpha1.ReasonRoleConflict, requeue: requeueWaiting,
			message: fmt.Sprintf("etcd holds a role %s that Steward did not create; the user's permissions need a role of that name, and Steward neither changes nor deletes one made by hand: delete or rename that role, or grant it with spec.roles instead of spec.permissions", want.Name)}, nil
	}
	if observed.UserExists && hadPassword != want.Password {
		if observed.Password, err = r.recordedPassword(ctx, user, cred.password); err != nil {
			return nil, &pass{reason: etcdv1alpha1.ReasonEtcdError, message: err.Error()}, err
		}
	}
	stale := cred.passwordSecret != nil && cred.passwordSecret.Annotations[annotationPasswordApplied] != passwordDigest(cred.password)
	ops, missing := etcdauth.Changes(want, observed, roles, stale)
	if err := r.applyChanges(ctx, user, key, endpoints, want, ops, cred.password); err != nil {
		return nil, &pass{reason: etcdv1alpha1.ReasonEtcdError, message: err.Error()}, err
	}
	if stale {
		if err := r.markPasswordApplied(ctx, cred.passwordSecret, cred.password); err != nil {
			return nil, &pass{reason: etcdv1alpha1.ReasonEtcdError, message: err.Error()}, err
		}
	}
	return missing, nil, nil
}

// applyChanges records that Steward creates the user's role before it does (so a crash between the two still
// deletes it later), then applies ops to etcd and tells the user what changed.
func (r *Reconciler) applyChanges(ctx context.Context, user *etcdv1alpha1.EtcdUser, key string, endpoints []string,
	want etcdauth.User, ops []etcdauth.Op, password string) error {
	if err := r.recordRoleCreation(ctx, user, ops); err != nil {
		return err
	}
	if len(ops) == 0 {
		return nil
	}
	if err := r.Etcd.ApplyUser(ctx, key, endpoints, want, ops, password); err != nil {
		return err
	}
	described := make([]string, 0, len(ops))
	for _, op := range ops {
		described = append(described, op.String())
	}
	if slices.ContainsFunc(ops, func(op etcdauth.Op) bool { return op.Kind == etcdauth.DeleteRole }) {
		user.Status.CreatedRole = false
	}
	ctrl.LoggerFrom(ctx).Info("Applied etcd user", "EtcdUser", klog.KObj(user), "user", want.Name, "changes", described)
	r.Recorder.Eventf(user, corev1.EventTypeNormal, "UserApplied", "Applied etcd user %s: %s", want.Name, strings.Join(described, "; "))
	return nil
}

// applied records the roles etcd holds and says what Ready reports: RoleNotFound while a granted role is
// missing, else Applied, requeued no later than the certificate's renewal.
func (r *Reconciler) applied(user *etcdv1alpha1.EtcdUser, cluster *etcdv1alpha1.EtcdCluster, want etcdauth.User, cert *x509.Certificate, missing []string) pass {
	user.Status.Roles = nil
	for _, role := range want.Roles {
		if !contains(missing, role) {
			user.Status.Roles = append(user.Status.Roles, role)
		}
	}
	if len(missing) > 0 {
		return pass{reason: etcdv1alpha1.ReasonRoleNotFound, requeue: requeueWaiting,
			message: fmt.Sprintf("roles %s do not exist in etcd; Steward grants them once they do (it creates only the user's own role)", strings.Join(missing, ", "))}
	}
	msg := fmt.Sprintf("etcd user %s holds roles %s", want.Name, strings.Join(want.Roles, ", "))
	if cluster.Status.AuthEnabled == nil || !*cluster.Status.AuthEnabled {
		msg += "; the cluster does not enforce authentication yet (spec.auth.enabled), so these permissions are prepared, not enforced"
	}
	requeue := requeueSteady
	if cert != nil {
		if renew := pki.RenewAt(cert).Sub(r.Now()); renew > 0 && renew < requeue {
			requeue = renew
		}
	}
	return pass{reason: etcdv1alpha1.ReasonApplied, message: msg, requeue: requeue}
}

// owner is the EtcdUser that owns etcd user name on user's cluster (ownerOf), from the cache: an
// EtcdUser created before user is in the cache whenever user is, so a later one never takes itself for the owner.
func (r *Reconciler) owner(ctx context.Context, user *etcdv1alpha1.EtcdUser, name string) (*etcdv1alpha1.EtcdUser, error) {
	var users etcdv1alpha1.EtcdUserList
	if err := r.Client.List(ctx, &users, client.InNamespace(user.Namespace), client.MatchingFields{"spec.clusterName": user.Spec.ClusterName}); err != nil {
		return nil, fmt.Errorf("list EtcdUsers of cluster %s: %w", user.Spec.ClusterName, err)
	}
	return ownerOf(users.Items, user.Spec.ClusterName, name), nil
}

// recordRoleCreation records in status that Steward creates the user's own role, before ops create it: a
// crash between the two then leaves a recorded role still to create, not a role that looks made by hand.
func (r *Reconciler) recordRoleCreation(ctx context.Context, user *etcdv1alpha1.EtcdUser, ops []etcdauth.Op) error {
	if user.Status.CreatedRole || !slices.ContainsFunc(ops, func(op etcdauth.Op) bool { return op.Kind == etcdauth.AddRole }) {
		return nil
	}
	// The patch goes through a copy: Patch overwrites the object it is given with the API server's, which would
	// drop what this pass has put in status but not yet written (the Secret names, the certificate's expiry).
	before := user.DeepCopy()
	recorded := user.DeepCopy()
	recorded.Status.CreatedRole = true
	if err := r.Client.Status().Patch(ctx, recorded, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("record the role's creation: %w", err)
	}
	user.Status.CreatedRole = true
	return nil
}

func derefPass(p *pass) pass {
	if p == nil {
		return pass{reason: etcdv1alpha1.ReasonEtcdError, message: "could not write the user's Secret"}
	}
	return *p
}

// certificateAllowed: certificates come from the cluster's CA (provider Steward) or from its cert-manager issuer
// (provider CertManager); with provider Secrets Steward has nothing to sign with.
func certificateAllowed(cluster *etcdv1alpha1.EtcdCluster) (pass, bool) {
	provider := resources.TLSMode(cluster)
	if resources.TLSEnabled(cluster) && !resources.ClientCertAuth(cluster) {
		return pass{reason: etcdv1alpha1.ReasonCertificateNotSupported,
			message: fmt.Sprintf("spec.certificate is not supported: the members of %s ask clients for no certificate (tls.clientAuth Password); declare the EtcdUser with spec.password instead", cluster.Name)}, false
	}
	if provider == etcdv1alpha1.TLSProviderSteward || provider == etcdv1alpha1.TLSProviderCertManager {
		return pass{}, true
	}
	if provider == etcdv1alpha1.TLSProviderNone {
		return pass{reason: etcdv1alpha1.ReasonCertificateNotSupported,
			message: fmt.Sprintf("spec.certificate needs an EtcdCluster with TLS: %s runs plaintext (tls.provider None), whose members verify no certificates; declare the EtcdUser with spec.password instead", cluster.Name)}, false
	}
	return pass{reason: etcdv1alpha1.ReasonCertificateNotSupported,
		message: fmt.Sprintf("spec.certificate needs an EtcdCluster with tls.provider Steward or CertManager (%s has %s): Steward has no CA or issuer to ask; issue the certificate yourself (common name = the user name) and declare the EtcdUser with spec.password instead",
			cluster.Name, provider)}, false
}

// ensureCertManagerCertificate keeps a cert-manager Certificate for the user (owned by the EtcdUser, from the
// cluster's own CA issuer, common name the user name) and returns the certificate cert-manager wrote, or a pass
// that says what is awaited. cert-manager renews it; its Secret carries Steward's labels through secretTemplate.
// A cluster whose members still trust the user's issuer's CA (status.tls.caSecret empty) gets the certificate
// from that issuer, as its members' own.
func (r *Reconciler) ensureCertManagerCertificate(ctx context.Context, user *etcdv1alpha1.EtcdUser, cluster *etcdv1alpha1.EtcdCluster, name string) (*x509.Certificate, *pass, error) {
	secretName := user.Spec.Certificate.SecretName
	ownCA := cluster.Status.TLS != nil && cluster.Status.TLS.CASecret != ""
	want := resources.UserCertificate(cluster, secretName, name, userLabels(user), ownCA)
	if err := controllerutil.SetControllerReference(user, want, r.Client.Scheme()); err != nil {
		return nil, nil, err
	}
	have, err := certissue.FindCertManager(ctx, r.Client, user, want)
	switch {
	case errors.Is(err, certissue.ErrNotOwned):
		return nil, &pass{reason: etcdv1alpha1.ReasonSecretConflict,
			message: fmt.Sprintf("Certificate %s exists and is not this EtcdUser's: Steward does not take it over; name another Secret", secretName)}, nil
	case err != nil:
		return nil, nil, err
	case have == nil:
		// cert-manager would take over a Secret of that name: one that is not this user's is a conflict.
		secret, p, err := r.ownedSecret(ctx, user, secretName)
		if err != nil || p != nil {
			return nil, p, err
		}
		if secret != nil {
			return nil, conflict(secretName), nil
		}
		if err := certissue.CreateCertManager(ctx, r.Client, want); err != nil {
			return nil, nil, err
		}
		r.Recorder.Eventf(user, corev1.EventTypeNormal, "CertificateCreated", "Created cert-manager Certificate %s (common name %s) from the cluster's issuer",
			secretName, name)
	default:
		if _, err := certissue.UpdateCertManager(ctx, r.Client, have, want, true); err != nil {
			return nil, nil, err
		}
	}
	secret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: user.Namespace, Name: secretName}, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &pass{reason: etcdv1alpha1.ReasonCertificatePending, requeue: requeueWaiting,
				message: fmt.Sprintf("waiting for cert-manager to issue Certificate %s", secretName)}, nil
		}
		return nil, nil, fmt.Errorf("get Secret %s: %w", secretName, err)
	}
	cert, err := pki.ParseCertificate(secret.Data[resources.SecretCertKey])
	if err != nil || cert.Subject.CommonName != name {
		return nil, &pass{reason: etcdv1alpha1.ReasonCertificatePending, requeue: requeueWaiting,
			message: fmt.Sprintf("waiting for cert-manager to issue Certificate %s for %s", secretName, name)}, nil
	}
	return cert, nil, nil
}

// ensureCertificate keeps the user's certificate Secret current: issued from the cluster's CA with the user's
// name as common name, renewed at two thirds of its lifetime or when the CA or the name changed.
func (r *Reconciler) ensureCertificate(ctx context.Context, user *etcdv1alpha1.EtcdUser, cluster *etcdv1alpha1.EtcdCluster, name string) (*x509.Certificate, *pass, error) {
	caSecret := &corev1.Secret{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: resources.CASecretName(cluster)}, caSecret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &pass{reason: etcdv1alpha1.ReasonClusterNotReady, requeue: requeueWaiting,
				message: fmt.Sprintf("the CA of EtcdCluster %s does not exist yet", cluster.Name)}, nil
		}
		return nil, nil, fmt.Errorf("get CA Secret: %w", err)
	}
	ca, err := pki.ParseKeyPair(caSecret.Data[resources.SecretCertKey], caSecret.Data[resources.SecretKeyKey])
	if err != nil {
		return nil, nil, fmt.Errorf("read CA Secret %s: %w", caSecret.Name, err)
	}
	secretName := user.Spec.Certificate.SecretName
	req := pki.Request{CommonName: name, Client: true, Lifetime: resources.CertificateLifetime(cluster)}
	secret, p, err := r.ownedSecret(ctx, user, secretName)
	if err != nil || p != nil {
		return nil, p, err
	}
	reason := resources.SecretRenewalReason(secret, ca, req, r.Now())
	if reason == "" { // a Secret that is good
		cert, err := pki.ParseCertificate(secret.Data[resources.SecretCertKey])
		return cert, nil, err
	}
	_, kp, err := certissue.Issue(ctx, r.Client, r.Recorder, user, ca, req, secret, func(certPEM, keyPEM []byte) *corev1.Secret {
		want := resources.TLSSecret(cluster, secretName, userLabels(user), ca.CertPEM, certPEM, keyPEM)
		// The EtcdUser's, not the cluster's: it goes with the user.
		want.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(user, etcdv1alpha1.GroupVersion.WithKind("EtcdUser"))}
		return want
	}, reason, r.Now())
	switch {
	case apierrors.IsAlreadyExists(err):
		return nil, conflict(secretName), nil
	case err != nil:
		return nil, nil, err
	}
	return kp.Cert, nil, nil
}

// ensurePasswordSecret returns the user's password Secret, generating the password when the Secret is missing.
func (r *Reconciler) ensurePasswordSecret(ctx context.Context, user *etcdv1alpha1.EtcdUser, name string) (*corev1.Secret, *pass, error) {
	secretName := user.Spec.Password.SecretName
	secret, p, err := r.ownedSecret(ctx, user, secretName)
	if err != nil || p != nil {
		return nil, p, err
	}
	if secret != nil && len(secret.Data[resources.SecretPasswordKey]) > 0 && string(secret.Data[resources.SecretUsernameKey]) == name {
		return secret, nil, nil
	}
	password, err := resources.GeneratePassword()
	if err != nil {
		return nil, nil, err
	}
	data := map[string][]byte{resources.SecretUsernameKey: []byte(name), resources.SecretPasswordKey: []byte(password)}
	if secret != nil {
		if len(secret.Data[resources.SecretPasswordKey]) > 0 {
			data[resources.SecretPasswordKey] = secret.Data[resources.SecretPasswordKey] // only the user name was wrong
		}
		secret.Data = data
		if err := r.Client.Update(ctx, secret); err != nil {
			return nil, nil, fmt.Errorf("update Secret %s: %w", secretName, err)
		}
		return secret, nil, nil
	}
	secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: user.Namespace, Labels: userLabels(user)},
		Type: corev1.SecretTypeOpaque, Data: data}
	if err := controllerutil.SetControllerReference(user, secret, r.Client.Scheme()); err != nil {
		return nil, nil, err
	}
	if err := r.Client.Create(ctx, secret); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, conflict(secretName), nil
		}
		return nil, nil, fmt.Errorf("create Secret %s: %w", secretName, err)
	}
	r.Recorder.Eventf(user, corev1.EventTypeNormal, "PasswordGenerated", "Generated the password of etcd user %s in Secret %s", name, secretName)
	return secret, nil, nil
}

// dropSecrets deletes the Secrets this EtcdUser wrote that its spec no longer names (a certificate or password
// taken out of the spec, or moved to another Secret): credentials nobody asked for should not linger.
func (r *Reconciler) dropSecrets(ctx context.Context, user *etcdv1alpha1.EtcdUser) error {
	wanted := map[string]bool{}
	if user.Spec.Certificate != nil {
		wanted[user.Spec.Certificate.SecretName] = true
	}
	if user.Spec.Password != nil {
		wanted[user.Spec.Password.SecretName] = true
	}
	for _, name := range []string{user.Status.CertificateSecretName, user.Status.PasswordSecretName} {
		if name == "" || wanted[name] {
			continue
		}
		if name == user.Status.CertificateSecretName {
			if err := r.dropCertificate(ctx, user, name); err != nil {
				return err
			}
		}
		secret, p, err := r.ownedSecret(ctx, user, name)
		if err != nil {
			return err
		}
		if secret == nil || p != nil {
			continue // gone already, or not ours
		}
		if err := r.Client.Delete(ctx, secret, client.Preconditions{UID: &secret.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete Secret %s the spec no longer names: %w", name, err)
		}
		r.Recorder.Eventf(user, corev1.EventTypeNormal, "SecretDeleted", "Deleted Secret %s: the spec no longer asks for it", name)
	}
	return nil
}

// dropCertificate deletes the user's cert-manager Certificate of that name, if there is one, so that cert-manager
// stops writing its Secret.
func (r *Reconciler) dropCertificate(ctx context.Context, user *etcdv1alpha1.EtcdUser, name string) error {
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(resources.CertificateGVK)
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: user.Namespace, Name: name}, cert)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) || err == nil && !metav1.IsControlledBy(cert, user) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("get Certificate %s: %w", name, err)
	}
	if err := r.Client.Delete(ctx, cert); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete Certificate %s the spec no longer asks for: %w", name, err)
	}
	return nil
}

// recordedPassword says whether the etcd user holds a password Steward gave it, read from the API server. A
// user that gains or loses its password is deleted and re-created in etcd (etcd cannot drop a password, and
// a user created without one never accepts one), which refuses its clients until it is back. A pass may run on
// a cached EtcdUser whose status is a pass behind, the one that gave the user its password: trusting that copy
// re-created a user its clients had just started to use (docs/development/flakes.md). So the record is read again here,
// only when it would re-create the user: the status, or the password Secret's mark that etcd holds its password.
func (r *Reconciler) recordedPassword(ctx context.Context, user *etcdv1alpha1.EtcdUser, password string) (bool, error) {
	live := &etcdv1alpha1.EtcdUser{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(user), live); err != nil {
		return false, fmt.Errorf("read EtcdUser %s again before re-creating its etcd user: %w", user.Name, err)
	}
	if live.Status.PasswordSecretName != "" {
		return true, nil
	}
	if password == "" || user.Spec.Password == nil {
		return false, nil
	}
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: user.Namespace, Name: user.Spec.Password.SecretName}, secret)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("read Secret %s again before re-creating etcd user %s: %w", user.Spec.Password.SecretName, user.Name, err)
	}
	return metav1.IsControlledBy(secret, user) && secret.Annotations[annotationPasswordApplied] == passwordDigest(password), nil
}

// markPasswordApplied records on the Secret that its password is the one etcd holds.
func (r *Reconciler) markPasswordApplied(ctx context.Context, secret *corev1.Secret, password string) error {
	patch := client.MergeFrom(secret.DeepCopy())
	if secret.Annotations == nil {
		secret.Annotations = map[string]string{}
	}
	secret.Annotations[annotationPasswordApplied] = passwordDigest(password)
	if err := r.Client.Patch(ctx, secret, patch); err != nil {
		return fmt.Errorf("mark password applied on Secret %s: %w", secret.Name, err)
	}
	return nil
}

// ownedSecret reads Secret name: nil when it does not exist, a SecretConflict when it exists and this EtcdUser
// does not own it (Steward never takes over a Secret it did not create).
func (r *Reconciler) ownedSecret(ctx context.Context, user *etcdv1alpha1.EtcdUser, name string) (*corev1.Secret, *pass, error) {
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: user.Namespace, Name: name}, secret)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("get Secret %s: %w", name, err)
	case !metav1.IsControlledBy(secret, user) && !writtenForUser(secret, user):
		return nil, conflict(name), nil
	}
	return secret, nil, nil
}

// writtenForUser: cert-manager wrote the Secret for a Certificate of this name, labelled as this user's (cert-manager
// sets no owner on the Secrets it writes).
func writtenForUser(secret *corev1.Secret, user *etcdv1alpha1.EtcdUser) bool {
	owner := metav1.GetControllerOf(secret)
	return (owner == nil || owner.Kind == resources.CertificateGVK.Kind) &&
		certissue.IssuedByCertManager(secret) && secret.Labels["etcd.steward.dev/user"] == user.Name
}

func conflict(name string) *pass {
	return &pass{reason: etcdv1alpha1.ReasonSecretConflict,
		message: fmt.Sprintf("Secret %s exists and is not this EtcdUser's: Steward does not overwrite it; name another Secret or delete it", name)}
}

// userLabels mark the user's Secrets (and Certificate) as Steward's, for its cache, and as the user's. Not the
// cluster label: they are the EtcdUser's, not the cluster's, and outlive it.
func userLabels(user *etcdv1alpha1.EtcdUser) map[string]string {
	return map[string]string{"app.kubernetes.io/managed-by": "steward", "etcd.steward.dev/user": user.Name}
}

// dialWith points the pool at the cluster with Steward's client certificate (nil: plaintext) and the password
// the cluster controller keeps for it (the operator credentials), as the cluster controller dials it.
func (r *Reconciler) dialWith(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, key string) error {
	var pw etcd.Password
	if access := resources.AgentAccessFor(cluster); access.CredentialsSecret != "" {
		secret := &corev1.Secret{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: access.CredentialsSecret}, secret)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("read Steward's password (Secret %s): %w", access.CredentialsSecret, err)
		}
		if user, password, ok := resources.OperatorCredentials(secret); err == nil && ok {
			pw = etcd.Password{User: user, Password: password}
		}
	}
	r.Etcd.SetPassword(key, pw)
	if !resources.TLSEnabled(cluster) {
		return r.Etcd.SetTLS(key, nil)
	}
	secret := &corev1.Secret{}
	name := resources.ClientSecretName(cluster)
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: name}, secret); err != nil {
		return fmt.Errorf("read Steward's client certificate (Secret %s): %w", name, err)
	}
	// Members are dialed by Pod IP; their certificates name the client Service, which is what is checked.
	return r.Etcd.SetTLS(key, &etcd.TLS{CA: secret.Data[resources.SecretCAKey], Cert: secret.Data[resources.SecretCertKey],
		Key: secret.Data[resources.SecretKeyKey], ServerName: resources.ClientServiceHost(cluster, r.Options)})
}

// healthyVoters are the names of the cluster's healthy voting members, as its status lists them.
func healthyVoters(cluster *etcdv1alpha1.EtcdCluster) map[string]bool {
	out := map[string]bool{}
	for _, m := range cluster.Status.Members {
		if m.Healthy && m.Role != etcdv1alpha1.RoleLearner {
			out[m.Name] = true
		}
	}
	return out
}

// endpoints are the client URLs, by Pod IP, of the cluster's healthy voters (a learner refuses auth calls).
func (r *Reconciler) endpoints(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster) ([]string, error) {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(cluster.Namespace), client.MatchingLabels{resources.LabelCluster: cluster.Name}); err != nil {
		return nil, fmt.Errorf("list member Pods: %w", err)
	}
	healthy := healthyVoters(cluster)
	var eps []string
	for ep, member := range resources.MemberClientEndpoints(cluster, pods.Items) {
		if healthy[member] {
			eps = append(eps, ep)
		}
	}
	sort.Strings(eps)
	return eps, nil
}

// finalize deletes the etcd user and its role, then lets the EtcdUser go (etcdauth.DecideRemoval decides). A
// cluster that no longer exists, or is being deleted (as in a namespace being deleted), takes the user with it; one
// that cannot be reached is waited for at most etcdauth.RemovalGiveUpAfter, then the user left in etcd is reported.
func (r *Reconciler) finalize(ctx context.Context, user *etcdv1alpha1.EtcdUser, cluster *etcdv1alpha1.EtcdCluster) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(user, finalizer) {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx)
	name := etcdv1alpha1.EtcdUserName(user)
	owner, err := r.owner(ctx, user, name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if owner != nil && owner.UID != user.UID {
		// Another EtcdUser declares the same etcd user: it stays, for that one (see keepForOwner).
		return r.keepForOwner(ctx, user, owner, name)
	}
	// Only a role Steward created goes with the user: one of that name made by hand is somebody else's.
	withRole := roleCreatedBySteward(user)
	in := etcdauth.RemovalInput{UserName: name, Cluster: user.Spec.ClusterName, ClusterPresent: cluster != nil && cluster.DeletionTimestamp.IsZero(),
		SinceDeletion: r.Now().Sub(user.DeletionTimestamp.Time)}
	var endpoints []string
	if in.ClusterPresent {
		var err error
		if endpoints, err = r.endpoints(ctx, cluster); err != nil {
			return ctrl.Result{}, err
		}
		in.Endpoints = len(endpoints) > 0
	}
	step := etcdauth.DecideRemoval(in)
	if step.Action == etcdauth.RemoveUser {
		in.Attempted = true
		if err := r.removeUser(ctx, cluster, endpoints, name, withRole); err != nil {
			in.Error = err.Error()
		}
		step = etcdauth.DecideRemoval(in)
	}
	switch {
	case step.Action == etcdauth.WaitForCluster:
		log.Info("Waiting for a healthy member to delete the etcd user", "EtcdUser", klog.KObj(user), "user", name, "error", in.Error,
			"givingUpIn", etcdauth.RemovalGiveUpAfter-in.SinceDeletion)
		return ctrl.Result{RequeueAfter: step.RequeueAfter}, nil
	case step.Deleted && withRole:
		r.Recorder.Eventf(user, corev1.EventTypeNormal, "UserDeleted", "Deleted etcd user %s and its role", name)
	case step.Deleted:
		r.Recorder.Eventf(user, corev1.EventTypeNormal, "UserDeleted", "Deleted etcd user %s; a role named like it, if there is one, is not Steward's and stays", name)
	case step.LeftBehind:
		r.Recorder.Eventf(user, corev1.EventTypeWarning, "UserLeftBehind",
			"etcd user %s and its role are left in EtcdCluster %s, delete them by hand (etcdctl user delete, role delete): %s", name, in.Cluster, step.Reason)
		log.Info("Left an etcd user behind", "EtcdUser", klog.KObj(user), "user", name, "EtcdCluster", klog.KRef(user.Namespace, in.Cluster), "reason", step.Reason)
	}
	controllerutil.RemoveFinalizer(user, finalizer)
	if err := r.Client.Update(ctx, user); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// keepForOwner lets user go without touching etcd: owner, another EtcdUser of the same etcd user, keeps it (and
// its role), and takes it over on its next pass.
func (r *Reconciler) keepForOwner(ctx context.Context, user, owner *etcdv1alpha1.EtcdUser, name string) (ctrl.Result, error) {
	r.Recorder.Eventf(user, corev1.EventTypeNormal, "UserKept", "Left etcd user %s in place: EtcdUser %s declares it too", name, owner.Name)
	controllerutil.RemoveFinalizer(user, finalizer)
	if err := r.Client.Update(ctx, user); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("remove finalizer: %w", err)
	}
	return ctrl.Result{}, nil
}

// removeUser deletes the etcd user, and its role when Steward created it, through the cluster's healthy members.
func (r *Reconciler) removeUser(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, endpoints []string, name string, withRole bool) error {
	key := client.ObjectKeyFromObject(cluster).String()
	if err := r.dialWith(ctx, cluster, key); err != nil {
		return err
	}
	return r.Etcd.DeleteUser(ctx, key, endpoints, name, withRole)
}

func passwordDigest(password string) string {
	sum := sha256.Sum256([]byte(password))
	return hex.EncodeToString(sum[:])
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
