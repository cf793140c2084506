package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
)

// runAgent runs the agent's main with args and env, and returns its result (none for a usage error), its exit code
// and what it printed.
func runAgent(t *testing.T, env []string, args ...string) (backup.Result, int, string) {
	t.Helper()
	result := filepath.Join(t.TempDir(), "termination-log")
	cmd := exec.Command(os.Args[0], append(args, "--result-file="+result)...) //nolint:gosec // re-runs this test binary as the agent
	cmd.Env = append(append(os.Environ(), asMain+"=1"), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	code := 0
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatal(err)
		}
		code = exit.ExitCode()
	}
	msg, err := os.ReadFile(result)
	if err != nil { // a usage error: no result
		return backup.Result{}, code, out.String()
	}
	// Not ParseResult: a delete's success carries no snapshot record.
	var r backup.Result
	if err := json.Unmarshal(msg, &r); err != nil {
		t.Fatalf("result %q: %v", msg, err)
	}
	return r, code, out.String() + string(msg)
}

// TestGCSDestination: the agent's GCS flags reach the bucket (an emulator over plain HTTP, without credentials):
// delete removes the object and reports its gs:// location; a service account key in the environment appears in
// no output, whether the endpoint refuses it (plain HTTP) or it cannot be used; exactly one destination is taken.
func TestGCSDestination(t *testing.T) {
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1", Port: 0,
		InitialObjects: []fakestorage.Object{{ObjectAttrs: fakestorage.ObjectAttrs{BucketName: "bkt", Name: "etcd/x.db"}, Content: []byte("snapshot")}}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()

	r, code, out := runAgent(t, nil, "delete", "--gcs-bucket=bkt", "--gcs-endpoint="+srv.URL(), "--path=etcd/x.db")
	if code != 0 || !r.Succeeded || r.Location != "gs://bkt/etcd/x.db" {
		t.Fatalf("delete: exit %d, %+v: %s", code, r, out)
	}
	if _, err := srv.GetObject("bkt", "etcd/x.db"); err == nil {
		t.Fatal("the object is still there")
	}

	const secret = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCnotAkey\n-----END PRIVATE KEY-----\n" //nolint:gosec // a made-up key
	key := `{"type":"service_account","project_id":"p","private_key_id":"k1","private_key":` + jsonString(secret) +
		`,"client_email":"etcd@p.iam.gserviceaccount.com","token_uri":"https://127.0.0.1:1/token"}`
	for name, endpoint := range map[string]string{"plain HTTP": srv.URL(), "unusable key": "https://127.0.0.1:1"} {
		t.Run(name, func(t *testing.T) {
			r, code, out := runAgent(t, []string{"STEWARD_GCS_CREDENTIALS=" + key}, "delete", "--gcs-bucket=bkt", "--gcs-endpoint="+endpoint, "--path=etcd/y.db", "--timeout=10s")
			if code != 1 || r.Succeeded || r.Reason != etcdv1alpha1.ReasonUploadFailed {
				t.Fatalf("exit %d, %+v, want a failure %s", code, r, etcdv1alpha1.ReasonUploadFailed)
			}
			if strings.Contains(out, "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCnotAkey") {
				t.Fatalf("the private key is in the agent's output: %s", out)
			}
			t.Logf("result: %s", r.Message)
		})
	}

	_, code, out = runAgent(t, nil, "delete", "--gcs-bucket=bkt", "--s3-endpoint=s3:9000", "--path=x")
	if code != 2 || !strings.Contains(out, "exactly one of --pvc-root, --s3-endpoint, --gcs-bucket or --azure-container") {
		t.Fatalf("two destinations: exit %d: %s", code, out)
	}
}

func jsonString(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, "\\", "\\\\"), "\n", "\\n") + `"`
}
