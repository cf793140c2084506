package resources

import (
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// CertificateGVK is cert-manager's Certificate. Steward builds Certificates as unstructured objects: it needs
// five fields of one kind, and cert-manager's Go module (with its own Kubernetes dependencies) would tie
// Steward's releases to cert-manager's.
var CertificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// DefaultIssuerGroup is cert-manager's own API group, the group of its Issuer and ClusterIssuer.
const DefaultIssuerGroup = "cert-manager.io"

// MemberCertificate is the cert-manager Certificate of one member (provider CertManager): the same names, IPs,
// usages and lifetime as the certificate provider Steward issues it, written to the same Secret
// (MemberSecretName), which the member mounts.
func MemberCertificate(cluster *etcdv1alpha1.EtcdCluster, member string, o Options) *unstructured.Unstructured {
	dns := MemberDNSNames(cluster, member, o)
	var ips []any
	for _, ip := range MemberIPs() {
		ips = append(ips, ip.String())
	}
	spec := certificateSpec(cluster, MemberSecretName(member), member, MemberLabels(cluster, member), "server auth", "client auth")
	spec["dnsNames"] = anyList(dns)
	spec["ipAddresses"] = ips
	return certificate(cluster, MemberSecretName(member), MemberLabels(cluster, member), spec)
}

// ClientCertificate is the cert-manager Certificate of Steward's client certificate (provider CertManager),
// written to ClientSecretName, which Steward and its backup Jobs use.
func ClientCertificate(cluster *etcdv1alpha1.EtcdCluster) *unstructured.Unstructured {
	name := ClientSecretName(cluster)
	spec := certificateSpec(cluster, name, ClientCommonName(cluster), ClusterLabels(cluster), "client auth")
	return certificate(cluster, name, ClusterLabels(cluster), spec)
}

// certificateSpec is what every Certificate of the cluster asks for. ECDSA P-256 like Steward's own keys, a new
// key at each renewal (rotationPolicy Always, so a leaked key dies with its certificate), renewal left to
// cert-manager's default (at two thirds of the duration, as provider Steward renews), and the Secret labelled
// like Steward's own TLS Secrets so that it is found (and deleted with its member) by the same labels.
func certificateSpec(cluster *etcdv1alpha1.EtcdCluster, secret, commonName string, labels map[string]string, usages ...string) map[string]any {
	ref := cluster.Spec.TLS.CertManager.IssuerRef
	kind, group := ref.Kind, ref.Group
	if kind == "" {
		kind = "Issuer"
	}
	if group == "" {
		group = DefaultIssuerGroup
	}
	tmplLabels := map[string]any{}
	for k, v := range labels {
		tmplLabels[k] = v
	}
	return map[string]any{
		"secretName":     secret,
		"commonName":     commonName,
		"duration":       CertificateLifetime(cluster).String(),
		"usages":         anyList(append([]string{"digital signature"}, usages...)),
		"privateKey":     map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Always"},
		"issuerRef":      map[string]any{"name": ref.Name, "kind": kind, "group": group},
		"secretTemplate": map[string]any{"labels": tmplLabels},
	}
}

func certificate(cluster *etcdv1alpha1.EtcdCluster, name string, labels map[string]string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(CertificateGVK)
	u.SetName(name)
	u.SetNamespace(cluster.Namespace)
	u.SetLabels(labels)
	u.SetOwnerReferences([]metav1.OwnerReference{ownerRef(cluster)})
	return u
}

// anyList makes a list unstructured objects can hold (and deep-copy): []any, not []string.
func anyList(in []string) []any {
	out := make([]any, len(in))
	for i, s := range in {
		out[i] = s
	}
	return out
}

// UserCertificate is the cert-manager Certificate of an EtcdUser on a cluster of provider CertManager: a client
// certificate with the user's name as common name from the cluster's issuer, written to secretName (the
// Certificate is named like it). The caller sets the owner (the EtcdUser).
func UserCertificate(cluster *etcdv1alpha1.EtcdCluster, secretName, commonName string, labels map[string]string) *unstructured.Unstructured {
	u := certificate(cluster, secretName, labels, certificateSpec(cluster, secretName, commonName, labels, "client auth"))
	u.SetOwnerReferences(nil)
	return u
}

// MergeCertificateSpec writes the spec fields Steward sets (those of want) into have and reports whether any of
// them differed. Other fields of have stay: cert-manager or an admission webhook may add them.
func MergeCertificateSpec(have, want *unstructured.Unstructured) (bool, error) {
	spec, _, _ := unstructured.NestedMap(have.Object, "spec")
	wantSpec, _, _ := unstructured.NestedMap(want.Object, "spec")
	changed := spec == nil
	if spec == nil {
		spec = map[string]any{}
	}
	for k, v := range wantSpec {
		if !equality.Semantic.DeepEqual(spec[k], v) {
			spec[k], changed = v, true
		}
	}
	if !changed {
		return false, nil
	}
	return true, unstructured.SetNestedMap(have.Object, spec, "spec")
}
