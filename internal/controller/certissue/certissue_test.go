package certissue

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"steward.dev/steward/internal/pki"
)

// TestIssue: a missing Secret is created with the new certificate, an existing one updated in place (keeping
// everything but its data), a Create that races another writer returns AlreadyExists, and each write is an Event
// on the owner that names the certificate and never carries the key.
func TestIssue(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	ca, err := pki.NewCA("ca", now)
	if err != nil {
		t.Fatal(err)
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "owner"}}
	newSecret := func(certPEM, keyPEM []byte) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "app-tls"}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{"tls.crt": certPEM, "tls.key": keyPEM}}
	}
	req := pki.Request{CommonName: "app", Client: true, Lifetime: time.Hour}
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	rec := record.NewFakeRecorder(10)

	created, kp, err := Issue(ctx, c, rec, owner, ca, req, nil, newSecret, "missing", now)
	if err != nil || kp.Cert.Subject.CommonName != "app" {
		t.Fatalf("create: %v, %+v", err, kp)
	}
	var got corev1.Secret
	if err := c.Get(ctx, client.ObjectKeyFromObject(created), &got); err != nil || string(got.Data["tls.crt"]) != string(kp.CertPEM) {
		t.Fatalf("created Secret: %v", err)
	}
	if e := <-rec.Events; !strings.Contains(e, "CertificateIssued") || !strings.Contains(e, "app-tls (missing)") || strings.Contains(e, "PRIVATE KEY") {
		t.Fatalf("Event %q", e)
	}

	got.Labels = map[string]string{"kept": "yes"}
	if err := c.Update(ctx, &got); err != nil {
		t.Fatal(err)
	}
	renewed, kp2, err := Issue(ctx, c, rec, owner, ca, req, got.DeepCopy(), newSecret, "expires soon", now)
	if err != nil || string(renewed.Data["tls.crt"]) != string(kp2.CertPEM) || string(kp2.CertPEM) == string(kp.CertPEM) {
		t.Fatalf("renew: %v", err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(created), &got); err != nil || got.Labels["kept"] != "yes" || string(got.Data["tls.crt"]) != string(kp2.CertPEM) {
		t.Fatalf("renewed Secret %+v: %v", got.ObjectMeta, err)
	}
	<-rec.Events

	// Created by someone else between the caller's read and the write.
	if _, _, err := Issue(ctx, c, rec, owner, ca, req, nil, newSecret, "missing", now); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create over an existing Secret: %v, want AlreadyExists", err)
	}
}
