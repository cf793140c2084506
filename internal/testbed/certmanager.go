package testbed

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// CertManagerVersion is the cert-manager the test bed runs (third_party/cert-manager/go.mod).
const CertManagerVersion = "v1.11.5"

// Issuers of the test bed's cert-manager, for clusters with tls.provider CertManager.
const (
	// CertManagerNamespace holds cert-manager's own objects: the CA's Secret behind CAClusterIssuer.
	CertManagerNamespace = "cert-manager"
	// SelfSignedClusterIssuer signs the CA of CAClusterIssuer.
	SelfSignedClusterIssuer = "steward-selfsigned"
	// CAClusterIssuer issues certificates from one CA (its Secret has ca.crt, which provider CertManager needs).
	CAClusterIssuer = "steward-ca"
)

func certManagerSet() binarySet {
	return binarySet{name: "cert-manager", version: CertManagerVersion, module: "cert-manager",
		packages: []string{"github.com/cert-manager/cert-manager/cmd/controller"}, ldflags: "-s -w", estimate: "about 4 minutes"}
}

// issuers: a self-signed ClusterIssuer, a CA certificate from it, and a CA ClusterIssuer on that CA, as
// cert-manager's documentation bootstraps a private CA.
const issuers = `apiVersion: v1
kind: Namespace
metadata:
  name: ` + CertManagerNamespace + `
---
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata:
  name: ` + SelfSignedClusterIssuer + `
spec:
  selfSigned: {}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: ` + CAClusterIssuer + `
  namespace: ` + CertManagerNamespace + `
spec:
  isCA: true
  commonName: steward-testbed-cert-manager-ca
  secretName: ` + CAClusterIssuer + `
  duration: 87600h
  privateKey:
    algorithm: ECDSA
    size: 256
  issuerRef:
    name: ` + SelfSignedClusterIssuer + `
    kind: ClusterIssuer
    group: cert-manager.io
---
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata:
  name: ` + CAClusterIssuer + `
spec:
  ca:
    secretName: ` + CAClusterIssuer + `
`

// startCertManager installs cert-manager's CRDs (of the pinned module), runs its controller as a process with
// the admin kubeconfig (no webhook: Steward's Certificates are valid by construction, and the controller checks
// them too), and creates the issuers, returning once CAClusterIssuer is Ready.
func (c *Cluster) startCertManager(ctx context.Context, bin string) error {
	crds, err := certManagerCRDs(ctx, filepath.Join(c.opts.ModuleRoot, "internal", "testbed", "third_party", "cert-manager"))
	if err != nil {
		return err
	}
	crdFile := c.state("cert-manager-crds.yaml")
	if err := os.WriteFile(crdFile, crds, 0o644); err != nil {
		return err
	}
	if err := c.kubectl(ctx, nil, "apply", "--server-side", "-f", crdFile); err != nil {
		return fmt.Errorf("install cert-manager CRDs: %w", err)
	}
	// kubectl wait fails at once, rather than waiting, on a CRD the API server has not given status conditions
	// yet (".status.conditions accessor error"), which a loaded machine makes likely: so it is asked again.
	if err := Eventually(ctx, 90*time.Second, time.Second, func() error {
		return c.kubectl(ctx, nil, "wait", "--for=condition=Established", "--timeout=30s", "crd/certificates.cert-manager.io",
			"crd/issuers.cert-manager.io", "crd/clusterissuers.cert-manager.io", "crd/certificaterequests.cert-manager.io")
	}); err != nil {
		return err
	}
	p, err := c.spawn("cert-manager", filepath.Join(bin, "controller"), "--kubeconfig="+c.Kubeconfig, "--leader-elect=false",
		"--cluster-resource-namespace="+CertManagerNamespace, "--metrics-listen-address=127.0.0.1:0", "--v=2")
	if err != nil {
		return err
	}
	if err := c.kubectl(ctx, strings.NewReader(issuers), "apply", "-f", "-"); err != nil {
		return fmt.Errorf("create cert-manager issuers: %w", err)
	}
	return c.waitFor(ctx, p, "cert-manager's CA ClusterIssuer is Ready", 2*time.Minute, func(ctx context.Context) error {
		return c.kubectl(ctx, nil, "wait", "--for=condition=Ready", "--timeout=5s", "clusterissuer/"+CAClusterIssuer)
	})
}

// certManagerCRDs reads the CRDs of the pinned cert-manager module. They are Helm templates; in this release
// only their labels are templated, and those lines are dropped.
func certManagerCRDs(ctx context.Context, modDir string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager")
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("find cert-manager's module: %w", err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds")
	files, err := filepath.Glob(filepath.Join(dir, "crd-*.yaml"))
	if err != nil {
		return nil, fmt.Errorf("find cert-manager's CRDs: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", dir)
	}
	var all bytes.Buffer
	for _, f := range files {
		data, err := os.ReadFile(f) // #nosec G304 -- a file of the pinned module in the Go module cache
		if err != nil {
			return nil, err
		}
		all.WriteString("---\n")
		for _, line := range strings.SplitAfter(string(data), "\n") {
			if !strings.Contains(line, "{{") {
				all.WriteString(line)
			}
		}
	}
	return all.Bytes(), nil
}

// kubectl runs the test bed's kubectl with the admin kubeconfig.
func (c *Cluster) kubectl(ctx context.Context, stdin *strings.Reader, args ...string) error {
	cmd := exec.CommandContext(ctx, c.KubectlPath(), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...) // #nosec G204 -- fixed binary, test bed arguments
	if stdin != nil {
		cmd.Stdin = stdin
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
