package resources

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/pki"
)

// CertificateGVK is cert-manager's Certificate. Steward builds Certificates as unstructured objects: it needs
// five fields of one kind, and cert-manager's Go module (with its own Kubernetes dependencies) would tie
// Steward's releases to cert-manager's.
var CertificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// IssuerGVK is cert-manager's namespaced Issuer: the cluster's own CA issuer (CAIssuer).
var IssuerGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Issuer"}

// DefaultIssuerGroup is cert-manager's own API group, the group of its Issuer and ClusterIssuer.
const DefaultIssuerGroup = "cert-manager.io"

// CAIssuerName is the cluster's own cert-manager Issuer (provider CertManager), on its intermediate CA.
func CAIssuerName(cluster *etcdv1alpha1.EtcdCluster) string { return cluster.Name + "-ca" }

// TrustSecretName is the Secret (Steward's) whose ca.crt holds only the cluster's intermediate CA certificate
// (provider CertManager): what members and Steward trust. The ca.crt cert-manager writes into the Secrets it
// issues is the root of the issuer's chain (pkg/util/pki ParseSingleCertificateChain), the user's shared CA,
// which would let anyone that issuer serves be a member, or root.
func TrustSecretName(cluster *etcdv1alpha1.EtcdCluster) string { return cluster.Name + "-ca-trust" }

// CACertificate is the cert-manager Certificate of the cluster's own intermediate CA (provider CertManager):
// issued by the user's issuer, written to CASecretName, and the signer of every other certificate of the
// cluster through CAIssuer. Its key never rotates (rotationPolicy Never): members load their trusted CA once,
// when etcd starts, so a renewal must keep the key the running members check signatures with.
func CACertificate(cluster *etcdv1alpha1.EtcdCluster) *unstructured.Unstructured {
	name := CASecretName(cluster)
	spec := certificateSpec(cluster, name, fmt.Sprintf("steward-etcd-ca:%s/%s", cluster.Namespace, cluster.Name), ClusterLabels(cluster), false, "cert sign", "crl sign")
	spec["isCA"] = true
	spec["duration"] = pki.CALifetime.String()
	spec["privateKey"] = map[string]any{"algorithm": "ECDSA", "size": int64(256), "rotationPolicy": "Never"}
	return certificate(cluster, name, ClusterLabels(cluster), spec)
}

// CAIssuer is the cluster's own cert-manager CA Issuer on its intermediate CA's Secret.
func CAIssuer(cluster *etcdv1alpha1.EtcdCluster) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"ca": map[string]any{"secretName": CASecretName(cluster)}}}}
	u.SetGroupVersionKind(IssuerGVK)
	u.SetName(CAIssuerName(cluster))
	u.SetNamespace(cluster.Namespace)
	u.SetLabels(ClusterLabels(cluster))
	u.SetOwnerReferences([]metav1.OwnerReference{ownerRef(cluster)})
	return u
}

// MemberCertificate is the cert-manager Certificate of one member (provider CertManager): the same names, IPs,
// usages and lifetime as the certificate provider Steward issues it, written to the same Secret
// (MemberSecretName), which the member mounts. ownCA: from the cluster's own CAIssuer, else from the user's
// issuer (a cluster whose members trust that issuer's CA, from before Steward gave each cluster its own).
func MemberCertificate(cluster *etcdv1alpha1.EtcdCluster, member string, o Options, ownCA bool) *unstructured.Unstructured {
	dns := MemberDNSNames(cluster, member, o)
	var ips []any
	for _, ip := range MemberIPs(cluster) {
		ips = append(ips, ip.String())
	}
	spec := certificateSpec(cluster, MemberSecretName(member), member, MemberLabels(cluster, member), ownCA, "server auth", "client auth")
	spec["dnsNames"] = anyList(dns)
	spec["ipAddresses"] = ips
	return certificate(cluster, MemberSecretName(member), MemberLabels(cluster, member), spec)
}

// ClientCertificate is the cert-manager Certificate of Steward's client certificate (provider CertManager),
// written to ClientSecretName, which Steward and its backup Jobs use. ownCA as for MemberCertificate.
func ClientCertificate(cluster *etcdv1alpha1.EtcdCluster, ownCA bool) *unstructured.Unstructured {
	name := ClientSecretName(cluster)
	spec := certificateSpec(cluster, name, ClientCommonName(cluster), ClusterLabels(cluster), ownCA, "client auth")
	return certificate(cluster, name, ClusterLabels(cluster), spec)
}

// certificateSpec is what every Certificate of the cluster asks for. ECDSA P-256 like Steward's own keys, a new
// key at each renewal (rotationPolicy Always, so a leaked key dies with its certificate), renewal left to
// cert-manager's default (at two thirds of the duration, as provider Steward renews), and the Secret labelled
// like Steward's own TLS Secrets so that it is found (and deleted with its member) by the same labels. ownCA:
// issued by the cluster's own CAIssuer, else by the user's issuer.
func certificateSpec(cluster *etcdv1alpha1.EtcdCluster, secret, commonName string, labels map[string]string, ownCA bool, usages ...string) map[string]any {
	ref := cluster.Spec.TLS.CertManager.IssuerRef
	name, kind, group := ref.Name, ref.Kind, ref.Group
	if ownCA {
		name, kind, group = CAIssuerName(cluster), IssuerGVK.Kind, IssuerGVK.Group
	}
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
		"issuerRef":      map[string]any{"name": name, "kind": kind, "group": group},
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
// Certificate is named like it). The caller sets the owner (the EtcdUser). ownCA as for MemberCertificate.
func UserCertificate(cluster *etcdv1alpha1.EtcdCluster, secretName, commonName string, labels map[string]string, ownCA bool) *unstructured.Unstructured {
	u := certificate(cluster, secretName, labels, certificateSpec(cluster, secretName, commonName, labels, ownCA, "client auth"))
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

// TrustSecret is TrustSecretName holding ca, the cluster's own CA certificate (PEM), under ca.crt: a Secret (not a
// ConfigMap) so that it is Steward's like the cluster's other TLS Secrets, cached and cleaned up with them.
func TrustSecret(cluster *etcdv1alpha1.EtcdCluster, ca []byte) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: TrustSecretName(cluster), Namespace: cluster.Namespace, Labels: ClusterLabels(cluster),
			OwnerReferences: []metav1.OwnerReference{ownerRef(cluster)},
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{SecretCAKey: ca},
	}
}
