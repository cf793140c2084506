package certissue

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"steward.dev/steward/internal/resources"
)

// CertificateNameAnnotation is the annotation cert-manager puts on a Secret it issued into: the Certificate's
// name.
const CertificateNameAnnotation = "cert-manager.io/certificate-name"

// IssuedByCertManager reports whether cert-manager wrote the Secret for a Certificate of the Secret's own name
// (the only kind of Certificate Steward makes). cert-manager sets no owner on the Secrets it writes by default,
// so the annotation is what tells them apart.
func IssuedByCertManager(s *corev1.Secret) bool {
	return s.Annotations[CertificateNameAnnotation] == s.Name
}

// ErrNotOwned is FindCertManager's answer for an object of that name that the owner does not control: Steward
// never takes one over.
var ErrNotOwned = errors.New("not owned")

// FindCertManager reads the cert-manager object (a Certificate, or an Issuer) of want's kind and name: nil when
// there is none, ErrNotOwned when owner does not control it.
func FindCertManager(ctx context.Context, c client.Reader, owner metav1.Object, want *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	have := &unstructured.Unstructured{}
	have.SetGroupVersionKind(want.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(want), have)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("get %s %s: %w", want.GetKind(), want.GetName(), err)
	case !metav1.IsControlledBy(have, owner):
		return nil, ErrNotOwned
	}
	return have, nil
}

// CreateCertManager creates the cert-manager object want.
func CreateCertManager(ctx context.Context, c client.Client, want *unstructured.Unstructured) error {
	if err := c.Create(ctx, want); err != nil {
		return fmt.Errorf("create %s %s: %w", want.GetKind(), want.GetName(), err)
	}
	return nil
}

// UpdateCertManager brings the fields Steward sets in have (found by FindCertManager) back to want (a changed
// certificateLifetime, say), when write allows it (a paused cluster changes nothing), and reports whether it
// wrote. The Update carries the resourceVersion read: a concurrent change is a conflict, retried next pass.
func UpdateCertManager(ctx context.Context, c client.Client, have, want *unstructured.Unstructured, write bool) (bool, error) {
	changed, err := resources.MergeCertificateSpec(have, want)
	if err != nil {
		return false, fmt.Errorf("update %s %s: %w", want.GetKind(), want.GetName(), err)
	}
	if !changed || !write {
		return false, nil
	}
	if err := c.Update(ctx, have); err != nil {
		return false, fmt.Errorf("update %s %s: %w", want.GetKind(), want.GetName(), err)
	}
	return true, nil
}
