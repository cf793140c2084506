package resources

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"steward.dev/steward/internal/pki"
)

func TestSecretRenewalReason(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("ca", now)
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("other", now)
	if err != nil {
		t.Fatal(err)
	}
	req := pki.Request{CommonName: "app", Client: true, Lifetime: 90 * 24 * time.Hour}
	kp, err := ca.Issue(req, now)
	if err != nil {
		t.Fatal(err)
	}
	secret := func(caPEM []byte) *corev1.Secret {
		return &corev1.Secret{Data: map[string][]byte{SecretCertKey: kp.CertPEM, SecretKeyKey: kp.KeyPEM, SecretCAKey: caPEM}}
	}
	if got := SecretRenewalReason(nil, ca, req, now); got != "missing" {
		t.Errorf("no Secret: %q, want missing", got)
	}
	if got := SecretRenewalReason(secret(ca.CertPEM), ca, req, now); got != "" {
		t.Errorf("a good Secret: %q, want none", got)
	}
	if got := SecretRenewalReason(secret(other.CertPEM), ca, req, now); got != "its CA certificate is not the cluster's" {
		t.Errorf("another CA certificate in the Secret: %q", got)
	}
	if got := SecretRenewalReason(secret(ca.CertPEM), other, req, now); got == "" {
		t.Error("a certificate another CA signed: no reason")
	}
	if got := SecretRenewalReason(secret(ca.CertPEM), ca, pki.Request{CommonName: "someone-else", Client: true, Lifetime: req.Lifetime}, now); got == "" {
		t.Error("a certificate for another name: no reason")
	}
}
