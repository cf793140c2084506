package etcd

import (
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Callers that ask for one cluster's client at the same time (its reconcile and the EtcdUser controller's) get
// the same pooled client, and each cluster has one: the dial happens outside the pool's lock, so two may race to
// create it. Nothing listens at the endpoint: a client without a password is created without a connection.
func TestPoolHandsOutOneClientPerCluster(t *testing.T) {
	p := NewPool()
	endpoints := map[string][]string{"ns/a": {"http://127.0.0.1:1"}, "ns/b": {"http://127.0.0.1:2", "http://127.0.0.1:3"}}
	var mu sync.Mutex
	got := map[string]map[*clientv3.Client]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		for key, eps := range endpoints {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := p.client(key, eps)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if got[key] == nil {
					got[key] = map[*clientv3.Client]bool{}
				}
				got[key][c] = true
			}()
		}
	}
	wg.Wait()
	for key := range endpoints {
		if len(got[key]) != 1 {
			t.Errorf("%s: %d different clients handed out, want 1", key, len(got[key]))
		}
		for c := range got[key] {
			if p.clients[key] != c {
				t.Errorf("%s: the client handed out is not the pooled one", key)
			}
		}
	}
	if len(p.clients) != len(endpoints) {
		t.Errorf("%d pooled clients, want %d", len(p.clients), len(endpoints))
	}
	for key := range endpoints {
		p.Forget(key)
	}
}
