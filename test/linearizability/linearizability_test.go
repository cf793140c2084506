package linearizability

import (
	"math"
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
