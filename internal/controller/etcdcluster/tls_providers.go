package etcdcluster

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/controller/certissue"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/pki"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// reader reads the Secrets Steward does not own (a user's, or cert-manager's): straight from the API server,
// because the manager's cache holds only Secrets labelled as Steward's (CacheByObject) and a user's Secret
// need not carry any label.
func (r *Reconciler) reader() client.Reader {
	if r.APIReader != nil {
		return r.APIReader
	}
	return r.Client
}

// ensureProvidedTLS is ensureTLS for the providers whose certificates Steward does not issue (Secrets,
// CertManager): it checks the material, points the etcd pool at the client certificate, and returns in
// tlsState.wait the Wait to take instead of any step while the material is not usable.
//
// provider is the spec's, or while the members switch to plaintext the one whose certificates they still hold:
// then the spec's tls.secrets or tls.certManager must still say where those come from.
//
// With provider CertManager the cluster's certificates come from a CA of its own (ensureClusterCA), unless member
// Pods still trust the user's issuer's CA (shared, sharedTrust): then from that issuer, as those Pods expect.
func (r *Reconciler) ensureProvidedTLS(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, provider string, holding bool, shared []string) (*tlsState, error) {
	ts := &tlsState{provider: provider, status: &etcdv1alpha1.TLSStatus{ClientSecret: resources.ClientSecretName(cluster)}}
	if t := cluster.Spec.TLS; t == nil || provider == etcdv1alpha1.TLSProviderSecrets && t.Secrets == nil ||
		provider == etcdv1alpha1.TLSProviderCertManager && t.CertManager == nil {
		field := map[string]string{etcdv1alpha1.TLSProviderSecrets: "tls.secrets", etcdv1alpha1.TLSProviderCertManager: "tls.certManager"}[provider]
		ts.wait = &plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonTLSSecretInvalid, Message: fmt.Sprintf(
			"members still hold certificates of TLS provider %s, and the spec no longer says where they come from: put %s back until every member runs plaintext (status.members[].tls); Steward changes nothing until then",
			provider, field)}
		return ts, nil
	}
	var material *etcd.TLS
	switch ts.provider {
	case etcdv1alpha1.TLSProviderSecrets:
		ts.status.MemberSecret = resources.MemberTLSSecretName(cluster, "")
		member, err := r.getSecret(ctx, cluster.Namespace, ts.status.MemberSecret)
		if err != nil {
			return ts, err
		}
		clientSecret, err := r.getSecret(ctx, cluster.Namespace, ts.status.ClientSecret)
		if err != nil {
			return ts, err
		}
		ts.saw(member.secret, false)
		checked, err := checkUserSecrets(cluster, member, clientSecret, r.Options, r.Now())
		if err != nil {
			ts.wait = &plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonTLSSecretInvalid, Message: err.Error() +
				"; Steward changes nothing until the Secrets are fixed (see docs/user/tls.md#provider-secrets-bring-your-own)"}
			return ts, nil
		}
		material = checked
		ts.noteProvided(certMember, member.provided)
		ts.noteProvided(certClient, clientSecret.provided)
	case etcdv1alpha1.TLSProviderCertManager:
		installed, err := r.certManagerInstalled()
		if err != nil {
			return ts, err
		}
		if !installed {
			ts.wait = &plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonCertManagerNotInstalled, Message: "tls.provider is CertManager " +
				"but the API server does not serve certificates.cert-manager.io/v1 (cert-manager's CRDs are not installed): install cert-manager; Steward changes nothing until then"}
			return ts, nil
		}
		if len(shared) == 0 {
			trust, wait, err := r.ensureClusterCA(ctx, cluster, ts, holding)
			if err != nil || wait != nil {
				ts.wait = wait
				return ts, err
			}
			ts.trust, ts.status.CASecret = trust, resources.CASecretName(cluster)
		}
		if len(shared) > 0 {
			ref := cluster.Spec.TLS.CertManager.IssuerRef
			ts.sharedIssuer = fmt.Sprintf("members %v trust the CA of %s %s itself, as created before Steward gave each cluster of provider CertManager a CA of its own: "+
				"anyone who can get a certificate from that issuer (a Certificate in any namespace, if it is a ClusterIssuer) can be root on this cluster. "+
				"Steward keeps issuing from it, which the members expect; to move to a CA of the cluster's own, see docs/etcdcluster.md#provider-certmanager",
				shared, ref.Kind, ref.Name)
		}
		if err := r.ensureCertificate(ctx, cluster, resources.ClientCertificate(cluster, ts.ownCA())); err != nil {
			return ts, err
		}
		s, err := r.getSecret(ctx, cluster.Namespace, ts.status.ClientSecret)
		if err != nil {
			return ts, err
		}
		p, err := checkIssued(s, "the client Secret", pki.Want{Client: true}, ts.trust, r.Now())
		if err != nil {
			ts.wait = &plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonWaitingForCertificates,
				Message: "waiting for cert-manager to issue Steward's client certificate: " + r.certificatePending(ctx, cluster, ts.status.ClientSecret, err)}
			return ts, nil
		}
		ts.noteProvided(certClient, p)
		material = s.material()
		if ts.trust != nil {
			material.CA = ts.trust
		}
	default:
		return nil, fmt.Errorf("unknown TLS provider %q", ts.provider)
	}
	material.ServerName = resources.ClientServiceHost(cluster, r.Options)
	material.SourceHosts = sourceHosts(cluster)
	return ts, r.Etcd.SetTLS(client.ObjectKeyFromObject(cluster).String(), material)
}

