package etcdbackup

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
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
