package resources

import (
	"reflect"
	"testing"
	"time"

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
		want    map[string]any
	}{
		"member, Issuer defaulted": {testCluster(certManager("", "")), "db-abcde", map[string]any{ //nolint:gosec // Secret names, not credentials
			"secretName": "db-abcde-tls", "commonName": "db-abcde", "duration": "2160h0m0s",
			"dnsNames": memberDNS, "ipAddresses": []any{"127.0.0.1", "::1"},
			"usages":    []any{"digital signature", "server auth", "client auth"},
			"issuerRef": map[string]any{"name": "issuer", "kind": "Issuer", "group": "cert-manager.io"},
		}},
		"member, ClusterIssuer of another group, 24h": {testCluster(certManager("ClusterIssuer", "example.com"), lifetime(24*time.Hour)), "db-abcde", map[string]any{ //nolint:gosec // Secret names, not credentials
			"secretName": "db-abcde-tls", "duration": "24h0m0s",
			"issuerRef": map[string]any{"name": "issuer", "kind": "ClusterIssuer", "group": "example.com"},
		}},
		"client": {testCluster(certManager("Issuer", "cert-manager.io")), "", map[string]any{
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
				u = MemberCertificate(tt.cluster, tt.member, opts)
				labels = MemberLabels(tt.cluster, tt.member)
			} else {
				u = ClientCertificate(tt.cluster)
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
