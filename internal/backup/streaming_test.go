package backup

import (
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"runtime"
	"sync"
	"testing"
	"time"
)

// generatedSnapshot yields a fake etcd snapshot of size bytes of "database" (pages of keys, each page
// different) and etcd's sha256 of them, without ever holding more than a page: what a large database looks like
// to the agent, at no memory cost to the test.
type generatedSnapshot struct {
	size, n int64
	page    []byte
	off     int
	sum     hash.Hash
	trailer []byte
}

func newGeneratedSnapshot(size int64) *generatedSnapshot {
	return &generatedSnapshot{size: size - size%4096, sum: sha256.New()}
}

func (g *generatedSnapshot) Read(p []byte) (int, error) {
	if g.trailer == nil && g.n >= g.size {
		g.trailer = g.sum.Sum(nil)
	}
	if g.trailer != nil {
		if len(g.trailer) == 0 {
			return 0, io.EOF
		}
		k := copy(p, g.trailer)
		g.trailer = g.trailer[k:]
		return k, nil
	}
	if g.off == len(g.page) {
		g.page = g.page[:0]
		for len(g.page) < 4096 {
			g.page = fmt.Appendf(g.page, "/registry/pods/ns-%d/web-%d\x00", g.n/4096, len(g.page))
		}
		g.page, g.off = g.page[:4096], 0
		g.sum.Write(g.page)
	}
	k := copy(p, g.page[g.off:])
	g.off += k
	g.n += int64(k)
	return k, nil
}

// peakHeap runs f and returns the most heap it had in use beyond what was in use before, sampled every
// millisecond: the agent's memory, minus the runtime's own.
func peakHeap(f func()) uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base, peak := ms.HeapAlloc, ms.HeapAlloc
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			var s runtime.MemStats
			runtime.ReadMemStats(&s)
			peak = max(peak, s.HeapAlloc)
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	f()
	close(stop)
	wg.Wait()
	if peak < base {
		return 0
	}
	return peak - base
}

// TestStreamingMemoryIsConstant: a backup (etcd's snapshot checked on the way, compressed, encrypted, written
// to a volume) and a restore's read of it (decrypted, decompressed, both checksums checked) hold the same
// memory whatever the snapshot's size: the agent's Jobs stream, so a database of many GiB needs no more memory
// than one of a few MiB (resources.AgentRequests, no limit). Sizes of 16 MiB and 256 MiB (1 GiB without -short).
func TestStreamingMemoryIsConstant(t *testing.T) {
	keyText, _ := newKey(t)
	codec := mustKeys(t, keyText)
	run := func(size int64) uint64 {
		root := t.TempDir()
		store := FileStore{Root: root, Path: "snap.db", Claim: "c"}
		var st Stored
		var checked Checked
		var err error
		peak := peakHeap(func() {
			v := NewVerifier(newGeneratedSnapshot(size))
			if st, err = PutEncoded(context.Background(), store, codec, v); err != nil || !v.Verified() {
				err = fmt.Errorf("PutEncoded: %w (verified %v)", err, v.Verified())
				return
			}
			checked, err = CopyVerified(context.Background(), store, Expected{SizeBytes: st.SizeBytes, SHA256: st.SHA256,
				SnapshotSizeBytes: size + sha256.Size}, codec, io.Discard)
		})
		if err != nil {
			t.Fatalf("%d MiB: %v", size>>20, err)
		}
		if checked.SnapshotSizeBytes != size+sha256.Size {
			t.Fatalf("%d MiB: read back %d bytes", size>>20, checked.SnapshotSizeBytes)
		}
		t.Logf("snapshot of %d MiB (stored %d MiB): peak heap %.1f MiB beyond the test's", size>>20, st.SizeBytes>>20, float64(peak)/(1<<20))
		return peak
	}
	large := int64(1 << 30)
	if testing.Short() {
		large = 256 << 20
	}
	small := run(16 << 20)
	big := run(large)
	// The codec's buffers (zstd's window, age's chunks) and io.Copy's are allocated once per stream; what a
	// larger snapshot may add is noise of the collector's timing, not a share of its size.
	const slack = 16 << 20
	if big > small+slack {
		t.Errorf("peak heap %.1f MiB for %d MiB, %.1f MiB for 16 MiB: memory grows with the snapshot", float64(big)/(1<<20), large>>20, float64(small)/(1<<20))
	}
	if big > 64<<20 {
		t.Errorf("peak heap %.1f MiB for %d MiB, more than the agent's 64Mi request", float64(big)/(1<<20), large>>20)
	}
}