// noteProvided records the expiry of a checked certificate of kind (certMember or certClient) and its CAs' in
// status.
func (ts *tlsState) noteProvided(kind string, p *pki.Provided) {
	if p == nil {
		return
	}
	ts.note(kind, p.Leaf.NotAfter)
	if ts.status.CANotAfter == nil || p.RootsNotAfter.Before(ts.status.CANotAfter.Time) {
		ts.status.CANotAfter = &metav1.Time{Time: p.RootsNotAfter}
	}
}

// tlsSecret is a Secret as read for checking: nil Secret means not found.
type tlsSecret struct {
	name     string
	secret   *corev1.Secret
	provided *pki.Provided
}

func (s *tlsSecret) material() *etcd.TLS {
	d := s.secret.Data
	return &etcd.TLS{CA: d[resources.SecretCAKey], Cert: d[resources.SecretCertKey], Key: d[resources.SecretKeyKey]}
}

func (r *Reconciler) getSecret(ctx context.Context, namespace, name string) (*tlsSecret, error) {
	s := &corev1.Secret{}
	err := r.reader().Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, s)
	switch {
	case apierrors.IsNotFound(err):
		return &tlsSecret{name: name}, nil
	case err != nil:
		return nil, fmt.Errorf("get Secret %s: %w", name, err)
	}
	return &tlsSecret{name: name, secret: s}, nil
}

// checkSecret checks one Secret's certificate for want; role says what the Secret is for, in messages.
func checkSecret(s *tlsSecret, role string, want pki.Want, now time.Time) (*pki.Provided, error) {
	return checkIssued(s, role, want, nil, now)
}

