// Package certissue is the certificate plumbing of the controllers that keep certificates (the EtcdCluster's
// member and client certificates, an EtcdUser's certificate), one flow per provider. Provider Steward: it issues a
// certificate from the cluster's CA, updates the Secret in place or creates it, and records what it did in the
// log and as an Event on the object that owns the Secret. Provider CertManager: it finds the cert-manager
// Certificate (or Issuer) an object keeps, refusing one it does not control, creates it, brings the fields
// Steward sets back to the spec, and tells the Secrets cert-manager wrote for it. Deciding whether a certificate
// is due (resources.SecretRenewalReason), building the cert-manager objects (internal/resources) and what each
// controller reports stay with the callers.
package certissue

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"steward.dev/steward/internal/pki"
)

// Issue issues a certificate for req from ca (reason says why, for the log and the Event) and writes it: into
// existing, by Update, when the Secret exists (the Update carries the resourceVersion read, so a stale read loses
// with a conflict, retried, instead of overwriting a certificate issued meanwhile); else into the Secret newSecret
// builds from the certificate and key, by Create. A Create that finds the Secret already there returns the API's
// AlreadyExists error (wrapped), for the caller to tell apart. The Event CertificateIssued goes to owner.
func Issue(ctx context.Context, c client.Client, rec record.EventRecorder, owner client.Object, ca *pki.KeyPair, req pki.Request,
	existing *corev1.Secret, newSecret func(certPEM, keyPEM []byte) *corev1.Secret, reason string, now time.Time) (*corev1.Secret, *pki.KeyPair, error) {
	kp, err := ca.Issue(req, now)
	if err != nil {
		return nil, nil, err
	}
	want := newSecret(kp.CertPEM, kp.KeyPEM)
	secret := existing
	if secret != nil {
		secret.Data, secret.Type = want.Data, want.Type
		if err := c.Update(ctx, secret); err != nil {
			return nil, nil, fmt.Errorf("renew certificate in Secret %s: %w", secret.Name, err)
		}
	} else {
		secret = want
		if err := c.Create(ctx, secret); err != nil {
			return nil, nil, fmt.Errorf("create Secret %s: %w", secret.Name, err)
		}
	}
	ctrl.LoggerFrom(ctx).Info("Issued certificate", "owner", klog.KObj(owner), "secret", secret.Name,
		"commonName", req.CommonName, "reason", reason, "notAfter", kp.Cert.NotAfter)
	rec.Eventf(owner, corev1.EventTypeNormal, "CertificateIssued", "Issued certificate %s in Secret %s (%s), valid until %s",
		req.CommonName, secret.Name, reason, kp.Cert.NotAfter.UTC().Format(time.RFC3339))
	return secret, kp, nil
}
