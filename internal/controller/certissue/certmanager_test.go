package certissue

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"steward.dev/steward/internal/resources"
)

// TestCertManagerObjects: a missing Certificate is found as nil and created; one the owner controls is found and
// its spec brought back to what Steward wants (not when writing is held back, as for a paused cluster); one the
// owner does not control is never taken over.
func TestCertManagerObjects(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(resources.CertificateGVK, meta.RESTScopeNamespace)
	c := fake.NewClientBuilder().WithScheme(scheme).WithRESTMapper(mapper).Build()
	owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "owner", UID: "owner-uid"}}
	certificate := func(name, duration string, ownedBy *corev1.ConfigMap) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(resources.CertificateGVK)
		u.SetNamespace("ns")
		u.SetName(name)
		u.Object["spec"] = map[string]any{"secretName": name, "duration": duration}
		if ownedBy != nil {
			u.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(ownedBy, corev1.SchemeGroupVersion.WithKind("ConfigMap"))})
		}
		return u
	}

	want := certificate("app-tls", "24h0m0s", owner)
	if have, err := FindCertManager(ctx, c, owner, want); have != nil || err != nil {
		t.Fatalf("missing Certificate found as %v, %v; want nil, nil", have, err)
	}
	if err := CreateCertManager(ctx, c, want.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	have, err := FindCertManager(ctx, c, owner, want)
	if err != nil || have == nil {
		t.Fatalf("own Certificate: %v, %v", have, err)
	}
	if wrote, err := UpdateCertManager(ctx, c, have, want, true); wrote || err != nil {
		t.Fatalf("unchanged Certificate written: %v, %v", wrote, err)
	}

	longer := certificate("app-tls", "48h0m0s", owner)
	have, _ = FindCertManager(ctx, c, owner, longer)
	if wrote, err := UpdateCertManager(ctx, c, have, longer, false); wrote || err != nil {
		t.Fatalf("held-back update wrote: %v, %v", wrote, err)
	}
	have, _ = FindCertManager(ctx, c, owner, longer) // the next pass reads it again
	if d, _, _ := unstructured.NestedString(have.Object, "spec", "duration"); d != "24h0m0s" {
		t.Fatalf("duration %q after a held-back update, want 24h0m0s", d)
	}
	if wrote, err := UpdateCertManager(ctx, c, have, longer, true); !wrote || err != nil {
		t.Fatalf("changed Certificate not written: %v, %v", wrote, err)
	}
	have, _ = FindCertManager(ctx, c, owner, longer)
	if d, _, _ := unstructured.NestedString(have.Object, "spec", "duration"); d != "48h0m0s" {
		t.Fatalf("duration %q after the update, want 48h0m0s", d)
	}

	other := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", UID: "other-uid"}}
	if err := CreateCertManager(ctx, c, certificate("theirs", "24h0m0s", other)); err != nil {
		t.Fatal(err)
	}
	if _, err := FindCertManager(ctx, c, owner, certificate("theirs", "24h0m0s", owner)); !errors.Is(err, ErrNotOwned) {
		t.Fatalf("another owner's Certificate: %v, want ErrNotOwned", err)
	}
}

// TestIssuedByCertManager: cert-manager's annotation naming the Secret itself marks a Secret it wrote for
// Steward's Certificate of that name.
func TestIssuedByCertManager(t *testing.T) {
	secret := func(annotation string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-a-tls"}}
		if annotation != "" {
			s.Annotations = map[string]string{CertificateNameAnnotation: annotation}
		}
		return s
	}
	if !IssuedByCertManager(secret("db-a-tls")) || IssuedByCertManager(secret("")) || IssuedByCertManager(secret("other")) {
		t.Fatal("IssuedByCertManager: want true only for the annotation naming the Secret")
	}
}