// checkIssued is checkSecret with trust, when set, as the CA the certificate must chain to instead of the
// Secret's ca.crt (provider CertManager with the cluster's own CA: cert-manager's ca.crt is the root of the
// user's issuer, which other namespaces may share).
func checkIssued(s *tlsSecret, role string, want pki.Want, trust []byte, now time.Time) (*pki.Provided, error) {
	if s.secret == nil {
		return nil, fmt.Errorf("%s %s does not exist", role, s.name)
	}
	var missing []string
	for _, k := range []string{resources.SecretCAKey, resources.SecretCertKey, resources.SecretKeyKey} {
		if len(s.secret.Data[k]) == 0 {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s %s has no %v (it needs ca.crt, tls.crt and tls.key)", role, s.name, missing)
	}
	d := s.secret.Data
	ca := d[resources.SecretCAKey]
	if trust != nil {
		ca = trust
	}
	p, err := pki.CheckProvided(ca, d[resources.SecretCertKey], d[resources.SecretKeyKey], want, now)
	if err != nil {
		if trust != nil {
			return nil, fmt.Errorf("%s %s (checked against the cluster's own CA): %w", role, s.name, err)
		}
		return nil, fmt.Errorf("%s %s: %w", role, s.name, err)
	}
	s.provided = p
	return p, nil
}

// memberWant is what every member's certificate must be good for: serving and peer (server and client auth),
// every member's peer DNS name (peers dial each other by it), the client Service's name (Steward and backup
// Jobs dial members by Pod IP and check that name, internal/etcd) and the peer identity (members check it on the
// peer port: resources.PeerIdentity), and spec.tls.extraSANs (names and addresses clients outside dial). member "" asks for all members at once (one Secret for every member, the
// user's: a wildcard), without the peer identity, which checkUserSecrets checks on its own to say what it is for.
func memberWant(cluster *etcdv1alpha1.EtcdCluster, member string, o resources.Options) pki.Want {
	host := resources.MemberHost(cluster, member, o)
	hosts := []string{host, resources.ClientServiceHost(cluster, o), resources.PeerIdentity(cluster, o)}
	if member == "" {
		hosts = []string{"*" + host, resources.ClientServiceHost(cluster, o)}
	}
	hosts = append(hosts, resources.ExtraDNSNames(cluster)...)
	for _, ip := range resources.ExtraIPs(cluster) {
		hosts = append(hosts, ip.String())
	}
	return pki.Want{Hosts: hosts, Server: true, Client: true}
}

// checkUserSecrets checks the Secrets of provider Secrets: each Secret on its own (checkSecret), and that they
// trust each other: members verify Steward's client certificate with the member Secret's ca.crt, and Steward
// and backup Jobs verify members with the client Secret's ca.crt. Pure. Returns the client material, or an error
// naming every problem.
func checkUserSecrets(cluster *etcdv1alpha1.EtcdCluster, member, clientSecret *tlsSecret, o resources.Options, now time.Time) (*etcd.TLS, error) {
	m, errM := checkSecret(member, "member Secret (tls.secrets.memberSecretName)", memberWant(cluster, "", o), now)
	c, errC := checkSecret(clientSecret, "client Secret (tls.secrets.clientSecretName)", pki.Want{Client: true}, now)
	if err := joinProblems(errM, errC); err != nil {
		return nil, err
	}
	var errs []error
	id := resources.PeerIdentity(cluster, o)
	if resources.PeerAuthWanted(cluster) && m.Leaf.VerifyHostname(id) != nil {
		errs = append(errs, fmt.Errorf("the member certificate of Secret %s does not carry the cluster's peer identity, the DNS name %s (members accept only certificates valid for it on the peer port, spec.tls.peerAuth MemberIdentity): add it to the certificate's DNS names, or set spec.tls.peerAuth to AnyCertificate to let any certificate of the CA speak on the peer port",
			member.name, id))
	}
	if resources.PeerAuthWanted(cluster) && c.Leaf.VerifyHostname(id) == nil {
		errs = append(errs, fmt.Errorf("the client certificate of Secret %s is valid for %s, the cluster's peer identity, which only member certificates may carry (a client holding it could speak on the peer port and read every write): issue it without DNS names",
			clientSecret.name, id))
	}
	if err := c.VerifyWith(m.Roots, x509.ExtKeyUsageClientAuth, now); err != nil {
		errs = append(errs, fmt.Errorf("the client certificate of Secret %s is not issued by a CA in the ca.crt of member Secret %s, so members would refuse Steward: %w",
			clientSecret.name, member.name, err))
	}
	if err := m.VerifyWith(c.Roots, x509.ExtKeyUsageServerAuth, now); err != nil {
		errs = append(errs, fmt.Errorf("the member certificate of Secret %s is not issued by a CA in the ca.crt of client Secret %s, which Steward and backup Jobs check members with: %w",
			member.name, clientSecret.name, err))
	}
	if err := joinProblems(errs...); err != nil {
		return nil, err
	}
	return clientSecret.material(), nil
}

// joinProblems joins errors into one line for a condition message (errors.Join would separate them by newlines).
func joinProblems(errs ...error) error {
	var msgs []string
	for _, err := range errs {
		if err != nil {
			msgs = append(msgs, err.Error())
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return errors.New(strings.Join(msgs, "; "))
}

// certManagerInstalled asks the RESTMapper (discovery, re-read when a kind is missing) whether the API server
// serves cert-manager's Certificate.
func (r *Reconciler) certManagerInstalled() (bool, error) {
	_, err := r.Client.RESTMapper().RESTMapping(resources.CertificateGVK.GroupKind(), resources.CertificateGVK.Version)
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("discover cert-manager's Certificate: %w", err)
	}
	return true, nil
}

// ensureCertificate creates the cert-manager object want (a Certificate, or the cluster's Issuer), or brings the
// fields Steward sets back to want (a changed certificateLifetime). It never takes over one the cluster does not
// own.
func (r *Reconciler) ensureCertificate(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, want *unstructured.Unstructured) error {
	kind := want.GetKind()
	have, err := certissue.FindCertManager(ctx, r.Client, cluster, want)
	switch {
	case errors.Is(err, certissue.ErrNotOwned):
		return fmt.Errorf("%s %s exists and is not owned by this EtcdCluster: Steward does not take it over", strings.ToLower(kind), want.GetName())
	case err != nil:
		return err
	case have == nil:
		if cluster.Spec.Paused {
			return fmt.Errorf("%s %s is missing and the cluster is paused", kind, want.GetName())
		}
		if err := certissue.CreateCertManager(ctx, r.Client, want); err != nil {
			return err
		}
		ctrl.LoggerFrom(ctx).Info("Created "+kind, "EtcdCluster", klog.KObj(cluster), strings.ToLower(kind), want.GetName())
		if kind == resources.IssuerGVK.Kind {
			r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "IssuerCreated", "Created cert-manager Issuer %s on the cluster's own CA (Secret %s)",
				want.GetName(), resources.CASecretName(cluster))
			return nil
		}
		r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "CertificateCreated", "Created cert-manager Certificate %s (Secret %s)",
			want.GetName(), want.GetName())
		return nil
	}
	if updated, err := certissue.UpdateCertManager(ctx, r.Client, have, want, !cluster.Spec.Paused); err != nil || !updated {
		return err
	}
	ctrl.LoggerFrom(ctx).Info("Updated "+kind, "EtcdCluster", klog.KObj(cluster), strings.ToLower(kind), want.GetName())
	r.Recorder.Eventf(cluster, corev1.EventTypeNormal, kind+"Updated", "Updated cert-manager %s %s to the cluster's spec", kind, want.GetName())
	return nil
}

