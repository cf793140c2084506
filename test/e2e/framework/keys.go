package framework

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
)

// ReadKeys reads every key under prefix through the cluster's client Service.
func ReadKeys(t *testing.T, c *etcdv1alpha1.EtcdCluster, prefix string) (map[string]string, int64) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ClientServiceURL(t, c)}, DialTimeout: 5 * time.Second, TLS: ClusterTLS(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	var resp *clientv3.GetResponse
	Poll(t, "read "+prefix+" from "+c.Name, time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		resp, err = cli.Get(ctx, prefix, clientv3.WithPrefix())
		return err
	})
	out := map[string]string{}
	for _, kv := range resp.Kvs {
		out[string(kv.Key)] = string(kv.Value)
	}
	return out, resp.Header.Revision
}

// RequireSameKeys fails t unless got holds exactly the keys and values of want.
func RequireSameKeys(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d keys, want %d", what, len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: key %s differs (%d bytes, want %d)", what, k, len(got[k]), len(v))
		}
	}
}

// RequireUnchanged fails t, naming what, unless after (a fingerprint of a cluster's objects, such as
// PodAndVolumeUIDs) equals before.
func RequireUnchanged(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("%s changed the cluster's objects:\nbefore %v\nafter  %v", what, before, after)
	}
}

// PutAll writes keys through the client Service, retrying each until it is acknowledged.
func PutAll(t *testing.T, c *etcdv1alpha1.EtcdCluster, keys map[string]string) {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ClientServiceURL(t, c)}, DialTimeout: 5 * time.Second, TLS: ClusterTLS(t, c)})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cli.Close() }()
	for k, v := range keys {
		Poll(t, "write "+k, 30*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := cli.Put(ctx, k, v)
			return err
		})
	}
}

// WriteBackupKeys writes known keys through the client Service and returns them.
func WriteBackupKeys(t *testing.T, c *etcdv1alpha1.EtcdCluster) map[string]string {
	t.Helper()
	keys := map[string]string{}
	for i := 0; i < BackupKeyCount; i++ {
		keys[fmt.Sprintf("%s%04d", BackupKeyPrefix, i)] = fmt.Sprintf("value-%d-%s", i, strings.Repeat("x", i))
	}
	big := strings.Repeat("0123456789abcdef", 1<<16) // 1 MiB
	for i := 0; i < BigKeyCount; i++ {
		keys[fmt.Sprintf("%sbig/%02d", BackupKeyPrefix, i)] = fmt.Sprintf("%02d", i) + big[2:]
	}
	PutAll(t, c, keys)
	return keys
}

// The known keys of WriteBackupKeys, which a test reads back after a backup, restore or replacement.
const (
	// BackupKeyPrefix is the prefix of every key WriteBackupKeys writes.
	BackupKeyPrefix = "backup/"
	// BackupKeyCount is how many small keys WriteBackupKeys writes.
	BackupKeyCount = 200
	// BigKeyCount values of 1 MiB make the snapshot larger than one 16 MiB part of the agent's S3 multipart upload.
	BigKeyCount = 20
)
