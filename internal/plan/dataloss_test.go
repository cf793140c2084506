package plan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The files in testdata/etcd-3.6.16 are the last 2048 bytes of etcd's log (what the kubelet keeps as a crashed
// container's termination message) from etcd 3.6.16 processes run on a damaged data dir, and from healthy ones.
func TestDataLossEvidence(t *testing.T) {
	tests := map[string]struct {
		log  string
		lost bool
	}{
		"emptied data dir of a bootstrap member": {log: readLog(t, "emptied-bootstrap-member.log"), lost: true},
		"emptied data dir of a joined member":    {log: readLog(t, "emptied-joined-member.log"), lost: true},
		"corrupt backend database":               {log: readLog(t, "corrupt-db.log"), lost: true},
		"backend database deleted":               {log: readLog(t, "db-missing.log"), lost: true},
		"corrupt write-ahead log":                {log: readLog(t, "corrupt-wal.log"), lost: true},
		"raft panic cut down to its stack": {log: "goroutine 129 [running]:\ngo.etcd.io/raft/v3.(*raftLog).commitTo(0x106061e51040, 0x263)\n" +
			"\tgo.etcd.io/raft/v3@v3.6.0/log.go:324 +0xef", lost: true},
		"clean stop":                 {log: readLog(t, "clean-stop.log")},
		"running member":             {log: readLog(t, "running.log")},
		"running with a peer down":   {log: readLog(t, "running-peer-down.log")},
		"corrupt snap file repaired": {log: `{"level":"warn","msg":"failed to read a snap file","error":"snap: crc mismatch"}`},
		"database busy or forbidden": {log: `{"level":"panic","msg":"failed to open database","error":"open /var/lib/etcd/data/member/snap/db: permission denied"}`},
		"empty message":              {log: ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := DataLossEvidence(tt.log)
			if (got != "") != tt.lost {
				t.Fatalf("DataLossEvidence = %q, want lost=%v", got, tt.lost)
			}
		})
	}
}

func readLog(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "etcd-3.6.16", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// FuzzDataLossEvidence: the classifier takes any input without panicking, finds a signature wherever it sits in
// the text (the kubelet's cut can fall anywhere before it), and never reports data loss for a log that carries
// none of the signatures.
func FuzzDataLossEvidence(f *testing.F) {
	for _, s := range []string{"", "panic: tocommit(611) is out of range [lastIndex(0)]. Was the raft log corrupted, truncated, or lost?",
		`{"level":"fatal","msg":"discovery failed","error":"member ca7a34e16cff9c1b has already been bootstrapped"}`,
		`{"level":"info","msg":"closed etcd server","name":"m2"}`, "\x00\xff invalid datab"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, before, after string) {
		plain := before + after
		hasSignature := false
		for _, s := range dataLossSignatures {
			hasSignature = hasSignature || strings.Contains(plain, s.match)
		}
		if got := DataLossEvidence(plain); (got != "") != hasSignature {
			t.Fatalf("DataLossEvidence(%q) = %q, signature present: %v", plain, got, hasSignature)
		}
		for _, s := range dataLossSignatures {
			if DataLossEvidence(before+s.match+after) == "" {
				t.Fatalf("signature %q missed between %q and %q", s.match, before, after)
			}
		}
	})
}