// ensureClusterCA is provider CertManager's CA of the cluster's own: an intermediate CA Certificate from the
// user's issuer, a namespaced CA Issuer on its Secret, and the Secret members and Steward take their only
// trusted CA from (TrustSecretName). It returns that CA's certificate, or the Wait to take while cert-manager
// has not issued it (no member Pod is created before), or while it would replace a CA running members trust.
func (r *Reconciler) ensureClusterCA(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, ts *tlsState, holding bool) ([]byte, *plan.Action, error) {
	if err := r.ensureCertificate(ctx, cluster, resources.CACertificate(cluster)); err != nil {
		return nil, nil, err
	}
	if err := r.ensureCertificate(ctx, cluster, resources.CAIssuer(cluster)); err != nil {
		return nil, nil, err
	}
	name := resources.CASecretName(cluster)
	s, err := r.getSecret(ctx, cluster.Namespace, name)
	if err != nil {
		return nil, nil, err
	}
	ca, err := issuedCA(s, r.Now())
	if err != nil {
		return nil, &plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonWaitingForCertificates,
			Message: "waiting for cert-manager to issue the cluster's own CA: " + r.certificatePending(ctx, cluster, name, err)}, nil
	}
	trust := &corev1.Secret{}
	err = r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: resources.TrustSecretName(cluster)}, trust)
	switch {
	case apierrors.IsNotFound(err):
		if cluster.Spec.Paused {
			return nil, nil, fmt.Errorf("secret %s is missing and the cluster is paused", resources.TrustSecretName(cluster))
		}
		trust = resources.TrustSecret(cluster, ca)
		if err := r.Client.Create(ctx, trust); err != nil {
			return nil, nil, fmt.Errorf("create Secret %s: %w", trust.Name, err)
		}
		ts.saw(trust, true)
		return ca, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("get Secret %s: %w", resources.TrustSecretName(cluster), err)
	case !metav1.IsControlledBy(trust, cluster):
		return nil, nil, fmt.Errorf("secret %s exists and is not owned by this EtcdCluster: Steward does not take it over", trust.Name)
	}
	have := trust.Data[resources.SecretCAKey]
	if string(have) == string(ca) {
		ts.saw(trust, false)
		return ca, nil, nil
	}
	if holding && !samePublicKey(have, ca) {
		return have, &plan.Action{Kind: plan.Wait, Reason: etcdv1alpha1.ReasonClusterCAChanged, Message: fmt.Sprintf(
			"the CA certificate in Secret %s has another key than the CA the members trust (Secret %s): members load their trusted CA when they start, so certificates of the new key would cut them off; Steward changes nothing. Restore the CA Secret, or see docs/etcdcluster.md#provider-certmanager",
			name, trust.Name)}, nil
	}
	if cluster.Spec.Paused {
		ts.saw(trust, false)
		return have, nil, nil
	}
	// A renewal keeps the key (rotationPolicy Never): members that loaded the previous certificate verify
	// certificates the renewed one signs.
	trust.Data = map[string][]byte{resources.SecretCAKey: ca}
	if err := r.Client.Update(ctx, trust); err != nil {
		return nil, nil, fmt.Errorf("update Secret %s: %w", trust.Name, err)
	}
	ts.saw(trust, true)
	return ca, nil, nil
}

