package framework

import (
	"context"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/test/linearizability"
)

// StartLoad starts concurrent clients against the cluster's client Service.
func StartLoad(t *testing.T, c *etcdv1alpha1.EtcdCluster) *linearizability.Load {
	t.Helper()
	load, err := linearizability.Start(linearizability.Config{Endpoints: []string{ClientServiceURL(t, c)}, TLS: ClusterTLS(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	return load
}

// StartLoadAs is StartLoad with the clients authenticating as an etcd password user.
func StartLoadAs(t *testing.T, c *etcdv1alpha1.EtcdCluster, user, password string) *linearizability.Load {
	t.Helper()
	load, err := linearizability.Start(linearizability.Config{Endpoints: []string{ClientServiceURL(t, c)}, TLS: ClusterTLS(t, c),
		Username: user, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	return load
}

// RequireNoLostWrites stops the load and fails the test unless the history is linearizable, some writes were
// acknowledged, and none of them is missing.
func RequireNoLostWrites(t *testing.T, load *linearizability.Load, during string) {
	t.Helper()
	// Reading back every acknowledged write, waiting for another test's check (one runs at a time), checking.
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	res, err := load.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("load during %s: %s", during, res)
	if res.Lost != 0 || res.Linearizable != porcupine.Ok || res.Acked == 0 {
		t.Fatalf("client load: %s (lost keys %v)", res, res.LostKeys)
	}
}

// AFollower returns the name and ID of a member that is not the leader, so a test that breaks it does not also
// depend on an election.
func AFollower(t *testing.T, c *etcdv1alpha1.EtcdCluster) (name, id string) {
	t.Helper()
	for _, m := range c.Status.Members {
		if m.Name != c.Status.Leader {
			return m.Name, m.ID
		}
	}
	t.Fatalf("no follower in %+v", c.Status.Members)
	return "", ""
}
