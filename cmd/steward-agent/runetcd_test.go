package main

import (
	"os"
	"os/exec"
	"path/filepath"
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

// TestRefusalIsReadAsDataLoss: the controller must read run-etcd's refusal, from the container's termination
// message, as lost data (and replace the member), not as a crash a restart fixes.
func TestRefusalIsReadAsDataLoss(t *testing.T) {
	msg := RefusedEmptyDataDir + " (an earlier start in this Pod found it holding the member): refusing to start etcd"
	if plan.DataLossEvidence(msg) == "" {
		t.Fatalf("plan.DataLossEvidence does not recognize %q", msg)
	}
}

// TestRunEtcd runs the guard around shell commands standing in for etcd: it marks a data dir that holds the
// member, passes the exit status on (also of a signal), and does not start the command on an emptied data dir.
func TestRunEtcd(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	dataDir, mark, ran := filepath.Join(dir, "data"), filepath.Join(dir, "mark"), filepath.Join(dir, "ran")
	if err := os.MkdirAll(filepath.Join(dataDir, "member"), 0o700); err != nil {
		t.Fatal(err)
	}
	guard := func(extra ...string) []string {
		return append([]string{"--guard-data-dir=" + dataDir, "--guard-mark=" + mark}, extra...)
	}
	if code := runEtcd(append(guard(), "--", sh, "-c", "exit 3")); code != 3 {
		t.Errorf("exit status %d, want etcd's 3", code)
	}
	if _, err := os.Stat(mark); err != nil {
		t.Errorf("no mark after a start on a data dir that holds the member: %v", err)
	}
	if code := runEtcd(append(guard(), "--", sh, "-c", "kill -TERM $$")); code != 128+15 {
		t.Errorf("exit status %d, want 143 for SIGTERM", code)
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
	if err := os.Remove(mark); err != nil {
		t.Fatal(err)
	}
	if code := runEtcd(append(guard("--guard-has-run"), "--", sh, "-c", "touch "+ran)); code != 1 {
		t.Errorf("exit status %d on an empty data dir of a member that has run, want 1", code)
	}
	if code := runEtcd(append(guard(), "--", sh, "-c", "touch "+ran)); code != 0 {
		t.Errorf("exit status %d on a first start, want 0", code)
	}
	if _, err := os.Stat(ran); err != nil {
		t.Errorf("etcd was not started on a first start: %v", err)
	}
}