// issuedCA is the CA certificate (PEM) of the cluster's CA Secret as cert-manager wrote it: the first
// certificate of tls.crt (those after it are the user's issuer's chain, which members must not trust), a CA,
// valid now, with its key in tls.key.
func issuedCA(s *tlsSecret, now time.Time) ([]byte, error) {
	if s.secret == nil {
		return nil, fmt.Errorf("CA Secret %s does not exist", s.name)
	}
	if !certissue.IssuedByCertManager(s.secret) {
		// Not (yet) cert-manager's for the CA Certificate: the CA Secret of provider Steward, left from before a
		// switch through plaintext, has the same name until cert-manager issues into it.
		return nil, fmt.Errorf("CA Secret %s was not written by cert-manager for Certificate %s", s.name, s.name)
	}
	kp, err := pki.ParseKeyPair(s.secret.Data[resources.SecretCertKey], s.secret.Data[resources.SecretKeyKey])
	if err != nil {
		return nil, fmt.Errorf("CA Secret %s: %w", s.name, err)
	}
	c := kp.Cert
	switch {
	case !c.IsCA:
		return nil, fmt.Errorf("CA Secret %s: its certificate is not a CA", s.name)
	case now.Before(c.NotBefore) || now.After(c.NotAfter):
		return nil, fmt.Errorf("CA Secret %s: its certificate is not valid now (%s to %s)", s.name,
			c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}), nil
}

// samePublicKey reports whether two PEM certificates carry the same public key.
func samePublicKey(a, b []byte) bool {
	ca, errA := pki.ParseCertificate(a)
	cb, errB := pki.ParseCertificate(b)
	return errA == nil && errB == nil && string(ca.RawSubjectPublicKeyInfo) == string(cb.RawSubjectPublicKeyInfo)
}

