package linearizability

import (
	"fmt"
	"math"
	"math/rand"
	"testing"

	"github.com/anishathalye/porcupine"
)

func op(client int, in input, out string, call, ret int64) porcupine.Operation {
	return porcupine.Operation{ClientId: client, Input: in, Output: output{value: out}, Call: call, Return: ret}
}

func TestModel(t *testing.T) {
	put := func(v string) input { return input{put: true, key: "k", value: v} }
	get := input{key: "k"}
	tests := map[string]struct {
		history []porcupine.Operation
		want    porcupine.CheckResult
	}{
		"read after acknowledged write sees it": {
			[]porcupine.Operation{op(0, put("a"), "", 0, 10), op(1, get, "a", 20, 30)}, porcupine.Ok},
		"read after acknowledged write misses it (lost write)": {
			[]porcupine.Operation{op(0, put("a"), "", 0, 10), op(1, get, "", 20, 30)}, porcupine.Illegal},
		"stale read after a newer write": {
			[]porcupine.Operation{op(0, put("a"), "", 0, 10), op(0, put("b"), "", 11, 20), op(1, get, "a", 30, 40)}, porcupine.Illegal},
		"concurrent read may see either": {
			[]porcupine.Operation{op(0, put("a"), "", 0, 10), op(0, put("b"), "", 11, 30), op(1, get, "a", 12, 25)}, porcupine.Ok},
		"write of unknown outcome may apply late": {
			[]porcupine.Operation{op(0, put("a"), "", 0, math.MaxInt64), op(1, get, "", 5, 6), op(1, get, "a", 50, 60)}, porcupine.Ok},
		"keys are independent": {
			[]porcupine.Operation{op(0, put("a"), "", 0, 10), op(1, input{key: "other"}, "", 20, 30)}, porcupine.Ok},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := porcupine.CheckOperationsTimeout(Model(), tt.history, 0); got != tt.want {
				t.Errorf("check = %s, want %s", got, tt.want)
			}
		})
	}
}

// TestWithoutUnobservedWrites: leaving out writes of unknown outcome that no read saw never changes porcupine's
// verdict. Random small histories over two keys, with acknowledged and pending writes, reads of every value
// and of none, are checked with and without them; the cases that prune something are counted, so the test
// cannot pass by pruning nothing.
func TestWithoutUnobservedWrites(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	pruned, illegal := 0, 0
	for i := 0; i < 3000; i++ {
		var history []porcupine.Operation
		var written []input
		for n := 0; n < 2+rng.Intn(7); n++ {
			call := int64(rng.Intn(100))
			ret := call + 1 + int64(rng.Intn(30))
			key := []string{"k", "j"}[rng.Intn(2)]
			switch rng.Intn(3) {
			case 0, 1:
				in := input{put: true, key: key, value: fmt.Sprintf("v%d", n)}
				if rng.Intn(2) == 0 {
					ret = math.MaxInt64
				}
				written = append(written, in)
				history = append(history, op(rng.Intn(3), in, "", call, ret))
			default:
				value := ""
				if len(written) > 0 && rng.Intn(4) > 0 {
					value = written[rng.Intn(len(written))].value
				}
				history = append(history, op(rng.Intn(3), input{key: key}, value, call, ret))
			}
		}
		kept, n := withoutUnobservedWrites(history)
		if n > 0 {
			pruned++
		}
		if len(kept)+n != len(history) {
			t.Fatalf("kept %d and left out %d of %d", len(kept), n, len(history))
		}
		want := porcupine.CheckOperations(Model(), history)
		if !want {
			illegal++
		}
		if got := porcupine.CheckOperations(Model(), kept); got != want {
			t.Fatalf("history %d: verdict %v with every write, %v without the %d unobserved ones:\n%v\n%v", i, want, got, n, history, kept)
		}
	}
	if pruned < 500 || illegal < 100 {
		t.Fatalf("only %d histories pruned something and %d were illegal: the test does not exercise the pruning", pruned, illegal)
	}
	t.Logf("3000 random histories, %d pruned, %d illegal, same verdict for all", pruned, illegal)
}

func TestWithoutUnobservedWritesKeepsAcknowledgedAndObserved(t *testing.T) {
	put := func(v string) input { return input{put: true, key: "k", value: v} }
	history := []porcupine.Operation{
		op(0, put("acked"), "", 0, 10),
		op(1, put("pending-read"), "", 5, math.MaxInt64),
		op(2, put("pending-unread"), "", 6, math.MaxInt64),
		op(3, input{key: "k"}, "pending-read", 20, 30),
	}
	kept, n := withoutUnobservedWrites(history)
	if n != 1 || len(kept) != 3 {
		t.Fatalf("left out %d, kept %v", n, kept)
	}
	for _, o := range kept {
		if o.Input.(input).value == "pending-unread" {
			t.Fatalf("kept the unread pending write: %v", kept)
		}
	}
}
