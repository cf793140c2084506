package framework

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// HostAPIServer is a kube-apiserver the test started on the test bed's host, storing in an etcd under test (a
// source being adopted, a standby being promoted): what a control plane outside Kubernetes does with the etcd
// Steward runs or takes over. It serves on a self-signed certificate and allows everything to the one token it
// knows, which only the test holds.
type HostAPIServer struct {
	// URL is where it serves (https://<node IP>:<port>).
	URL string
	// Config and Client reach it.
	Config *rest.Config
	Client kubernetes.Interface
	cmd    *exec.Cmd
	log    string
}

// StartKubeAPIServer starts a kube-apiserver of the test bed's release on the host with etcdServers as its
// --etcd-servers (plaintext client URLs), waits until it is ready, and stops it when t ends.
func StartKubeAPIServer(t *testing.T, etcdServers []string) *HostAPIServer {
	t.Helper()
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPath, pubPath := filepath.Join(dir, "sa.key"), filepath.Join(dir, "sa.pub")
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		t.Fatal(err)
	}
	// A static token: kube-apiserver turns anonymous requests off under the AlwaysAllow authorizer.
	token := rand.Text()
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+",test,test,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := FreeAddress(t)
	host, port, _ := strings.Cut(addr, ":")
	h := &HostAPIServer{URL: "https://" + addr, log: filepath.Join(dir, "kube-apiserver.log")}
	h.cmd = exec.Command(Bed.KubeAPIServerPath(),
		"--etcd-servers="+strings.Join(etcdServers, ","),
		"--bind-address="+host, "--advertise-address="+host, "--secure-port="+port, "--cert-dir="+dir,
		"--token-auth-file="+tokens, "--authorization-mode=AlwaysAllow",
		"--service-account-issuer=https://host-apiserver.test", "--service-account-key-file="+pubPath,
		"--service-account-signing-key-file="+keyPath, "--service-cluster-ip-range=10.99.0.0/24",
		"--enable-priority-and-fairness=false", "--profiling=false", "--v=1")
	logFile, err := os.Create(h.log)
	if err != nil {
		t.Fatal(err)
	}
	h.cmd.Stdout, h.cmd.Stderr = logFile, logFile
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("start kube-apiserver: %v", err)
	}
	_ = logFile.Close()
	t.Cleanup(func() {
		_ = h.cmd.Process.Kill()
		_ = h.cmd.Wait()
	})
	h.Config = &rest.Config{Host: h.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 200, Burst: 400, Timeout: 30 * time.Second}
	if h.Client, err = kubernetes.NewForConfig(h.Config); err != nil {
		t.Fatal(err)
	}
	Poll(t, "the host's kube-apiserver ready", 2*time.Minute, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := h.Client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
			return fmt.Errorf("%w; log ends:\n%s", err, h.Log())
		}
		return nil
	})
	return h
}

// Log is the end of the kube-apiserver's log, for a failing test's report.
func (h *HostAPIServer) Log() string {
	b, _ := os.ReadFile(h.log)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}
