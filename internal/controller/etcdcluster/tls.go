package etcdcluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/controller/certissue"
	"steward.dev/steward/internal/etcd"
	"steward.dev/steward/internal/pki"
	"steward.dev/steward/internal/plan"
	"steward.dev/steward/internal/resources"
)

// secretGrace: a member Secret is deleted as a leftover only once it is this old, so that a Secret created a
// moment ago, whose member's PVC and Pod the cache has not shown yet, is not taken for one.
const secretGrace = time.Minute

// CacheByObject limits the manager's cache of Secrets to those Steward manages (its TLS Secrets): the
// controller reads them on every pass, and other Secrets of the cluster are none of its business to hold in
// memory. The manager of cmd/steward and the e2e tests use it.
func CacheByObject() map[client.Object]cache.ByObject {
	return map[client.Object]cache.ByObject{
		&corev1.Secret{}: {Label: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": "steward"})},
		// Continuous backup's followers (Deployment and ConfigMap): the only ones Steward reads.
		&appsv1.Deployment{}: {Label: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": "steward"})},
		&corev1.ConfigMap{}:  {Label: labels.SelectorFromSet(labels.Set{"app.kubernetes.io/managed-by": "steward"})},
		// Nodes, read for placement (observeNodes) in a cluster-wide install only.
		&corev1.Node{}: {Transform: NodeCacheTransform},
	}
}

// tlsState is one pass's view of the cluster's TLS: the provider whose certificates members hold, the CA that
// issues them (provider Steward), what status reports, and for the providers whose certificates Steward does not
// issue, whether it must wait for them. Nil while no member holds certificates and the spec asks for none.
type tlsState struct {
	// provider is the provider of the certificates (the spec's, or while members switch to plaintext the one
	// they still hold).
	provider string
	ca       *pki.KeyPair
	status   *etcdv1alpha1.TLSStatus
	// wait, when set, is the Wait the provider's material imposes while it is not usable (tls_providers.go): the
	// pass hands it to plan as Observation.TLSBlocked (tlsBlocked), which makes it the step.
	wait *plan.Action
	// waiting says which member certificates new Pods wait for (provider CertManager), for Progressing.
	waiting string
	// trust is the cluster's own CA certificate (provider CertManager, TrustSecretName's ca.crt), the only CA
	// members and Steward trust; nil while members trust the user's issuer's CA, and sharedIssuer says which
	// and what to do (Degraded, ReasonSharedIssuerTrusted).
	trust        []byte
	sharedIssuer string
	// seen is resources.CertificatesDigest of each TLS Secret the pass read (a member Pod's volume may mount
	// it), by name; written, those of them the pass itself wrote. A member Pod is annotated with a change only
	// from what was read (refreshCertificates): a Secret written this pass is left to the pass its own watch
	// event brings, by when the kubelet's watch of it has most likely delivered it too.
	seen    map[string]string
	written map[string]bool
}

// saw records the certificates of a TLS Secret the pass read, or wrote (wrote).
func (ts *tlsState) saw(s *corev1.Secret, wrote bool) {
	if ts == nil || s == nil {
		return
	}
	if ts.seen == nil {
		ts.seen, ts.written = map[string]string{}, map[string]bool{}
	}
	ts.seen[s.Name] = resources.CertificatesDigest(s)
	ts.written[s.Name] = ts.written[s.Name] || wrote
}

// readOnly is seen without the Secrets the pass wrote: what refreshCertificates may annotate Pods with.
func (ts *tlsState) readOnly() map[string]string {
	if ts == nil {
		return nil
	}
	out := make(map[string]string, len(ts.seen))
	for name, d := range ts.seen {
		if !ts.written[name] {
			out[name] = d
		}
	}
	return out
}

// certificates is seen as it stands, for the Pods the pass creates (nil for a cluster without TLS).
func (ts *tlsState) certificates() map[string]string {
	if ts == nil {
		return nil
	}
	return ts.seen
}

// ownCA reports whether the cluster's certificates come from its own CA (provider CertManager).
func (ts *tlsState) ownCA() bool { return ts != nil && ts.trust != nil }

// providerOrNone is the provider of the certificates, "" for a cluster without TLS.
func (ts *tlsState) providerOrNone() string {
	if ts == nil {
		return ""
	}
	return ts.provider
}

// Kinds of certificate whose expiry status reports (tlsState.note).
const (
	certMember = "member"
	certClient = "client"
)

// note records the expiry of a certificate of kind (certMember or certClient) that is in place: the first to
// expire of its kind, and of all.
func (ts *tlsState) note(kind string, notAfter time.Time) {
	earliest := func(t **metav1.Time) {
		if *t == nil || notAfter.Before((*t).Time) {
			*t = &metav1.Time{Time: notAfter}
		}
	}
	earliest(&ts.status.NotAfter)
	switch kind {
	case certMember:
		earliest(&ts.status.MemberNotAfter)
	case certClient:
		earliest(&ts.status.ClientNotAfter)
	}
}

// tlsSpecOf is the part of the spec (and status) the TLS decision reads.
func tlsSpecOf(cluster *etcdv1alpha1.EtcdCluster) plan.TLSSpec {
	return plan.TLSSpec{Enabled: resources.TLSEnabled(cluster), Provider: resources.TLSMode(cluster), Paused: cluster.Spec.Paused,
		StatusTLS: cluster.Status.TLS != nil}
}

// tlsPodsOf is what the member Pods the cluster controls say of their TLS (the only Pods whose TLS mode counts).
func tlsPodsOf(cluster *etcdv1alpha1.EtcdCluster, pods []corev1.Pod) []plan.TLSPod {
	var out []plan.TLSPod
	for i := range pods {
		p := &pods[i]
		if !memberPodOf(cluster, p) {
			continue
		}
		mode, provider := resources.PodTLS(p)
		out = append(out, plan.TLSPod{Name: p.Name, Deleting: p.DeletionTimestamp != nil, PredatesTLS: resources.PodPredatesTLS(p),
			Holds: mode != resources.MemberTLSPlaintext, Provider: provider, TrustsClusterCA: resources.PodTrustsClusterCA(p)})
	}
	return out
}

// memberPodOf reports whether p is a member Pod the cluster controls.
func memberPodOf(cluster *etcdv1alpha1.EtcdCluster, p *corev1.Pod) bool {
	return p.Labels[resources.LabelMember] != "" && metav1.IsControlledBy(p, cluster)
}

// ensureTLSMaterial is the first stage of act: it carries out the TLS decision (plan.DecideTLS) before etcd is
// observed, because observing etcd needs the client certificate. It marks the Pods that predate TLS in Steward
// as plaintext, drops the certificates of a finished switch to plaintext, ensures the CA and Steward's client
// certificate of the provider the members need, and points the etcd pool at them. With the decision's Wait
// (a legacy plaintext cluster, mixed providers) it touches nothing, not even the pool.
func (r *Reconciler) ensureTLSMaterial(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, pods []corev1.Pod, d plan.TLSDecision) (*tlsState, error) {
	if d.Wait != nil {
		return nil, nil
	}
	if err := r.markPlaintextPods(ctx, cluster, pods, d.MarkPlaintext); err != nil {
		return nil, err
	}
	if d.DropTLS {
		// The pass after the last member switched to plaintext (status still shows TLS until this succeeds).
		if err := r.dropTLS(ctx, cluster); err != nil {
			return nil, err
		}
	}
	return r.ensureTLS(ctx, cluster, d.Provider, d.Holding, d.SharedTrust)
}

// tlsBlocked is the Wait the pass's TLS imposes on the plan (plan.Observation.TLSBlocked): the decision's, or,
// for the providers whose certificates Steward does not issue, the material's while it is not usable.
func tlsBlocked(d plan.TLSDecision, ts *tlsState) *plan.Action {
	if d.Wait != nil {
		return d.Wait
	}
	if ts != nil {
		return ts.wait
	}
	return nil
}

// ensureTLS makes sure the cluster's CA and Steward's client certificate exist and are current, and points
// the etcd pool at them (at nothing, for plaintext). It runs before observing etcd, which needs the client
// certificate. shared is sharedTrust's answer (provider CertManager).
func (r *Reconciler) ensureTLS(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, provider string, holding bool, shared []string) (*tlsState, error) {
	key := client.ObjectKeyFromObject(cluster).String()
	if provider == "" {
		return nil, r.Etcd.SetTLS(key, nil)
	}
	if provider != etcdv1alpha1.TLSProviderSteward {
		return r.ensureProvidedTLS(ctx, cluster, provider, holding, shared)
	}
	ca, err := r.ensureCA(ctx, cluster, holding)
	if err != nil {
		return nil, err
	}
	ts := &tlsState{provider: provider, ca: ca, status: &etcdv1alpha1.TLSStatus{
		CASecret: resources.CASecretName(cluster), ClientSecret: resources.ClientSecretName(cluster),
		CANotAfter: &metav1.Time{Time: ca.Cert.NotAfter},
	}}
	secret, err := r.ensureCert(ctx, cluster, ts, resources.ClientSecretName(cluster), resources.ClusterLabels(cluster), clientRequest(cluster))
	if err != nil {
		return ts, err
	}
	return ts, r.Etcd.SetTLS(key, &etcd.TLS{CA: ca.CertPEM, Cert: secret.Data[resources.SecretCertKey],
		Key: secret.Data[resources.SecretKeyKey], ServerName: resources.ClientServiceHost(cluster, r.Options)})
}

// ensureCA reads the cluster's CA, creating it for a cluster that has not formed yet or while no member holds
// certificates (a plaintext cluster switching to TLS). A CA the members of a formed cluster hold is never replaced: they loaded it when they started (etcd does not
// reload trusted CAs), so a new CA would cut every member off from the others and from Steward.
func (r *Reconciler) ensureCA(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, holding bool) (*pki.KeyPair, error) {
	name := resources.CASecretName(cluster)
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: name}, secret)
	switch {
	case err == nil:
		if !metav1.IsControlledBy(secret, cluster) {
			return nil, fmt.Errorf("CA Secret %s exists and is not owned by this EtcdCluster: Steward does not take it over", name)
		}
		ca, err := pki.ParseKeyPair(secret.Data[resources.SecretCertKey], secret.Data[resources.SecretKeyKey])
		if err != nil {
			return nil, fmt.Errorf("read CA Secret %s: %w", name, err)
		}
		return ca, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get CA Secret %s: %w", name, err)
	case holding && cluster.Status.Bootstrapped:
		return nil, fmt.Errorf("CA Secret %s is missing: the members trust only the CA they started with, so Steward does not create a new one for a running cluster; restore the Secret", name)
	case cluster.Spec.Paused:
		return nil, fmt.Errorf("CA Secret %s is missing and the cluster is paused", name)
	}
	ca, err := pki.NewCA(fmt.Sprintf("steward-etcd-ca:%s/%s", cluster.Namespace, cluster.Name), r.Now())
	if err != nil {
		return nil, err
	}
	secret = resources.TLSSecret(cluster, name, resources.ClusterLabels(cluster), ca.CertPEM, ca.CertPEM, ca.KeyPEM)
	if err := r.Client.Create(ctx, secret); err != nil {
		// AlreadyExists included: the CA in hand is not the one stored; the next pass reads that one.
		return nil, fmt.Errorf("create CA Secret %s: %w", name, err)
	}
	ctrl.LoggerFrom(ctx).Info("Created CA", "EtcdCluster", klog.KObj(cluster), "secret", name)
	r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "CACreated", "Created the cluster's CA in Secret %s (valid until %s)",
		name, ca.Cert.NotAfter.UTC().Format(time.RFC3339))
	return ca, nil
}