// certificatePending says why a Secret cert-manager is to write is not usable: the problem found, and the
// Certificate's Ready condition when it is not True (where cert-manager says what it waits for).
func (r *Reconciler) certificatePending(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, name string, problem error) string {
	msg := problem.Error()
	c := &unstructured.Unstructured{}
	c.SetGroupVersionKind(resources.CertificateGVK)
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: name}, c); err != nil {
		return msg
	}
	conds, _, _ := unstructured.NestedSlice(c.Object, "status", "conditions")
	for _, x := range conds {
		cond, ok := x.(map[string]any)
		if !ok || cond["type"] != "Ready" || cond["status"] == "True" {
			continue
		}
		return fmt.Sprintf("%s (Certificate %s is not Ready: %v: %v; its CertificateRequests show the issuer's answer)", msg, name, cond["reason"], cond["message"])
	}
	return msg
}

// ensureNewMemberCerts makes sure the certificates of members about to get a Pod are in place, and reports
// whether their Pods may be created now. Provider Steward issues them; provider Secrets has one Secret for all,
// checked before any step; provider CertManager creates each member's Certificate and waits until its Secret is
// usable (a Pod started before would wait in ContainerCreating, or start with a certificate of the wrong names).
func (r *Reconciler) ensureNewMemberCerts(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, ts *tlsState, action plan.Action) (bool, error) {
	if resources.MemberTLSOf(cluster, resources.Member{TLS: action.TLS}) == resources.MemberTLSPlaintext {
		return true, nil // plaintext members hold no certificate
	}
	if ts == nil {
		return false, fmt.Errorf("create members %v: the cluster's TLS is not ready", action.Members)
	}
	switch ts.provider {
	case etcdv1alpha1.TLSProviderSteward:
		for _, m := range action.Members {
			if _, err := r.ensureCert(ctx, cluster, ts, resources.MemberSecretName(m), resources.MemberLabels(cluster, m),
				memberRequest(cluster, m, r.Options)); err != nil {
				return false, fmt.Errorf("certificate of member %s: %w", m, err)
			}
		}
	case etcdv1alpha1.TLSProviderCertManager:
		var pending []string
		for _, m := range action.Members {
			if err := r.ensureCertificate(ctx, cluster, resources.MemberCertificate(cluster, m, r.Options, ts.ownCA())); err != nil {
				return false, fmt.Errorf("certificate of member %s: %w", m, err)
			}
			p, err := r.memberCertificateReady(ctx, cluster, ts, m)
			if err != nil {
				return false, err
			}
			if p != "" {
				pending = append(pending, p)
			}
		}
		if len(pending) == 0 {
			return true, nil
		}
		ts.waiting = fmt.Sprintf("waiting for cert-manager to issue the certificates of members %v before creating their Pods: %s",
			action.Members, pending[0])
		if action.Kind == plan.Bootstrap && cluster.Spec.Storage.Ephemeral {
			// A bootstrap's member names are drawn afresh on every pass until a PVC or Pod holds them; without
			// volumes only the Pods can, so they are created now and wait in ContainerCreating for their Secrets.
			return true, nil
		}
		// The PVCs createMembers creates next hold the names of a bootstrap's members: the next pass resumes
		// the same bootstrap, and finds the same Certificates.
		return false, nil
	}
	return true, nil
}

// memberCertificateReady returns "" when the Secret of member's Certificate holds a usable certificate, else
// what is missing.
func (r *Reconciler) memberCertificateReady(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, ts *tlsState, member string) (string, error) {
	name := resources.MemberSecretName(member)
	s, err := r.getSecret(ctx, cluster.Namespace, name)
	if err != nil {
		return "", err
	}
	ts.saw(s.secret, false)
	if _, err := checkIssued(s, "Secret", memberWant(cluster, member, r.Options), ts.trust, r.Now()); err != nil {
		return r.certificatePending(ctx, cluster, name, err), nil
	}
	return "", nil
}

