package resources

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

func certManager(kind, group string) func(*etcdv1alpha1.EtcdCluster) {
	return func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderCertManager,
			CertManager: &etcdv1alpha1.TLSCertManager{IssuerRef: etcdv1alpha1.IssuerRef{Name: "issuer", Kind: kind, Group: group}}}
	}
}

// TestCertificates: the Certificates of provider CertManager ask for what provider Steward issues (names, IPs,
// usages, lifetime) into the Secrets the members and Steward use, owned by the cluster and labelled like
// Steward's own TLS Secrets, from the issuer the spec names (kind and group defaulted).
func TestCertificates(t *testing.T) {
	lifetime := func(d time.Duration) func(*etcdv1alpha1.EtcdCluster) {
		return func(c *etcdv1alpha1.EtcdCluster) { c.Spec.TLS.CertificateLifetime = &metav1.Duration{Duration: d} }
	}
	memberDNS := anyList(MemberDNSNames(testCluster(), "db-abcde", opts))
	tests := map[string]struct {
		cluster *etcdv1alpha1.EtcdCluster
		member  string // "" : the client Certificate
		ownCA   bool
		want    map[string]any
	}{
		"member, Issuer defaulted": {testCluster(certManager("", "")), "db-abcde", false, map[string]any{ //nolint:gosec // Secret names, not credentials
			"secretName": "db-abcde-tls", "commonName": "db-abcde", "duration": "2160h0m0s",
			"dnsNames": memberDNS, "ipAddresses": []any{"127.0.0.1", "::1"},
			"usages":    []any{"digital signature", "server auth", "client auth"},
			"issuerRef": map[string]any{"name": "issuer", "kind": "Issuer", "group": "cert-manager.io"},
		}},
		"member, ClusterIssuer of another group, 24h": {testCluster(certManager("ClusterIssuer", "example.com"), lifetime(24*time.Hour)), "db-abcde", false, map[string]any{ //nolint:gosec // Secret names, not credentials
			"secretName": "db-abcde-tls", "duration": "24h0m0s",
			"issuerRef": map[string]any{"name": "issuer", "kind": "ClusterIssuer", "group": "example.com"},
		}},
		"member, the cluster's own CA": {testCluster(certManager("ClusterIssuer", "")), "db-abcde", true, map[string]any{ //nolint:gosec // Secret names, not credentials
			"secretName": "db-abcde-tls", "issuerRef": map[string]any{"name": "db-ca", "kind": "Issuer", "group": "cert-manager.io"},
		}},
		"client, the cluster's own CA": {testCluster(certManager("ClusterIssuer", "")), "", true, map[string]any{
			"secretName": "db-client", "commonName": "root", "issuerRef": map[string]any{"name": "db-ca", "kind": "Issuer", "group": "cert-manager.io"},
		}},
		"client": {testCluster(certManager("Issuer", "cert-manager.io")), "", false, map[string]any{
			"secretName": "db-client", "commonName": "root", "duration": "2160h0m0s",
			"usages":   []any{"digital signature", "client auth"},
			"dnsNames": nil, "ipAddresses": nil,
		}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			var u *unstructured.Unstructured
			labels := ClusterLabels(tt.cluster)
			if tt.member != "" {
				u = MemberCertificate(tt.cluster, tt.member, opts, tt.ownCA)
				labels = MemberLabels(tt.cluster, tt.member)
			} else {
				u = ClientCertificate(tt.cluster, tt.ownCA)
			}
			if u.GroupVersionKind() != CertificateGVK || u.GetNamespace() != "prod" || u.GetName() != tt.want["secretName"] ||
				!reflect.DeepEqual(u.GetLabels(), labels) || len(u.GetOwnerReferences()) != 1 || u.GetOwnerReferences()[0].Kind != "EtcdCluster" ||
				u.GetOwnerReferences()[0].Controller == nil || !*u.GetOwnerReferences()[0].Controller {
				t.Fatalf("object %v %s/%s labels %v owners %v", u.GroupVersionKind(), u.GetNamespace(), u.GetName(), u.GetLabels(), u.GetOwnerReferences())
			}
			spec := u.Object["spec"].(map[string]any)
			for k, want := range tt.want {
				if got := spec[k]; !reflect.DeepEqual(got, want) {
					t.Errorf("spec.%s = %#v, want %#v", k, got, want)
				}
			}
			if pk := spec["privateKey"].(map[string]any); pk["algorithm"] != "ECDSA" || pk["rotationPolicy"] != "Always" {
				t.Errorf("privateKey %v", pk)
			}
			tmpl, _, _ := unstructured.NestedStringMap(u.Object, "spec", "secretTemplate", "labels")
			if !reflect.DeepEqual(tmpl, labels) {
				t.Errorf("secretTemplate labels %v, want %v", tmpl, labels)
			}
			// Unstructured objects must deep-copy (the client does): only JSON types inside.
			_ = u.DeepCopy()
		})
	}
}