// certKind is what kind of certificate req asks for: member certificates serve (and are clients of their
// peers), Steward's client certificate only authenticates.
func certKind(req pki.Request) string {
	if req.Server {
		return certMember
	}
	return certClient
}

func clientRequest(cluster *etcdv1alpha1.EtcdCluster) pki.Request {
	return pki.Request{CommonName: resources.ClientCommonName(cluster), Client: true, Lifetime: resources.CertificateLifetime(cluster)}
}

func memberRequest(cluster *etcdv1alpha1.EtcdCluster, member string, o resources.Options) pki.Request {
	return pki.Request{CommonName: member, DNSNames: resources.MemberDNSNames(cluster, member, o), IPs: resources.MemberIPs(cluster),
		Server: true, Client: true, Lifetime: resources.CertificateLifetime(cluster)}
}

// ensureCert makes the Secret name hold a current certificate for req from the cluster's CA: it issues one
// when the Secret is missing, its certificate is due for renewal (two thirds of its lifetime), was issued for
// other names, another lifetime or by another CA, or the Secret's CA certificate is not the cluster's.
// Renewing in place is what keeps members up: their volumes follow the Secret and etcd reads the new files on
// the next handshake. Returns the Secret as it now is.
func (r *Reconciler) ensureCert(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, ts *tlsState, name string, lbls map[string]string, req pki.Request) (*corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: name}, secret)
	exists := err == nil
	switch {
	case exists && !metav1.IsControlledBy(secret, cluster):
		return nil, fmt.Errorf("secret %s exists and is not owned by this EtcdCluster: Steward does not take it over", name)
	case err != nil && !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("get Secret %s: %w", name, err)
	}
	reason := "missing"
	if exists {
		reason = resources.SecretRenewalReason(secret, ts.ca, req, r.Now())
	}
	if reason == "" || cluster.Spec.Paused {
		if !exists {
			return nil, fmt.Errorf("secret %s is missing and the cluster is paused", name)
		}
		if c, err := pki.ParseCertificate(secret.Data[resources.SecretCertKey]); err == nil {
			ts.note(certKind(req), c.NotAfter)
		}
		ts.saw(secret, false)
		return secret, nil
	}
	if !exists {
		secret = nil
	}
	secret, kp, err := certissue.Issue(ctx, r.Client, r.Recorder, cluster, ts.ca, req, secret, func(certPEM, keyPEM []byte) *corev1.Secret {
		return resources.TLSSecret(cluster, name, lbls, ts.ca.CertPEM, certPEM, keyPEM)
	}, reason, r.Now())
	if err != nil {
		return nil, err
	}
	ts.note(certKind(req), kp.Cert.NotAfter)
	ts.saw(secret, true)
	return secret, nil
}