// ensureProvidedMemberCerts is ensureMemberCerts for providers Secrets (nothing per member: one Secret, checked
// by ensureProvidedTLS) and CertManager: the Certificate of every member with a running Pod follows the spec
// and its Secret's expiry goes to status; Certificates (and the Secrets cert-manager wrote for them) of members
// that are gone are deleted, so that no key of a removed member stays behind.
func (r *Reconciler) ensureProvidedMemberCerts(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, ts *tlsState, obs *observation) error {
	if ts.provider != etcdv1alpha1.TLSProviderCertManager || ts.wait != nil {
		return nil
	}
	known := map[string]bool{}
	var errs []error
	for _, m := range obs.plan.Members {
		known[m.Name] = m.HasPod || m.HasPVC || m.InEtcd
		if !m.HasPod || m.PodDeleting {
			continue
		}
		if err := r.ensureCertificate(ctx, cluster, resources.MemberCertificate(cluster, m.Name, r.Options, ts.ownCA())); err != nil {
			errs = append(errs, err)
			continue
		}
		s, err := r.getSecret(ctx, cluster.Namespace, resources.MemberSecretName(m.Name))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ts.saw(s.secret, false)
		if p, err := checkIssued(s, "Secret", memberWant(cluster, m.Name, r.Options), ts.trust, r.Now()); err == nil {
			ts.noteProvided(certMember, p)
		}
	}
	if cluster.Spec.Paused {
		return errors.Join(errs...)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(resources.CertificateGVK.GroupVersion().WithKind(resources.CertificateGVK.Kind + "List"))
	if err := r.Client.List(ctx, list, client.InNamespace(cluster.Namespace), client.MatchingLabels{resources.LabelCluster: cluster.Name}); err != nil {
		return errors.Join(append(errs, fmt.Errorf("list member Certificates: %w", err))...)
	}
	for i := range list.Items {
		c := &list.Items[i]
		member := c.GetLabels()[resources.LabelMember]
		if member == "" || known[member] || !metav1.IsControlledBy(c, cluster) || c.GetName() != resources.MemberSecretName(member) ||
			r.Now().Sub(c.GetCreationTimestamp().Time) < secretGrace {
			continue
		}
		uid := c.GetUID()
		if err := r.Client.Delete(ctx, c, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete Certificate %s of removed member %s: %w", c.GetName(), member, err))
			continue
		}
		// cert-manager leaves a deleted Certificate's Secret behind (unless run with
		// --enable-certificate-owner-ref); it carries the member's labels from the Certificate's secretTemplate.
		if err := r.deleteMemberSecret(ctx, cluster, member); err != nil {
			errs = append(errs, err)
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Deleted certificate of removed member", "EtcdCluster", klog.KObj(cluster), "member", member, "certificate", c.GetName())
		r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "CertificateDeleted", "Deleted the cert-manager Certificate %s of removed member %s", c.GetName(), member)
	}
	return errors.Join(errs...)
}

// deleteMemberSecret deletes the Secret cert-manager wrote for a removed member's Certificate, if it is that
// Secret (the member's labels, which Steward's Certificate asked for) and not owned by anything else.
func (r *Reconciler) deleteMemberSecret(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, member string) error {
	s, err := r.getSecret(ctx, cluster.Namespace, resources.MemberSecretName(member))
	if err != nil || s.secret == nil {
		return err
	}
	l := s.secret.Labels
	if l[resources.LabelCluster] != cluster.Name || l[resources.LabelMember] != member {
		return nil
	}
	if owner := metav1.GetControllerOf(s.secret); owner != nil && owner.Kind != resources.CertificateGVK.Kind {
		return nil
	}
	if err := r.Client.Delete(ctx, s.secret, client.Preconditions{UID: &s.secret.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete Secret %s of removed member %s: %w", s.name, member, err)
	}
	return nil
}
