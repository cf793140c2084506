package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"steward.dev/steward/internal/plan"
)

func TestRefuseEmptyDataDir(t *testing.T) {
	tests := map[string]struct {
		holds, marked, hasRun bool
		refuse                bool
	}{
		"a first start: empty, never run":                    {false, false, false, false},
		"a restart on the member's data":                     {true, true, false, false},
		"a re-created Pod on the member's data":              {true, false, true, false},
		"emptied while this Pod ran":                         {false, true, false, true},
		"emptied before the Pod was re-created on it":        {false, false, true, true},
		"emptied, both marks":                                {false, true, true, true},
		"a restored data dir, first start of a restored Pod": {true, false, false, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := refuseEmptyDataDir(tt.holds, tt.marked, tt.hasRun); (got != "") != tt.refuse {
				t.Errorf("refuseEmptyDataDir = %q, want refusal %v", got, tt.refuse)
			}
		})
	}
}

// TestRunEtcd runs the guard around shell commands standing in for etcd: it marks a data dir that holds the
// member, passes the exit status on (also of a signal), does not start the command on an emptied data dir, and
// reports why in the termination message, which the controller reads as lost data (plan.DataLossEvidence).
func TestRunEtcd(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	dataDir, mark, ran, report := filepath.Join(dir, "data"), filepath.Join(dir, "mark"), filepath.Join(dir, "ran"), filepath.Join(dir, "report")
	if err := os.MkdirAll(filepath.Join(dataDir, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	guard := func(extra ...string) []string {
		_ = os.Remove(report)
		return append([]string{"--guard-data-dir=" + dataDir, "--guard-mark=" + mark, "--exit-report=" + report}, extra...)
	}
	evidence := func() string {
		b, _ := os.ReadFile(report)
		return plan.DataLossEvidence(string(b))
	}
	if code := runEtcd(append(guard(), "--", sh, "-c", "exit 3")); code != 3 {
		t.Errorf("exit status %d, want etcd's 3", code)
	}
	if e := evidence(); e != "" {
		t.Errorf("etcd's exit 3 reads as data loss: %s", e)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("no mark after a start on a data dir that holds the member: %v", err)
	}
	// etcd's own account of lost data, read off its stderr; a planted key there is none.
	if code := runEtcd(append(guard(), "--", sh, "-c", `printf '%s\n' "$0" >&2; exit 1`, alreadyBootstrapped)); code != 1 || evidence() == "" {
		t.Errorf("exit status %d, evidence %q; want 1 and etcd's end read as data loss", code, evidence())
	}
	if code := runEtcd(append(guard(), "--", sh, "-c", `printf '%s\n' "$0" >&2; exit 1`, plantedWarning)); code != 1 || evidence() != "" {
		t.Errorf("exit status %d, evidence %q; want 1 and no data loss for a planted key", code, evidence())
	}
	if code := runEtcd(append(guard(), "--", sh, "-c", "kill -TERM $$")); code != 128+15 {
		t.Errorf("exit status %d, want 143 for SIGTERM", code)
	}
	if code := runEtcd(append(guard(), "--", sh, "-c", "exit 0")); code != 0 || fileExists(report) {
		t.Errorf("exit status %d, report written %v for a clean exit, want 0 and none", code, fileExists(report))
	}
	if err := os.RemoveAll(filepath.Join(dataDir, "member")); err != nil {
		t.Fatal(err)
	}
	if code := runEtcd(append(guard(), "--", sh, "-c", "touch "+ran)); code != 1 {
		t.Errorf("exit status %d on an emptied data dir, want 1", code)
	}
	if _, err := os.Stat(ran); err == nil {
		t.Errorf("etcd was started on an emptied data dir")
	}
	if e := evidence(); e == "" {
		t.Errorf("the refusal of an emptied data dir does not read as data loss")
	}
	if err := os.Remove(mark); err != nil {
		t.Fatal(err)
	}
	if code := runEtcd(append(guard("--guard-has-run"), "--", sh, "-c", "touch "+ran)); code != 1 {
		t.Errorf("exit status %d on an empty data dir of a member that has run, want 1", code)
	}
	if e := evidence(); e == "" {
		t.Errorf("the refusal of an empty data dir of a member that has run does not read as data loss")
	}
	if code := runEtcd(append(guard(), "--", sh, "-c", "touch "+ran)); code != 0 {
		t.Errorf("exit status %d on a first start, want 0", code)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Errorf("etcd was not started on a first start: %v", err)
	}
}

// The lines etcd 3.6.16 wrote on ending on an emptied data dir of a bootstrap member, and a slow request's warning
// for a key a client planted (plan's testdata and tests).
const (
	alreadyBootstrapped = `{"level":"fatal","ts":"2026-11-23T02:08:03.818064Z","caller":"etcdmain/etcd.go:183","msg":"discovery failed",` +
		`"error":"member ca7a34e16cff9c1b has already been bootstrapped","stacktrace":"go.etcd.io/etcd/server/v3/etcdmain.startEtcdOrProxyV2\n\tgo.etcd.io/etcd/server/v3@v3.6.16/etcdmain/etcd.go:183"}`
	plantedWarning = `{"level":"warn","ts":"2026-11-28T03:00:00.123456Z","caller":"txn/util.go:93","msg":"apply request took too long",` +
		`"took":"143.602ms","expected-duration":"100ms","prefix":"","request":"header:<ID:7587883577934563074 > put:<key:\"/tenant-a/` +
		`member ca7a34e16cff9c1b has already been bootstrapped\" value_size:5 >","response":"size:6"}`
	closed = `{"level":"info","ts":"2026-11-23T02:08:03.816843Z","caller":"embed/etcd.go:428","msg":"closed etcd server","name":"m2"}`
)

// TestEtcdLog: etcd's stderr passes through unchanged, in whatever pieces it comes, and what ended etcd is
// reported: a data-loss reason only from the line etcd ended on, never from a key a client planted in a warning,
// and not when a signal ended etcd.
func TestEtcdLog(t *testing.T) {
	tests := map[string]struct {
		log    string
		code   int
		reason plan.ExitReason
		lost   bool
	}{
		"emptied bootstrap member":                    {log: closed + "\n" + alreadyBootstrapped + "\n", code: 1, reason: plan.ExitAlreadyBootstrapped, lost: true},
		"its last line without a newline":             {log: closed + "\n" + alreadyBootstrapped, code: 1, reason: plan.ExitAlreadyBootstrapped, lost: true},
		"a planted key, then a crash of another kind": {log: plantedWarning + "\n" + `{"level":"fatal","msg":"listener failed","error":"address in use"}` + "\n", code: 1, reason: plan.ExitEtcdFailed},
		"a planted key, then killed":                  {log: plantedWarning + "\n", code: 137, reason: plan.ExitEtcdFailed},
		"the fatal line, then killed by a signal":     {log: alreadyBootstrapped + "\n", code: 137, reason: plan.ExitEtcdFailed},
		"an over-long line is passed on, not read":    {log: strings.Repeat("x", maxClassifiedLine) + alreadyBootstrapped + "\n", code: 1, reason: plan.ExitEtcdFailed},
		"and the line after it is read":               {log: strings.Repeat("x", maxClassifiedLine+1) + "\n" + alreadyBootstrapped + "\n", code: 1, reason: plan.ExitAlreadyBootstrapped, lost: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			for _, piece := range []int{1, 7, 4096, len(tt.log)} {
				var out bytes.Buffer
				l := &etcdLog{w: &out}
				for rest := tt.log; rest != ""; {
					n := min(piece, len(rest))
					if w, err := l.Write([]byte(rest[:n])); w != n || err != nil {
						t.Fatalf("Write = %d, %v", w, err)
					}
					rest = rest[n:]
				}
				if out.String() != tt.log {
					t.Fatalf("passed on %d bytes of %d, changed", out.Len(), len(tt.log))
				}
				r, ok := l.report(tt.code)
				if !ok || r.Reason != tt.reason || r.ExitCode != tt.code {
					t.Fatalf("in pieces of %d: report %+v, %v; want reason %s", piece, r, ok, tt.reason)
				}
				if lost := plan.DataLossEvidence(string(plan.EncodeExitReport(r))) != ""; lost != tt.lost {
					t.Fatalf("in pieces of %d: report %+v reads as data loss %v", piece, r, lost)
				}
			}
		})
	}
	if _, ok := (&etcdLog{w: io.Discard}).report(0); ok {
		t.Errorf("a report for a clean exit")
	}
}
