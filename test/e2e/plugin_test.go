package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	etcdv1alpha1 "steward.dev/steward/api/v1alpha1"
	"steward.dev/steward/internal/testbed"
	"steward.dev/steward/test/e2e/framework"
)

// plugin runs kubectl-steward against the test bed in namespace ns; it returns the output and the exit code.
func plugin(t *testing.T, ns string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, framework.PluginBinary(t), append([]string{"--kubeconfig", framework.Bed.Kubeconfig, "-n", ns}, args...)...)
	out, err := cmd.CombinedOutput()
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatalf("kubectl-steward %s: %v", strings.Join(args, " "), err)
	}
	return string(out), code
}

func mustPlugin(t *testing.T, ns string, args ...string) string {
	t.Helper()
	out, code := plugin(t, ns, args...)
	if code != 0 {
		t.Fatalf("kubectl-steward %s: exit %d\n%s", strings.Join(args, " "), code, out)
	}
	return out
}

// TestKubectlPlugin runs every command of kubectl-steward against a 3-member TLS cluster: status (table and
// JSON, and a missing cluster), etcdctl with Steward's client certificate, pause and resume, a backup to a PVC,
// and a restore of it into a new cluster that holds the key written through etcdctl.
func TestKubectlPlugin(t *testing.T) {
	parallel(t)
	ctx := context.Background()
	ns := framework.NewNamespace(t, "plugin")
	framework.StartOperator(t, ns)
	key, c := framework.Settle(t, framework.NewCluster(ns, "plugged", 3))

	table := mustPlugin(t, ns, "status", c.Name)
	for _, m := range c.Status.Members {
		if !strings.Contains(table, m.Name) {
			t.Errorf("status does not list member %s:\n%s", m.Name, table)
		}
	}
	if !strings.Contains(table, c.Status.Leader) || !strings.Contains(table, "Available") {
		t.Errorf("status names no leader %s or no Available condition:\n%s", c.Status.Leader, table)
	}
	t.Logf("kubectl steward status:\n%s", table)
	var asJSON map[string]any
	if err := json.Unmarshal([]byte(mustPlugin(t, ns, "status", c.Name, "-o", "json")), &asJSON); err != nil {
		t.Errorf("status -o json is not JSON: %v", err)
	}
	if out, code := plugin(t, ns, "status", "no-such-cluster"); code != 1 || !strings.Contains(out, `no EtcdCluster "no-such-cluster"`) {
		t.Errorf("status of a missing cluster: exit %d, %q; want 1, naming the cluster", code, out)
	}

	etcdctl := filepath.Join(framework.Bed.EtcdBinDir(testbed.EtcdVersions[0]), "etcdctl")
	mustPlugin(t, ns, "etcdctl", c.Name, "--etcdctl", etcdctl, "--", "put", "plugin/key", "through-the-plugin")
	if out := mustPlugin(t, ns, "etcdctl", c.Name, "--etcdctl", etcdctl, "--", "get", "plugin/key", "--print-value-only"); strings.TrimSpace(out) != "through-the-plugin" {
		t.Errorf("etcdctl get read %q", out)
	}
	if _, code := plugin(t, ns, "etcdctl", c.Name, "--etcdctl", etcdctl, "--", "no-such-command"); code == 0 {
		t.Errorf("a failing etcdctl command exited 0")
	}

	mustPlugin(t, ns, "pause", c.Name)
	if err := framework.K8s.Get(ctx, key, c); err != nil || !c.Spec.Paused {
		t.Fatalf("after pause: paused %v (%v)", c.Spec.Paused, err)
	}
	mustPlugin(t, ns, "resume", c.Name)
	if err := framework.K8s.Get(ctx, key, c); err != nil || c.Spec.Paused {
		t.Fatalf("after resume: paused %v (%v)", c.Spec.Paused, err)
	}

	framework.CreateBackupClaim(t, ns, "256Mi")
	out := mustPlugin(t, ns, "backup", c.Name, "--name", "by-plugin", "--pvc", "backups/plugged.db", "--timeout", "4m")
	t.Logf("kubectl steward backup:\n%s", out)
	var b etcdv1alpha1.EtcdBackup
	if err := framework.K8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "by-plugin"}, &b); err != nil {
		t.Fatal(err)
	}
	framework.RequireComplete(t, &b, c)

	out = mustPlugin(t, ns, "restore", c.Name, "--backup", "by-plugin", "--new-cluster", "copied", "--replicas", "1", "--timeout", "5m")
	t.Logf("kubectl steward restore:\n%s", out)
	copied := framework.WaitSettled(t, client.ObjectKey{Namespace: ns, Name: "copied"}, 4*time.Minute)
	if out := mustPlugin(t, ns, "etcdctl", copied.Name, "--etcdctl", etcdctl, "--", "get", "plugin/key", "--print-value-only"); strings.TrimSpace(out) != "through-the-plugin" {
		t.Errorf("the restored cluster holds %q under plugin/key", out)
	}
	if out, code := plugin(t, ns, "restore", c.Name, "--backup", "by-plugin", "--reseed"); code == 0 || !strings.Contains(out, "--confirm") {
		t.Errorf("a re-seed without --confirm: exit %d, %q", code, out)
	}
	framework.DeleteAndCheckNothingLeft(t, copied)
	framework.DeleteAndCheckNothingLeft(t, c)
}