// ensureMemberCerts keeps the certificate of every member that has a running Pod current, and deletes the
// Secrets of members that are gone (no Pod, no volume, not in etcd). Certificates of members about to be
// created are issued by createMembers, before their Pods.
func (r *Reconciler) ensureMemberCerts(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, ts *tlsState, obs *observation) error {
	if ts == nil {
		return nil
	}
	if ts.provider != etcdv1alpha1.TLSProviderSteward {
		return r.ensureProvidedMemberCerts(ctx, cluster, ts, obs)
	}
	known := map[string]bool{}
	var errs []error
	for _, m := range obs.plan.Members {
		known[m.Name] = m.HasPod || m.HasPVC || m.InEtcd
		if m.HasPod && !m.PodDeleting && m.PodTLS != resources.MemberTLSPlaintext {
			if _, err := r.ensureCert(ctx, cluster, ts, resources.MemberSecretName(m.Name), resources.MemberLabels(cluster, m.Name),
				memberRequest(cluster, m.Name, r.Options)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if cluster.Spec.Paused {
		return errors.Join(errs...)
	}
	var secrets corev1.SecretList
	if err := r.Client.List(ctx, &secrets, client.InNamespace(cluster.Namespace), client.MatchingLabels{resources.LabelCluster: cluster.Name}); err != nil {
		return errors.Join(append(errs, fmt.Errorf("list member Secrets: %w", err))...)
	}
	for i := range secrets.Items {
		s := &secrets.Items[i]
		member := s.Labels[resources.LabelMember]
		if member == "" || known[member] || !metav1.IsControlledBy(s, cluster) || s.Name != resources.MemberSecretName(member) ||
			r.Now().Sub(s.CreationTimestamp.Time) < secretGrace {
			continue
		}
		if err := r.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete Secret %s of removed member %s: %w", s.Name, member, err))
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Deleted certificate of removed member", "EtcdCluster", klog.KObj(cluster), "member", member, "secret", s.Name)
		r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "CertificateDeleted", "Deleted the certificate of removed member %s (Secret %s)", member, s.Name)
	}
	return errors.Join(errs...)
}

// dropTLS deletes, once a cluster has switched to plaintext (the spec says None and no member holds
// certificates), the certificates Steward made or had cert-manager make for it: its CA, trust, client and member
// Secrets, and its Certificates and Issuer with the Secrets cert-manager wrote for them. Keys nobody uses should not stay
// behind, and a later switch to TLS with another provider would take a member Secret of the old CA for one of
// its own (it is valid for the member's names, by its own ca.crt). The user's own Secrets (provider Secrets)
// carry neither Steward's labels nor an owner: they are never touched.
func (r *Reconciler) dropTLS(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster) error {
	installed, err := r.certManagerInstalled()
	if err != nil {
		return err
	}
	for _, gvk := range []schema.GroupVersionKind{resources.CertificateGVK, resources.IssuerGVK} {
		if !installed {
			break
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.Client.List(ctx, list, client.InNamespace(cluster.Namespace), client.MatchingLabels{resources.LabelCluster: cluster.Name}); err != nil {
			return fmt.Errorf("list %ss: %w", gvk.Kind, err)
		}
		for i := range list.Items {
			c := &list.Items[i]
			if !metav1.IsControlledBy(c, cluster) {
				continue
			}
			uid := c.GetUID()
			if err := r.Client.Delete(ctx, c, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete %s %s: %w", gvk.Kind, c.GetName(), err)
			}
		}
	}
	var secrets corev1.SecretList
	if err := r.Client.List(ctx, &secrets, client.InNamespace(cluster.Namespace), client.MatchingLabels{resources.LabelCluster: cluster.Name}); err != nil {
		return fmt.Errorf("list TLS Secrets: %w", err)
	}
	var dropped []string
	for i := range secrets.Items {
		s := &secrets.Items[i]
		if !tlsSecretOf(cluster, s) {
			continue
		}
		if err := r.Client.Delete(ctx, s, client.Preconditions{UID: &s.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete Secret %s: %w", s.Name, err)
		}
		dropped = append(dropped, s.Name)
	}
	if len(dropped) > 0 {
		ctrl.LoggerFrom(ctx).Info("Deleted certificates after switching to plaintext", "EtcdCluster", klog.KObj(cluster), "secrets", dropped)
		r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "CertificatesDeleted",
			"Every member runs plaintext: deleted the TLS Secrets %v (a later switch to TLS starts from new certificates)", dropped)
	}
	return nil
}

// tlsSecretOf reports whether s is one of the cluster's TLS Secrets: the trust Secret of provider CertManager
// (Steward's), or the CA, client or a member Secret by name,
// labelled for the cluster, and either owned by it (provider Steward) or written by cert-manager for one of
// its Certificates (annotation cert-manager.io/certificate-name; cert-manager sets no owner by default).
func tlsSecretOf(cluster *etcdv1alpha1.EtcdCluster, s *corev1.Secret) bool {
	if s.Name == resources.TrustSecretName(cluster) && s.Labels[resources.LabelCluster] == cluster.Name && metav1.IsControlledBy(s, cluster) {
		return true
	}
	if s.Labels[resources.LabelCluster] != cluster.Name || s.Type != corev1.SecretTypeTLS {
		return false
	}
	named := s.Name == resources.CASecretName(cluster) || s.Name == cluster.Name+"-client" ||
		s.Labels[resources.LabelMember] != "" && s.Name == resources.MemberSecretName(s.Labels[resources.LabelMember])
	owner := metav1.GetControllerOf(s)
	ours := metav1.IsControlledBy(s, cluster) || owner == nil && certissue.IssuedByCertManager(s) ||
		owner != nil && owner.Kind == resources.CertificateGVK.Kind
	return named && ours
}

// markPlaintextPods records on the member Pods names (those that predate TLS in Steward, plan.DecideTLS) that
// they run plaintext, once the spec says None: from then on they are plaintext members like any other, which a
// later switch to TLS moves. It patches copies: the pass's observation stays what it read.
func (r *Reconciler) markPlaintextPods(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, pods []corev1.Pod, names []string) error {
	for i := range pods {
		if !slices.Contains(names, pods[i].Name) || !memberPodOf(cluster, &pods[i]) {
			continue
		}
		p := pods[i].DeepCopy()
		patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[resources.AnnotationTLS] = etcdv1alpha1.TLSProviderNone
		if err := r.Client.Patch(ctx, p, patch); err != nil {
			return fmt.Errorf("mark member %s as plaintext: %w", p.Name, err)
		}
	}
	return nil
}

// refreshCertificates annotates the member Pods whose TLS Secrets the pass saw with content their annotation
// does not record (resources.CertificatesRefresh): the Pod update makes the kubelet sync the Pod and write the
// Secrets' current content into its volume now, instead of on its periodic sync a minute or more later (etcd
// reads the files on each new handshake). It changes one annotation and nothing else: no member restarts. A pass
// that sees the same Secrets again writes nothing. Not while the provider's material is unusable (tlsState.wait:
// Steward changes nothing then, and hurries no invalid certificate into the members; the kubelet's own sync
// still comes).
func (r *Reconciler) refreshCertificates(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, ts *tlsState, obs *observation) error {
	if ts == nil || ts.wait != nil {
		return nil
	}
	seen := ts.readOnly()
	if len(seen) == 0 {
		return nil
	}
	var refreshed []string
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(obs.pods)) {
		pod := obs.pods[name]
		if !memberPodOf(cluster, pod) {
			continue
		}
		value, refresh := resources.CertificatesRefresh(pod, seen)
		if !refresh {
			continue
		}
		if err := r.annotateMemberPod(ctx, pod, resources.AnnotationCertificates, value); err != nil {
			errs = append(errs, fmt.Errorf("annotate member %s with its certificates: %w", name, err))
			continue
		}
		refreshed = append(refreshed, name)
	}
	if len(refreshed) > 0 {
		ctrl.LoggerFrom(ctx).Info("Refreshed member certificate volumes", "EtcdCluster", klog.KObj(cluster), "members", refreshed)
		r.Recorder.Eventf(cluster, corev1.EventTypeNormal, "CertificateVolumesRefreshed",
			"Annotated the Pods of members %v with their certificates' new digest: the kubelet writes the new certificate files into their volumes now, without a restart", refreshed)
	}
	return errors.Join(errs...)
}

// observePeerIdentity looks, while the spec asks members to check the peer identity, at the certificate each
// member serving TLS presents whose Pod is not known to hold the identity (a Pod created before Steward put it
// into member certificates): its Secret was renewed with it, and the kubelet brings the renewal into the running
// Pod within seconds (refreshCertificates). The client port serves the same certificate file as the peer port. Only those Pods
// are dialed, so a settled cluster costs no handshake.
func (r *Reconciler) observePeerIdentity(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation) {
	if !resources.PeerAuthWanted(cluster) {
		return
	}
	want := resources.PeerIdentity(cluster, r.Options)
	key := client.ObjectKeyFromObject(cluster).String()
	for i := range obs.plan.Members {
		m := &obs.plan.Members[i]
		pod := obs.pods[m.Name]
		if m.PeerIdentity || m.PodTLS != plan.TLSOn || pod == nil || pod.Status.PodIP == "" || m.PodDeleting {
			continue
		}
		endpoint := fmt.Sprintf("https://%s", net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(resources.ClientPort)))
		cert, err := r.Etcd.ServedCertificate(ctx, key, endpoint)
		if err != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("Could not read the certificate a member serves", "member", m.Name, "error", err.Error())
			continue
		}
		m.PeerIdentity = cert.VerifyHostname(want) == nil
	}
}

// updatePeerURL changes the peer URL etcd lists for member MemberID (a step of a switch between plaintext and
// TLS).
func (r *Reconciler) updatePeerURL(ctx context.Context, cluster *etcdv1alpha1.EtcdCluster, obs *observation, action plan.Action) error {
	if err := r.Etcd.UpdatePeerURL(ctx, client.ObjectKeyFromObject(cluster).String(), obs.endpoints, action.MemberID, action.PeerURL); err != nil {
		return err
	}
	r.tookStep(ctx, cluster, action, "Changed peer URL", corev1.EventTypeNormal, "PeerURLChanged",
		fmt.Sprintf("Changed the peer URL of member %s to %s (%s)", action.Members[0], action.PeerURL, action.Reason),
		"memberID", etcd.FormatID(action.MemberID), "peerURL", action.PeerURL)
	return nil
}
