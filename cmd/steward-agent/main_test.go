package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/backup"
)

// asMain makes the test binary run the agent's main instead of the tests, so that tests see exactly what the
// agent writes to stdout, stderr and its termination message, and how it exits.
const asMain = "STEWARD_AGENT_TEST_AS_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(asMain) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestCredentialsNeverReachOutput: whatever goes wrong (no member answers, the S3 server refuses and echoes
// every request header back in its error, the endpoint is unusable), the secret access key given in the
// environment appears neither on stdout, nor on stderr, nor in the termination message the controller copies
// into status and events.
func TestCredentialsNeverReachOutput(t *testing.T) {
	const secret = "wJalrXUtnFEMI-K7MDENG-bPxRfiCYEXAMPLEKEY" //nolint:gosec // a made-up key: the value the test looks for
	// A hostile or broken S3 server: refuses everything and puts the whole request in its error message.
	s3 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var headers bytes.Buffer
		_ = r.Header.Write(&headers)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		//nolint:gosec // a fake S3 server answering the agent under test, not a page a browser renders
		_, _ = fmt.Fprintf(w, "<Error><Code>AccessDenied</Code><Message>denied %s %s</Message></Error>", r.URL, headers.String())
	}))
	defer s3.Close()
	endpoint := strings.TrimPrefix(s3.URL, "http://")
	s3Args := []string{"--s3-endpoint=" + endpoint, "--s3-bucket=backups", "--path=etcd/x.db", "--s3-insecure", "--s3-path-style"}

	tests := map[string]struct {
		args   []string
		reason string
	}{
		"delete refused by the server": {append([]string{"delete"}, s3Args...), etcdv1alpha1.ReasonUploadFailed},
		"no member answers":            {append([]string{"snapshot", "--member=m1=http://127.0.0.1:1", "--timeout=5s"}, s3Args...), etcdv1alpha1.ReasonSnapshotFailed},
		"unusable endpoint": {[]string{"delete", "--s3-endpoint=not a host", "--s3-bucket=backups", "--path=x.db"},
			etcdv1alpha1.ReasonUploadFailed},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			result := filepath.Join(t.TempDir(), "termination-log")
			cmd := exec.Command(os.Args[0], append(tt.args, "--result-file="+result)...) //nolint:gosec // re-runs this test binary as the agent
			cmd.Env = append(os.Environ(), asMain+"=1", "STEWARD_S3_ACCESS_KEY_ID=AKIAEXAMPLE", "STEWARD_S3_SECRET_ACCESS_KEY="+secret)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("agent exit: %v (stderr %s)", err, stderr.String())
			}
			msg, err := os.ReadFile(result)
			if err != nil {
				t.Fatal(err)
			}
			r, err := backup.ParseResult(string(msg))
			if err != nil || r.Succeeded || r.Reason != tt.reason {
				t.Fatalf("result %+v (%v), want failure %s", r, err, tt.reason)
			}
			for what, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String(), "termination message": string(msg)} {
				if strings.Contains(out, secret) {
					t.Errorf("the secret access key is in the agent's %s: %s", what, out)
				}
			}
			t.Logf("result: %s", msg)
		})
	}
}

// TestKeyFlagsStayApart: the member TLS key (--key-file) and the backup encryption key (--encryption-key-file)
// are different flags filling different fields; a TLS key given to the codec would fail every backup of a TLS
// cluster, and an age key given to TLS every connection.
func TestKeyFlagsStayApart(t *testing.T) {
	var f jobFlags
	fs := flag.NewFlagSet("snapshot", flag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse([]string{"--key-file=/tls/tls.key", "--encryption-key-file=/enc/age.key", "--decryption-key-file=/a", "--decryption-key-file=/b", "--compression=None"}); err != nil {
		t.Fatal(err)
	}
	if f.keyFile != "/tls/tls.key" || f.encryptionKeyFile != "/enc/age.key" || strings.Join(f.readKeyFiles, ",") != "/a,/b" || f.compression != "None" {
		t.Fatalf("flags: key %q, encryption key %q, decryption keys %v, compression %q", f.keyFile, f.encryptionKeyFile, f.readKeyFiles, f.compression)
	}
}