// TestClusterCA: provider CertManager's CA of the cluster's own is an intermediate CA Certificate from the
// user's issuer whose key never rotates (members keep the CA they loaded at start), and a namespaced CA Issuer on
// its Secret, both owned by the cluster.
func TestClusterCA(t *testing.T) {
	cluster := testCluster(certManager("ClusterIssuer", ""))
	ca := CACertificate(cluster)
	spec := ca.Object["spec"].(map[string]any)
	want := map[string]any{
		"secretName": "db-ca", "isCA": true, "commonName": "steward-etcd-ca:prod/db",
		"usages":     []any{"digital signature", "cert sign", "crl sign"},
		"issuerRef":  map[string]any{"name": "issuer", "kind": "ClusterIssuer", "group": "cert-manager.io"},
		"privateKey": map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Never"},
	}
	for k, v := range want {
		if !reflect.DeepEqual(spec[k], v) {
			t.Errorf("CA Certificate spec.%s = %#v, want %#v", k, spec[k], v)
		}
	}
	if ca.GetName() != "db-ca" || len(ca.GetOwnerReferences()) != 1 {
		t.Errorf("CA Certificate %s owners %v", ca.GetName(), ca.GetOwnerReferences())
	}
	iss := CAIssuer(cluster)
	if name, _, _ := unstructured.NestedString(iss.Object, "spec", "ca", "secretName"); iss.GroupVersionKind() != IssuerGVK ||
		iss.GetName() != CAIssuerName(cluster) || name != "db-ca" || len(iss.GetOwnerReferences()) != 1 {
		t.Errorf("Issuer %v %s: spec %v owners %v", iss.GroupVersionKind(), iss.GetName(), iss.Object["spec"], iss.GetOwnerReferences())
	}
	_, _ = ca.DeepCopy(), iss.DeepCopy()
}

// TestMemberTrustsClusterCA: a member of provider CertManager that trusts only the cluster's own CA mounts its
// Secret's certificate and key with ca.crt from the trust Secret, at the same paths, and says so on its Pod; one
// that trusts the user's issuer (created before), and members of other providers, mount their Secret whole.
func TestMemberTrustsClusterCA(t *testing.T) {
	tests := map[string]struct {
		cluster *etcdv1alpha1.EtcdCluster
		own     bool
		want    bool
	}{
		"CertManager, own CA":        {testCluster(certManager("ClusterIssuer", "")), true, true},
		"CertManager, shared":        {testCluster(certManager("ClusterIssuer", "")), false, false},
		"Steward (ClusterCA unused)": {testCluster(), true, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			m := boot
			m.ClusterCA = tt.own
			pod := MemberPod(tt.cluster, m, opts)
			if PodTrustsClusterCA(pod) != tt.want {
				t.Errorf("annotation %q", pod.Annotations[AnnotationTrust])
			}
			var vol *corev1.Volume
			for i := range pod.Spec.Volumes {
				if pod.Spec.Volumes[i].Name == memberTLSVolume {
					vol = &pod.Spec.Volumes[i]
				}
			}
			if vol == nil {
				t.Fatal("no TLS volume")
			}
			if !tt.want {
				if vol.Secret == nil || vol.Secret.SecretName != "db-abcde-tls" {
					t.Errorf("volume %+v", vol.VolumeSource)
				}
				return
			}
			p := vol.Projected
			if p == nil || len(p.Sources) != 2 {
				t.Fatalf("volume %+v", vol.VolumeSource)
			}
			got := map[string]string{}
			for _, src := range p.Sources {
				for _, it := range src.Secret.Items {
					got[it.Path] = src.Secret.Name + "/" + it.Key
				}
			}
			wantItems := map[string]string{"tls.crt": "db-abcde-tls/tls.crt", "tls.key": "db-abcde-tls/tls.key", "ca.crt": "db-ca-trust/ca.crt"}
			if !reflect.DeepEqual(got, wantItems) || *p.DefaultMode != 0o440 {
				t.Errorf("projected %v mode %o", got, *p.DefaultMode)
			}
		})
	}
}

