package etcdbackup

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
)

// GetConfirmed reads obj from cached and, when cached does not have it, once more from live (the API server):
// for a read whose "not found" ends in a refusal, which is final. An object applied together with the one that
// names it (a claim with its backup, a backup with its restore) may reach the cache second. The restore
// controller reads its cluster, backup and schedule the same way.
func GetConfirmed(ctx context.Context, cached, live client.Reader, key client.ObjectKey, obj client.Object) error {
	err := cached.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		err = live.Get(ctx, key, obj)
	}
	return err
}

// EncryptionKeyProblem says why enc's key Secret cannot encrypt or decrypt backups (missing, without age.key,
// or not an age X25519 identity there), empty when it can or enc is nil. A Job started without a usable key
// would wait for the Secret's volume forever or fail late; this refuses early with the reason. The key is
// parsed and dropped: Steward keeps no copy. live is an uncached reader: the operator's cache holds only the
// Secrets Steward manages.
func EncryptionKeyProblem(ctx context.Context, live client.Reader, namespace string, enc *etcdv1alpha1.BackupEncryption) (string, error) {
	if enc == nil {
		return "", nil
	}
	name := enc.KeySecret.Name
	problem, secret, err := secretProblem(ctx, live, namespace, name, "encryption key", secretKeys{keys: []string{etcdv1alpha1.EncryptionKeySecretKey}})
	if problem != "" || err != nil {
		return problem, err
	}
	if _, err := backup.ParseKeys(string(secret.Data[etcdv1alpha1.EncryptionKeySecretKey])); err != nil {
		return fmt.Sprintf("encryption key Secret %s, key %s: %v (want the output of age-keygen: AGE-SECRET-KEY-1... lines)",
			name, etcdv1alpha1.EncryptionKeySecretKey, err), nil
	}
	return "", nil
}

// secretProblem reads Secret namespace/name of a user's (what it is for, in the message: "credentials",
// "encryption key") with one uncached get, and says why it cannot serve: missing, or without the keys it needs.
// The Secret is returned when there is no problem.
func secretProblem(ctx context.Context, live client.Reader, namespace, name, what string, need secretKeys) (string, *corev1.Secret, error) {
	secret := &corev1.Secret{}
	err := live.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret)
	if apierrors.IsNotFound(err) {
		return fmt.Sprintf("%s Secret %s does not exist", what, name), nil, nil
	}
	if err != nil {
		return "", nil, fmt.Errorf("get %s Secret %s: %w", what, name, err)
	}
	if m := need.missing(secret.Data); m != "" {
		return fmt.Sprintf("%s Secret %s %s", what, name, m), nil, nil
	}
	return "", secret, nil
}
