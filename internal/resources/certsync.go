package resources

import (
	corev1 "k8s.io/api/core/v1"
)

// AnnotationCertificates is on a member Pod holding certificates: a digest of the certificates in the Secrets its
// TLS volume mounts, as Steward last saw them (CertificatesRefresh). A member's certificate changes in place (a
// renewal, a change of spec.tls.extraSANs or of the peer identity, cert-manager's or the user's new Secret); the
// kubelet writes a Secret volume's new content only when it syncs the Pod, which it does by itself once every
// syncFrequency with up to half of it again as jitter (60-90 s by default), or at once when the Pod object
// changes, annotations included. Steward changes this annotation when it sees the content change, so members
// serve a new certificate within seconds. Only metadata changes: no container restarts, the Pod spec stays.
const AnnotationCertificates = "etcd.steward.dev/certificates"

// CertificatesDigest is a digest of the certificates a TLS Secret holds (ca.crt and tls.crt; never the key,
// which changes only together with the certificate): the unit CertificatesRefresh compares.
func CertificatesDigest(s *corev1.Secret) string {
	return Hash([][]byte{s.Data[SecretCAKey], s.Data[SecretCertKey]})
}

// memberTLSSecrets are the names of the Secrets a member Pod's TLS volume (memberTLSVolumes) mounts, in the
// volume's order: none for a plaintext member.
func memberTLSSecrets(volumes []corev1.Volume) []string {
	var names []string
	for _, v := range volumes {
		if v.Name != memberTLSVolume {
			continue
		}
		if v.Secret != nil {
			names = append(names, v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					names = append(names, src.Secret.Name)
				}
			}
		}
	}
	return names
}

// certificatesOf is AnnotationCertificates' value for a member Pod with volumes, from seen (CertificatesDigest of
// each Secret seen, by name): "" when the Pod mounts no TLS Secret, or one that is not in seen.
func certificatesOf(volumes []corev1.Volume, seen map[string]string) string {
	names := memberTLSSecrets(volumes)
	if len(names) == 0 {
		return ""
	}
	digests := make([]string, 0, len(names))
	for _, n := range names {
		d, ok := seen[n]
		if !ok {
			return ""
		}
		digests = append(digests, d)
	}
	return Hash(digests)
}

// CertificatesRefresh decides whether member Pod p is to be annotated (AnnotationCertificates) with the
// certificates Steward saw this pass, and with which value: when p mounts TLS Secrets all of which are in seen
// (CertificatesDigest by Secret name), runs or is about to, and carries another value or none (a Pod created by a
// Steward before the annotation, or before the Secret changed). The value is derived from what was seen only, so
// a pass that sees the same Secrets writes nothing.
func CertificatesRefresh(p *corev1.Pod, seen map[string]string) (string, bool) {
	if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
		return "", false
	}
	v := certificatesOf(p.Spec.Volumes, seen)
	if v == "" || p.Annotations[AnnotationCertificates] == v {
		return "", false
	}
	return v, true
}