// TestSecretNamesByProvider: with provider Secrets every member mounts the user's one Secret and Steward and
// backup Jobs use the user's client Secret; otherwise per-member Secrets and <cluster>-client.
func TestSecretNamesByProvider(t *testing.T) {
	byo := testCluster(func(c *etcdv1alpha1.EtcdCluster) {
		c.Spec.TLS = &etcdv1alpha1.TLSSpec{Provider: etcdv1alpha1.TLSProviderSecrets,
			Secrets: &etcdv1alpha1.TLSSecrets{MemberSecretName: "members", ClientSecretName: "me"}}
	})
	tests := map[string]struct {
		cluster              *etcdv1alpha1.EtcdCluster
		member, client, mode string
	}{
		"Steward":     {testCluster(), "db-abcde-tls", "db-client", "Steward"},
		"Secrets":     {byo, "members", "me", "Secrets"},
		"CertManager": {testCluster(certManager("", "")), "db-abcde-tls", "db-client", "CertManager"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			pod := MemberPod(tt.cluster, boot, opts)
			var mounted string
			for _, v := range pod.Spec.Volumes {
				if v.Secret != nil {
					mounted = v.Secret.SecretName
				}
			}
			if mounted != tt.member || MemberTLSSecretName(tt.cluster, "db-abcde") != tt.member || ClientSecretName(tt.cluster) != tt.client ||
				pod.Annotations[AnnotationTLS] != tt.mode || TLSMode(tt.cluster) != tt.mode {
				t.Errorf("mounted %q, client %q, mode %q", mounted, ClientSecretName(tt.cluster), pod.Annotations[AnnotationTLS])
			}
		})
	}
}

func TestMergeCertificateSpec(t *testing.T) {
	cert := func(spec map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		if spec != nil {
			u.Object["spec"] = spec
		}
		return u
	}
	want := cert(map[string]any{"commonName": "root", "duration": "2160h0m0s"})
	tests := map[string]struct {
		have        *unstructured.Unstructured
		wantChanged bool
		wantSpec    map[string]any
	}{
		"as wanted, with a field another writer added: unchanged, kept": {cert(map[string]any{"commonName": "root", "duration": "2160h0m0s", "revisionHistoryLimit": int64(1)}),
			false, map[string]any{"commonName": "root", "duration": "2160h0m0s", "revisionHistoryLimit": int64(1)}},
		"a field of Steward's differs: set, the other kept": {cert(map[string]any{"commonName": "steward:db", "duration": "2160h0m0s", "revisionHistoryLimit": int64(1)}),
			true, map[string]any{"commonName": "root", "duration": "2160h0m0s", "revisionHistoryLimit": int64(1)}},
		"no spec at all": {cert(nil), true, map[string]any{"commonName": "root", "duration": "2160h0m0s"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			changed, err := MergeCertificateSpec(tt.have, want)
			if err != nil {
				t.Fatal(err)
			}
			spec, _, _ := unstructured.NestedMap(tt.have.Object, "spec")
			if changed != tt.wantChanged || !reflect.DeepEqual(spec, tt.wantSpec) {
				t.Fatalf("changed %v, spec %v; want %v, %v", changed, spec, tt.wantChanged, tt.wantSpec)
			}
		})
	}
}
