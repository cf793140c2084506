package backup

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"steward.dev/steward/internal/testbed"
)

// startAzurite runs the Azurite the test bed installs (cached under ~/.cache/steward/bin) on loopback with
// container ctr, and returns the configuration the agent would get for it: the development account's shared key
// over plain HTTP.
func startAzurite(t *testing.T) AzureConfig {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs the test bed's Azurite install")
	}
	dirs := testbed.CachedBinaries("azurite-*")
	if len(dirs) == 0 {
		t.Skip("Azurite not installed yet (start the test bed once)")
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node to run Azurite with")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	cmd := exec.Command(node, append([]string{testbed.AzuriteBlobCommand(dirs[len(dirs)-1])}, testbed.AzuriteArgs(t.TempDir(), "127.0.0.1", port)...)...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	endpoint := fmt.Sprintf("http://127.0.0.1:%d/%s", port, testbed.AzuriteAccount)
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := testbed.CreateAzureContainer(context.Background(), endpoint, "ctr")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Azurite does not serve: %v", err)
		}
		<-time.After(100 * time.Millisecond)
	}
	return AzureConfig{Account: testbed.AzuriteAccount, Container: "ctr", Endpoint: endpoint, AccountKey: testbed.AzuriteKey}
}

func azureContainer(t *testing.T, cfg AzureConfig) *AzureContainer {
	t.Helper()
	c, err := NewAzureContainer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestAzureStoreCommitsOnlyVerifiedSnapshots: checkStoreCommitsOnlyVerifiedSnapshots through staged blocks and a
// block list committed after the verified end.
func TestAzureStoreCommitsOnlyVerifiedSnapshots(t *testing.T) {
	c := azureContainer(t, startAzurite(t))
	checkStoreCommitsOnlyVerifiedSnapshots(t, func(k string) Store { return c.Store(k) }, func(p string) ObjectDir { return c.Dir(p) },
		"azure://devstoreaccount1/ctr/")
}

// TestAzureStoreConcurrentWritersOneKey: checkStoreConcurrentWritersOneKey through If-None-Match: * on the commit;
// the writers' staged blocks do not mix (each upload's block IDs are its own).
func TestAzureStoreConcurrentWritersOneKey(t *testing.T) {
	c := azureContainer(t, startAzurite(t))
	checkStoreConcurrentWritersOneKey(t, func(k string) Store { return c.Store(k) })
}

// TestAzureDir: checkDir.
func TestAzureDir(t *testing.T) {
	c := azureContainer(t, startAzurite(t))
	checkDir(t, func(p string) ObjectDir { return c.Dir(p) }, "azure://devstoreaccount1/ctr/")
}

// TestAzureSASToken: a SAS token reaches the container too; a wrong one is an unusable destination, and the
// signature is in no error.
func TestAzureSASToken(t *testing.T) {
	cfg := startAzurite(t)
	cfg.AccountKey, cfg.SASToken = "", "?sv=2021-08-06&ss=b&srt=sco&sp=rwdlac&se=2099-01-01T00:00:00Z&sig=c2VjcmV0LXNpZ25hdHVyZQ%3D%3D"
	_, err := azureContainer(t, cfg).Store("k.db").Put(context.Background(), NewVerifier(strings.NewReader(string(snapshotBytes(4096)))))
	if !errors.Is(err, ErrDestination) {
		t.Fatalf("a forged SAS token: %v", err)
	}
	if strings.Contains(err.Error(), "c2VjcmV0LXNpZ25hdHVyZQ") {
		t.Fatalf("the signature is in the error: %v", err)
	}
}

// TestAzureConfigs: credentials never go to an http:// endpoint, except the development account's published key;
// a malformed endpoint or key is an unusable destination, and the key is in no error.
func TestAzureConfigs(t *testing.T) {
	for name, cfg := range map[string]AzureConfig{
		"key over http":        {Account: "prod", Container: "c", Endpoint: "http://blob.internal/prod", AccountKey: "a2V5"},
		"SAS over http":        {Account: "prod", Container: "c", Endpoint: "http://blob.internal/prod", SASToken: "sig=x"},
		"endpoint sans scheme": {Account: "prod", Container: "c", Endpoint: "blob.internal"},
		"endpoint with query":  {Account: "prod", Container: "c", Endpoint: "https://blob.internal/?x=1"},
		"key not base64":       {Account: "prod", Container: "c", AccountKey: "not base64 at all!"},
	} {
		_, err := NewAzureContainer(cfg)
		if !errors.Is(err, ErrDestination) {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if cfg.AccountKey != "" && strings.Contains(err.Error(), cfg.AccountKey) {
			t.Errorf("%s: the key is in the error: %v", name, err)
		}
	}
	for name, cfg := range map[string]AzureConfig{
		"emulator key over http": {Account: "devstoreaccount1", Container: "c", Endpoint: "http://127.0.0.1:10000/devstoreaccount1", AccountKey: testbed.AzuriteKey},
		"anonymous over http":    {Account: "prod", Container: "c", Endpoint: "http://blob.internal/prod"},
		"public endpoint, key":   {Account: "prod", Container: "c", AccountKey: "a2V5"},
	} {
		if _, err := NewAzureContainer(cfg); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	c := azureContainer(t, AzureConfig{Account: "prod", Container: "c"})
	if got := c.Store("etcd/x.db").Location(); got != "azure://prod/c/etcd/x.db" {
		t.Errorf("location %s", got)
	}
	if got := c.client.URL(); got != "https://prod.blob.core.windows.net/c" {
		t.Errorf("default endpoint %s", got)
	}
}

// fakeEntra is Microsoft Entra ID as the default chain's workload identity credential meets it (instance
// discovery, the tenant's OpenID configuration, the token endpoint), plus a blob service that takes only the
// bearer token it issued. Every host's requests reach it through transport.
type fakeEntra struct {
	srv       *httptest.Server
	assertion string
	mu        sync.Mutex
	tokens    int
	bearers   []string
	sharedKey int
}

func newFakeEntra(t *testing.T, assertion string) *fakeEntra {
	f := &fakeEntra{assertion: assertion}
	f.srv = httptest.NewTLSServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeEntra) serve(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case strings.HasSuffix(r.URL.Path, "/discovery/instance"):
		_, _ = fmt.Fprint(w, `{"tenant_discovery_endpoint":"https://login.test/tenant1/v2.0/.well-known/openid-configuration","api-version":"1.1",`+
			`"metadata":[{"preferred_network":"login.test","preferred_cache":"login.test","aliases":["login.test"]}]}`)
	case strings.HasSuffix(r.URL.Path, "/.well-known/openid-configuration"):
		_, _ = fmt.Fprint(w, `{"token_endpoint":"https://login.test/tenant1/oauth2/v2.0/token","authorization_endpoint":"https://login.test/tenant1/oauth2/v2.0/authorize",`+
			`"issuer":"https://login.test/tenant1/v2.0","tenant_region_scope":"EU"}`)
	case strings.HasSuffix(r.URL.Path, "/oauth2/v2.0/token"):
		_ = r.ParseForm()
		if r.PostForm.Get("client_assertion") != f.assertion || r.PostForm.Get("client_id") != "client1" ||
			!strings.Contains(r.PostForm.Get("scope"), "https://storage.azure.com/.default") {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprint(w, `{"error":"invalid_client"}`)
			return
		}
		f.tokens++
		_, _ = fmt.Fprint(w, `{"token_type":"Bearer","expires_in":3600,"access_token":"federated-access-token"}`)
	case r.Host == "acct.blob.test":
		auth := r.Header.Get("Authorization")
		if strings.HasPrefix(auth, "SharedKey ") {
			f.sharedKey++
		}
		f.bearers = append(f.bearers, auth)
		if auth != "Bearer federated-access-token" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusAccepted) // Delete Blob
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

// transport sends every request, whatever its host, to the fake.
func (f *fakeEntra) transport() *http.Client {
	addr := f.srv.Listener.Addr().String()
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the test's own server
	}}
}

// TestAzureWorkloadIdentity: without a key or SAS token the agent's client takes the default chain, which on AKS
// is workload identity: it exchanges the federated token in AZURE_FEDERATED_TOKEN_FILE (which the webhook mounts)
// at AZURE_AUTHORITY_HOST for an access token and sends that as the bearer. With a key, no token is asked for.
func TestAzureWorkloadIdentity(t *testing.T) {
	f := newFakeEntra(t, "the-federated-service-account-token")
	tokenFile := filepath.Join(t.TempDir(), "azure-identity-token")
	if err := os.WriteFile(tokenFile, []byte(f.assertion), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"AZURE_CLIENT_ID": "client1", "AZURE_TENANT_ID": "tenant1", "AZURE_FEDERATED_TOKEN_FILE": tokenFile,
		"AZURE_AUTHORITY_HOST": "https://login.test/", "AZURE_CLIENT_SECRET": "", "AZURE_TOKEN_CREDENTIALS": ""} {
		t.Setenv(k, v)
		if v == "" { // a secret or a chain choice of the machine's would change the credential taken
			_ = os.Unsetenv(k)
		}
	}
	u, _ := url.Parse("https://acct.blob.test/acct")
	cfg := AzureConfig{Account: "acct", Container: "ctr", Endpoint: u.String(), Transport: f.transport()}
	if err := azureContainer(t, cfg).Store("etcd/x.db").Delete(context.Background()); err != nil {
		t.Fatalf("delete through workload identity: %v", err)
	}
	if f.tokens != 1 || len(f.bearers) != 1 || f.bearers[0] != "Bearer federated-access-token" {
		t.Fatalf("tokens issued %d, blob requests' authorization %q", f.tokens, f.bearers)
	}

	cfg.AccountKey = testbed.AzuriteKey
	_ = azureContainer(t, cfg).Store("etcd/x.db").Delete(context.Background()) // refused by the fake: not its token
	if f.tokens != 1 || f.sharedKey != 1 {
		t.Fatalf("with a key: tokens issued %d (want none more), shared-key requests %d", f.tokens, f.sharedKey)
	}
}
